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
