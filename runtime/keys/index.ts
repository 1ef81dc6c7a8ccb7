export { CONTEXT_KEY, contextKeyProblem, isObjectPrototypeName } from '../model/index.ts';
export {
  CredentialStore,
  createApiKey,
  createManagementToken,
  listApiKeys,
  revokeApiKey,
  type ApiKeyRecord,
  type NewApiKey,
  type ResolvedApiKey,
} from './store.ts';
export {
  keyHandlers,
  keyOperations,
  keyProblems,
  type CreatedApiKey,
  type KeyRouteDeps,
} from './routes.ts';
