/**
 * The authentication stage of the pipeline: `Authorization` → principal, or 401. API keys and
 * management tokens today; user access tokens (JWS/JWE) join here.
 */
import type { CredentialStore } from '../keys/index.ts';
import { Problem } from '../http/index.ts';
import { header, type ApiRequest } from '../http/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import type { Principal } from './principal.ts';

function unauthorized(detail: string): Problem {
  return new Problem('unauthorized', detail, [], { 'www-authenticate': 'Bearer' });
}

export async function authenticate(req: ApiRequest, tenant: Tenant, credentials: CredentialStore): Promise<Principal> {
  const value = header(req, 'authorization');
  if (!value) throw unauthorized('send credentials in the Authorization header: "Bearer <API key>" or "<key prefix> <API key>"');
  const match = /^([A-Za-z][A-Za-z0-9_.+-]*) +(\S+)$/.exec(value.trim());
  if (!match) throw unauthorized('the Authorization header must be "<scheme> <credential>"');
  const scheme = match[1]!;
  const token = match[2]!;
  const bearer = scheme.toLowerCase() === 'bearer';

  if (bearer) {
    const management = await credentials.resolveManagementToken(token);
    if (management) return management;
  }
  const key = await credentials.resolveApiKey(token);
  if (!key) throw unauthorized('the credential is not a valid API key or token, or it was revoked');
  if (!bearer && scheme.toLowerCase() !== key.prefix.toLowerCase()) {
    throw unauthorized(`this API key is sent as "${key.prefix} <key>" or "Bearer <key>"`);
  }
  if (key.projectId !== tenant.projectId) throw unauthorized('this API key belongs to another project');
  if (key.principal.environment !== tenant.environment) {
    throw unauthorized(`this API key belongs to environment "${key.principal.environment}", not "${tenant.environment}"`);
  }
  return key.principal;
}
