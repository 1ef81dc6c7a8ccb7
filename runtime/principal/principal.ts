/** Who is calling. Every authenticated request carries exactly one principal. */
export interface ApiKeyPrincipal {
  readonly kind: 'apiKey';
  readonly keyId: string;
  readonly environment: string;
  readonly roles: readonly string[];
  /** Key-value pairs of the key, available to role filters as `$context.<key>`. */
  readonly context: Readonly<Record<string, string>>;
}

/** A signed-in user, from a verified access token. */
export interface UserPrincipal {
  readonly kind: 'user';
  readonly userId: string;
  readonly email: string;
  readonly environment: string;
  readonly roles: readonly string[];
  /** The session (refresh-token family) the access token belongs to. */
  readonly sessionId: string;
  /** The access token's `jti`. */
  readonly tokenId: string;
}

export interface ManagementPrincipal {
  readonly kind: 'management';
  /** `env` for SVCGEN_MANAGEMENT_TOKEN, otherwise the stored token's id. */
  readonly tokenId: string;
}

export type Principal = ApiKeyPrincipal | UserPrincipal | ManagementPrincipal;

/** Principals that hold roles and so may touch data. */
export type RolePrincipal = ApiKeyPrincipal | UserPrincipal;

/** The values role filters can refer to (`$user.id`, `$user.email`, `$context.<key>`), per principal. */
export function principalVariables(principal: Principal): Record<string, unknown> {
  if (principal.kind === 'apiKey') {
    const vars: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(principal.context)) vars[`$context.${k}`] = v;
    return vars;
  }
  if (principal.kind === 'user') return { '$user.id': principal.userId, '$user.email': principal.email };
  return {};
}

/** A stable id of the caller, for state kept per caller (idempotency keys). */
export function callerId(principal: Principal): string {
  switch (principal.kind) {
    case 'apiKey':
      return principal.keyId;
    case 'user':
      return `user:${principal.userId}`;
    case 'management':
      return `management:${principal.tokenId}`;
  }
}
