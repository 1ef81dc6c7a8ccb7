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
   * next resolver is asked); throws (or rejects with) a 401 Problem (`unauthorized`) for one it
   * recognises and refuses. A resolver answers at once when it can (a credential of another kind,
   * an API key this process has cached) and with a promise only when it must wait (the database,
   * a token's verification): most requests then authenticate without a promise or a microtask
   * turn per resolver (docs/deployment.md "Caches and revocation").
   */
  resolve(credential: Credential, tenant: Tenant): Principal | undefined | Promise<Principal | undefined>;
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

/**
 * The request's principal, or a 401 Problem thrown (at once) or rejected with (when a resolver had
 * to wait). The principal itself comes at once when every resolver asked could answer at once.
 */
export function authenticate(
  req: ApiRequest,
  tenant: Tenant,
  resolvers: readonly CredentialResolver[],
): Principal | Promise<Principal> {
  const credential = readCredential(req);
  if (!credential) {
    throw unauthorized(
      'send credentials in the Authorization header: "Bearer <access token or API key>" or "<key prefix> <API key>"',
    );
  }
  return resolveFrom(req, credential, tenant, resolvers, 0);
}

/** Asks the resolvers from `first` on, in order, until one recognises the credential. */
function resolveFrom(
  req: ApiRequest,
  credential: Credential,
  tenant: Tenant,
  resolvers: readonly CredentialResolver[],
  first: number,
): Principal | Promise<Principal> {
  for (let i = first; i < resolvers.length; i++) {
    const found = resolvers[i]!.resolve(credential, tenant);
    if (found instanceof Promise) {
      return found.then((principal) =>
        principal ? identified(req, principal) : resolveFrom(req, credential, tenant, resolvers, i + 1),
      );
    }
    if (found) return identified(req, found);
  }
  throw unauthorized('the credential is not a valid API key or token, or it was revoked');
}

function identified(req: ApiRequest, principal: Principal): Principal {
  noteCaller(req, callerId(principal));
  return principal;
}
