/**
 * The system as a caller (docs/own-code.md "Acting as the system"): what `ctx.asSystem()`, jobs and
 * schedules act as. Its access grants every table, action, field and row with no role filter; its
 * principal holds no roles and is known by identity, so that code it runs sees `caller.kind: 'system'`.
 */
import type { ApiKeyPrincipal, Principal } from '../principal/index.ts';
import type { Access, Action, Grant } from '../query/index.ts';

/** Every row, every field: one rule without a filter, as a role `{ read: true, ... }` would give. */
function systemGrant(): Grant {
  return {
    rows: { kind: 'true' },
    fields: null,
    fieldRows: new Map(),
    rules: [{ rows: { kind: 'true' }, fields: null, presets: {}, filterFields: [] }],
  };
}

/**
 * One grant object per table and action, as a role's are: the compilers keep statements per grant
 * (runtime/query/kept-statements.ts), so one object for every table would hand a statement compiled
 * for one table to another.
 */
const systemGrants = new Map<Action, Map<string, Grant>>();

/** Grants everything on every table; the catalog still refuses what does not exist. */
export const SYSTEM_ACCESS: Access = {
  grant(table, action) {
    let byTable = systemGrants.get(action);
    if (!byTable) systemGrants.set(action, (byTable = new Map()));
    let grant = byTable.get(table);
    if (!grant) byTable.set(table, (grant = systemGrant()));
    return grant;
  },
};

/**
 * The id cursors and the expensive-read budget know the system by (runtime/principal callerId):
 * no API key id (a UUID) or user (`user:<id>`) is spelled so.
 */
const SYSTEM_KEY_ID = 'svcgen:system';

/** The id of an anonymous caller (a public endpoint without credentials): it holds no role. */
const ANONYMOUS_KEY_ID = 'svcgen:anonymous';

const principals = new Map<string, ApiKeyPrincipal>();
const anonymousPrincipals = new Map<string, ApiKeyPrincipal>();
const systemPrincipals = new WeakSet<Principal>();

/** The system's principal in `environment`: one object per environment, as grants are cached per principal. */
export function systemPrincipal(environment: string): ApiKeyPrincipal {
  let principal = principals.get(environment);
  if (!principal) {
    principal = Object.freeze({ kind: 'apiKey', keyId: SYSTEM_KEY_ID, environment, roles: [], context: {} });
    principals.set(environment, principal);
    systemPrincipals.add(principal);
  }
  return principal;
}

/** The principal of an anonymous caller in `environment`: no roles, so no grant on any table. */
export function anonymousPrincipal(environment: string): ApiKeyPrincipal {
  let principal = anonymousPrincipals.get(environment);
  if (!principal) {
    principal = Object.freeze({ kind: 'apiKey', keyId: ANONYMOUS_KEY_ID, environment, roles: [], context: {} });
    anonymousPrincipals.set(environment, principal);
  }
  return principal;
}

export function isSystemPrincipal(principal: Principal): boolean {
  return systemPrincipals.has(principal);
}
