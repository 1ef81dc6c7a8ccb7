export {
  principalVariables,
  callerId,
  type Principal,
  type ApiKeyPrincipal,
  type UserPrincipal,
  type ManagementPrincipal,
  type RolePrincipal,
} from './principal.ts';
export {
  authenticate,
  readCredential,
  unauthorized,
  type Credential,
  type CredentialResolver,
} from './authenticate.ts';
