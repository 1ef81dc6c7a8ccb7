export { serverSecret } from './server-secrets.ts';
export { SecretBox } from './secret-box.ts';
export { pooledRandomBytes } from './random.ts';
