/** The password rule (docs/api.md §3 "Sign up and confirm"): at least `minLength` characters, a letter and a digit, at most 72 bytes (bcrypt's limit). */
import { PASSWORD_MAX_BYTES } from '../model/wire/index.ts';
import type { Violation } from './auth-errors.ts';

export function passwordViolations(password: string, field: string, minLength: number): Violation[] {
  const violations: Violation[] = [];
  if ([...password].length < minLength)
    violations.push({ field, rule: 'min_length', message: `${field} must be at least ${minLength} characters long` });
  if (!/\p{L}/u.test(password))
    violations.push({ field, rule: 'letter', message: `${field} must contain at least one letter` });
  if (!/\p{Nd}/u.test(password))
    violations.push({ field, rule: 'digit', message: `${field} must contain at least one digit` });
  if (Buffer.byteLength(password, 'utf8') > PASSWORD_MAX_BYTES) {
    violations.push({
      field,
      rule: 'max_bytes',
      message: `${field} must be at most ${PASSWORD_MAX_BYTES} bytes (UTF-8)`,
    });
  }
  return violations;
}
