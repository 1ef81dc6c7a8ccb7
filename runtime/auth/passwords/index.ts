export {
  createPasswordHasher,
  DEFAULT_PASSWORD_COST,
  type PasswordHasher,
  type PasswordHasherOptions,
} from './password-hasher.ts';
