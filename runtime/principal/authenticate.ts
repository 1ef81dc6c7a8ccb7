/**
 * The authentication stage of the pipeline: `Authorization` → principal, or 401. Each kind of
 * credential (API keys and management tokens, user access tokens) is a resolver; the stage asks
 * them in turn, so the subsystems that issue credentials never import each other.
 */
import { Problem, header, noteCaller, type ApiRequest } from '../http/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import { callerId, type Principal } from './principal.ts';

export interface Credential {
  /** The scheme word as sent (`Bearer`, `ApiKey`, a key prefix). */
  readonly scheme: string;
  readonly token: string;
  readonly bearer: boolean;
}

export interface CredentialResolver {
  /**
   * The principal for a credential this resolver recognises, undefined for one it does not (the
   * next resolver is asked); throws a 401 Problem (`unauthorized`) for one it recognises and refuses.
   */
  resolve(credential: Credential, tenant: Tenant): Promise<Principal | undefined>;
}

export function unauthorized(detail: string): Problem {
  return new Problem('unauthorized', detail, [], { 'www-authenticate': 'Bearer' });
}

/** The credential of the Authorization header, or undefined when it has none. */
export function readCredential(req: ApiRequest): Credential | undefined {
  const value = header(req, 'authorization');
  if (!value) return undefined;
  // `<scheme> +<credential>` (/^([A-Za-z][A-Za-z0-9_.+-]*) +(\S+)$/ on the trimmed value), read
  // without the match array and case-folded copy a RegExp exec and toLowerCase allocate per request.
  const text = value.trim();
  const space = text.indexOf(' ');
  const scheme = space > 0 ? text.slice(0, space) : '';
  let start = space + 1;
  while (text.charCodeAt(start) === 32) start++;
  const token = text.slice(start);
  if (!SCHEME.test(scheme) || token === '' || WHITESPACE.test(token)) {
    throw unauthorized('the Authorization header must be "<scheme> <credential>"');
  }
  return { scheme, token, bearer: BEARER.test(scheme) };
}

const SCHEME = /^[A-Za-z][A-Za-z0-9_.+-]*$/;
const WHITESPACE = /\s/;
const BEARER = /^bearer$/i;

export async function authenticate(
  req: ApiRequest,
  tenant: Tenant,
  resolvers: readonly CredentialResolver[],
): Promise<Principal> {
  const credential = readCredential(req);
  if (!credential) {
    throw unauthorized(
      'send credentials in the Authorization header: "Bearer <access token or API key>" or "<key prefix> <API key>"',
    );
  }
  for (const resolver of resolvers) {
    const principal = await resolver.resolve(credential, tenant);
    if (principal) {
      noteCaller(req, callerId(principal));
      return principal;
    }
  }
  throw unauthorized('the credential is not a valid API key or token, or it was revoked');
}
