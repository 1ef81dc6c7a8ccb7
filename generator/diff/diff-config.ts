/**
 * Permission and configuration changes between two `svcgen.config.json` (`svcgen diff`), read in
 * the shape the server reads them (parsed by runtime/config, defaults filled in). Each change says
 * whether it widens access (someone may now read or write more: flagged, not breaking), narrows it
 * (a client may break: breaking, as model removals are) or neither. docs/diff.md describes them.
 * Roles' table rules are compared here, buckets' rules in diff-buckets.ts, both with access.ts.
 */
import type { Config } from '../../runtime/config/index.ts';
import type { TableSpec } from '../../runtime/model/index.ts';
import {
  type AccessEffect,
  type Action,
  type ConfigChange,
  canonical,
  change,
  compareRule,
  type Effective,
  effectiveRule,
} from './access.ts';
import { compareBuckets, describeRoleBuckets } from './diff-buckets.ts';

export type { AccessEffect, ConfigChange } from './access.ts';

const ACTIONS = ['read', 'create', 'update', 'delete'] as const satisfies readonly Action[];

/** As runtime/query/policy.ts applies roles: a named table's entry, else the role's `*` entry (whole, not per action). */
function effective(role: Config['roles'][string] | undefined, table: string, action: Action): Effective | null {
  if (!role) return null;
  const named = Object.hasOwn(role.tables, table);
  const entry = named ? role.tables[table] : Object.hasOwn(role.tables, '*') ? role.tables['*'] : undefined;
  return effectiveRule(entry?.[action], !named);
}

/** What a role grants, in a line: `Order: read/create/update; City: read; files in avatars: read`. */
function describeRole(config: Config, name: string): string {
  const role = config.roles[name];
  const parts = [
    ...Object.entries(role.tables)
      .map(([table, perms]) => [table, ACTIONS.filter((a) => effectiveRule(perms[a]) !== null)] as const)
      .filter(([, actions]) => actions.length > 0)
      .map(([table, actions]) => `${table}: ${actions.join('/')}`),
    ...describeRoleBuckets(config, name),
  ];
  return `${parts.length ? parts.join('; ') : 'nothing'}${role.signup ? '; open to signup' : ''}`;
}

/** Signup, a table grant or a bucket grant: the role lets someone do something. */
function grantsAnything(config: Config, name: string): boolean {
  return describeRole(config, name) !== 'nothing';
}

function compareRoles(before: Config, after: Config, tables: readonly TableSpec[], out: ConfigChange[]): void {
  const names = [...new Set([...Object.keys(before.roles), ...Object.keys(after.roles)])].sort();
  for (const name of names) {
    const was = Object.hasOwn(before.roles, name) ? before.roles[name] : undefined;
    const now = Object.hasOwn(after.roles, name) ? after.roles[name] : undefined;
    if (!was) {
      out.push(
        change(
          'role added',
          `role ${name}`,
          `grants ${describeRole(after, name)}`,
          grantsAnything(after, name) ? 'widens' : 'neutral',
        ),
      );
      continue;
    }
    if (!now) {
      out.push(
        change(
          'role removed',
          `role ${name}`,
          `granted ${describeRole(before, name)}`,
          grantsAnything(before, name) ? 'narrows' : 'neutral',
        ),
      );
      continue;
    }
    if (was.signup !== now.signup) {
      out.push(
        change(
          'role signup changed',
          `role ${name}`,
          now.signup ? 'now open to signup (roleId)' : 'no longer open to signup',
          now.signup ? 'widens' : 'narrows',
        ),
      );
    }
    for (const table of tables) {
      const fields = table.fields.map((f) => f.name);
      for (const action of ACTIONS) {
        compareRule(
          `${name}: ${table.name}.${action}`,
          action,
          effective(was, table.name, action),
          effective(now, table.name, action),
          fields,
          out,
        );
      }
    }
  }
}

/** Settings whose values must not be printed. */
const SECRET = new Set(['mail.smtpUrl', 'metrics.token']);

/** Every setting but roles and buckets, as path → value; objects are walked, arrays and scalars are values. */
function settings(config: Config): Map<string, unknown> {
  const out = new Map<string, unknown>();
  const walk = (value: unknown, at: string) => {
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) walk(v, at ? `${at}.${k}` : k);
    } else out.set(at, value);
  };
  // Roles and buckets are access, compared by compareRoles and compareBuckets (the other keys keep their order).
  const { roles: _roles, $schema: _schema, ...rest } = config;
  const { buckets: _buckets, ...storage } = config.storage;
  walk({ ...rest, storage }, '');
  return out;
}

const gainsLosses = (before: readonly unknown[], after: readonly unknown[]) => ({
  gains: after.filter((v) => !before.some((w) => canonical(w) === canonical(v))),
  losses: before.filter((v) => !after.some((w) => canonical(w) === canonical(v))),
});

const onOff = (before: unknown, after: unknown, on: AccessEffect, off: AccessEffect): AccessEffect =>
  after === true && before !== true ? on : before === true && after !== true ? off : 'neutral';

/**
 * Settings that decide who gets in or what reaches the server. Every other setting (rate limits,
 * timeouts, TTLs, pool sizes...) is listed as neutral: it changes no one's access.
 */
function settingAccess(
  path: string,
  before: unknown,
  after: unknown,
  old: Config,
  now: Config,
): { access: AccessEffect; breaking?: boolean } {
  switch (path) {
    case 'auth.enabled':
      return { access: onOff(before, after, 'widens', 'narrows') };
    case 'auth.emailVerification':
      // Off: signups log in without proving the address. On again: unverified accounts are held back.
      return { access: onOff(before, after, 'narrows', 'widens') };
    case 'auth.defaultRole':
      return { access: after === undefined ? 'narrows' : 'widens' };
    case 'auth.environments': {
      const { gains, losses } = gainsLosses(
        (before as string[] | undefined) ?? old.environments,
        (after as string[] | undefined) ?? now.environments,
      );
      return gains.length
        ? { access: 'widens', breaking: losses.length > 0 }
        : { access: losses.length ? 'narrows' : 'neutral' };
    }
    case 'cors.origins': {
      const { gains, losses } = gainsLosses(before as unknown[], after as unknown[]);
      return gains.length
        ? { access: 'widens', breaking: losses.length > 0 }
        : { access: losses.length ? 'narrows' : 'neutral' };
    }
    case 'cors.credentials':
      return { access: onOff(before, after, 'widens', 'narrows') };
    case 'metrics.enabled':
    case 'webhooks.allowHttp':
    case 'webhooks.allowPrivateTargets':
      // More reachable from outside (GET /metrics), or more the server can be made to call.
      return { access: onOff(before, after, 'widens', 'neutral') };
    default:
      return { access: 'neutral' };
  }
}

function show(path: string, value: unknown): string {
  if (value === undefined) return '(unset)';
  return SECRET.has(path) ? '(set)' : JSON.stringify(value);
}

function compareSettings(before: Config, after: Config, out: ConfigChange[]): void {
  const was = settings(before);
  const now = settings(after);
  for (const path of [...new Set([...was.keys(), ...now.keys()])]) {
    const [a, b] = [was.get(path), now.get(path)];
    if (canonical(a) === canonical(b)) continue;
    const detail =
      SECRET.has(path) && a !== undefined && b !== undefined
        ? '(set) → (set, changed)'
        : `${show(path, a)} → ${show(path, b)}`;
    const { access, breaking } = settingAccess(path, a, b, before, after);
    out.push(change('setting changed', path, detail, access, breaking ?? access === 'narrows'));
  }
}

/**
 * The changes from `before` to `after`, role rules compared per table of the new model (`tables`):
 * so a change to a role's `*` entry is listed for each table it reaches, and grants on a table the
 * model dropped are not listed (the table's removal is).
 */
export function diffConfigs(before: Config, after: Config, tables: readonly TableSpec[]): ConfigChange[] {
  const out: ConfigChange[] = [];
  compareRoles(
    before,
    after,
    [...tables].sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0)),
    out,
  );
  compareBuckets(before, after, out);
  compareSettings(before, after, out);
  return out;
}
