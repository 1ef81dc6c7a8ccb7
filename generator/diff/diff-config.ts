/**
 * Permission and configuration changes between two `svcgen.config.json` (`svcgen diff`), read in
 * the shape the server reads them (parsed by runtime/config, defaults filled in). Each change says
 * whether it widens access (someone may now read or write more: flagged, not breaking), narrows it
 * (a client may break: breaking, as model removals are) or neither. docs/diff.md describes them.
 */
import type { ActionRule, Config } from '../../runtime/config/index.ts';
import type { TableSpec } from '../../runtime/model/index.ts';

export type AccessEffect = 'widens' | 'narrows' | 'neutral';

export interface ConfigChange {
  readonly kind:
    | 'role added'
    | 'role removed'
    | 'role signup changed'
    | 'grant added'
    | 'grant removed'
    | 'fields widened'
    | 'fields narrowed'
    | 'row filter added'
    | 'row filter removed'
    | 'row filter changed'
    | 'preset added'
    | 'preset removed'
    | 'preset changed'
    | 'setting changed';
  /** `role <name>`, `<role>: <Table>.<action>` or a setting's path (`auth.defaultRole`). */
  readonly subject: string;
  readonly detail: string;
  readonly breaking: boolean;
  readonly access: AccessEffect;
}

const ACTIONS = ['read', 'create', 'update', 'delete'] as const;
type Action = (typeof ACTIONS)[number];

/** An action's rule as the server applies it: null when denied; `fields` null for every field. */
interface Effective {
  readonly filter: Readonly<Record<string, unknown>> | undefined;
  readonly fields: readonly string[] | null;
  /** The rule came from the role's `*` entry (the table is not named). */
  readonly viaWildcard: boolean;
}

/** Key order does not matter to a filter or an operator object, so JSON with sorted keys compares them. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

/** As runtime/query/policy.ts applies roles: a named table's entry, else the role's `*` entry (whole, not per action). */
function effective(role: Config['roles'][string] | undefined, table: string, action: Action): Effective | null {
  if (!role) return null;
  const named = Object.hasOwn(role.tables, table);
  const entry = named ? role.tables[table] : Object.hasOwn(role.tables, '*') ? role.tables['*'] : undefined;
  const rule: ActionRule | undefined = entry?.[action];
  if (rule === undefined || rule === false) return null;
  if (rule === true) return { filter: undefined, fields: null, viaWildcard: !named };
  // An empty filter adds no condition: the same as none.
  const filter = rule.filter && Object.keys(rule.filter).length > 0 ? rule.filter : undefined;
  return { filter, fields: rule.fields ?? null, viaWildcard: !named };
}

function describeRule(rule: Effective, action: Action): string {
  const rows = rule.filter ? `rows where ${canonical(rule.filter)}` : 'all rows';
  const fields =
    rule.fields === null ? 'all fields' : rule.fields.length ? `fields ${rule.fields.join(', ')}` : 'no fields';
  // Delete takes no body: its field list decides nothing.
  return `${rows}${action === 'delete' ? '' : `, ${fields}`}${rule.viaWildcard ? ' (via *)' : ''}`;
}

/** Filter entries that fill a field on create (docs/permissions.md, Presets): `field: "$var"` or `{ "equals": "$var" }`. */
function presets(filter: Readonly<Record<string, unknown>> | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const [field, raw] of Object.entries(filter ?? {})) {
    if (field.includes('.')) continue;
    const value =
      raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? (raw as Record<string, unknown>).equals : raw;
    if (typeof value === 'string' && value.startsWith('$')) out.set(field, value);
  }
  return out;
}

/**
 * Every entry of a filter must hold, so a filter holding all of another's entries, and more, lets
 * through no more rows: provably narrower. Anything else counts as wider (an operator's values
 * are not compared), which errs towards flagging.
 */
function strictlyNarrower(
  after: Readonly<Record<string, unknown>>,
  before: Readonly<Record<string, unknown>>,
): boolean {
  const beforeKeys = Object.keys(before);
  return (
    Object.keys(after).length > beforeKeys.length &&
    beforeKeys.every((k) => Object.hasOwn(after, k) && canonical(after[k]) === canonical(before[k]))
  );
}

function change(
  kind: ConfigChange['kind'],
  subject: string,
  detail: string,
  access: AccessEffect,
  breaking = access === 'narrows',
): ConfigChange {
  return { kind, subject, detail, breaking, access };
}

function compareRule(
  subject: string,
  action: Action,
  was: Effective | null,
  now: Effective | null,
  tableFields: readonly string[],
  out: ConfigChange[],
): void {
  if (!was && !now) return;
  if (!was) return void out.push(change('grant added', subject, describeRule(now!, action), 'widens'));
  if (!now) return void out.push(change('grant removed', subject, describeRule(was, action), 'narrows'));
  if (action !== 'delete') {
    // Against the new model's fields: what a field list means now, not fields the model dropped.
    const before = new Set((was.fields ?? tableFields).filter((f) => tableFields.includes(f)));
    const after = new Set((now.fields ?? tableFields).filter((f) => tableFields.includes(f)));
    const gained = [...after].filter((f) => !before.has(f));
    const lost = [...before].filter((f) => !after.has(f));
    if (gained.length) out.push(change('fields widened', subject, `adds ${gained.join(', ')}`, 'widens'));
    if (lost.length) out.push(change('fields narrowed', subject, `drops ${lost.join(', ')}`, 'narrows'));
  }
  const [a, b] = [was.filter, now.filter];
  if (canonical(a) === canonical(b)) return;
  if (!a) out.push(change('row filter added', subject, `rows where ${canonical(b)}`, 'narrows'));
  else if (!b)
    out.push(change('row filter removed', subject, `was rows where ${canonical(a)}: now all rows`, 'widens'));
  else
    out.push(
      change(
        'row filter changed',
        subject,
        `${canonical(a)} → ${canonical(b)}`,
        strictlyNarrower(b, a) ? 'narrows' : 'widens',
      ),
    );
  if (action !== 'create') return;
  const [pa, pb] = [presets(a), presets(b)];
  for (const [field, variable] of pb) {
    const old = pa.get(field);
    // A client that leaves the field out now gets another value: it may break.
    if (old === undefined)
      out.push(change('preset added', subject, `${field} = ${variable} when a create leaves it out`, 'neutral'));
    else if (old !== variable)
      out.push(change('preset changed', subject, `${field}: ${old} → ${variable}`, 'neutral', true));
  }
  for (const [field, variable] of pa) {
    if (!pb.has(field))
      out.push(
        change(
          'preset removed',
          subject,
          `${field} (was ${variable}): a create that leaves it out no longer gets it filled`,
          'neutral',
          true,
        ),
      );
  }
}

/** What a role grants, in a line: `Order: read/create/update; City: read`. */
function describeRole(role: Config['roles'][string]): string {
  const parts = Object.entries(role.tables)
    .map(([table, perms]) => [table, ACTIONS.filter((a) => perms[a] !== undefined && perms[a] !== false)] as const)
    .filter(([, actions]) => actions.length > 0)
    .map(([table, actions]) => `${table}: ${actions.join('/')}`);
  return `${parts.length ? parts.join('; ') : 'nothing'}${role.signup ? '; open to signup' : ''}`;
}

function grantsAnything(role: Config['roles'][string]): boolean {
  return (
    role.signup ||
    Object.values(role.tables).some((perms) => ACTIONS.some((a) => perms[a] !== undefined && perms[a] !== false))
  );
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
          `grants ${describeRole(now!)}`,
          grantsAnything(now!) ? 'widens' : 'neutral',
        ),
      );
      continue;
    }
    if (!now) {
      out.push(
        change(
          'role removed',
          `role ${name}`,
          `granted ${describeRole(was)}`,
          grantsAnything(was) ? 'narrows' : 'neutral',
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

/** Every setting but roles, as path → value; objects are walked, arrays and scalars are values. */
function settings(config: Config): Map<string, unknown> {
  const out = new Map<string, unknown>();
  const walk = (value: unknown, at: string) => {
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) walk(v, at ? `${at}.${k}` : k);
    } else out.set(at, value);
  };
  const { roles: _roles, $schema: _schema, ...rest } = config;
  walk(rest, '');
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
  compareSettings(before, after, out);
  return out;
}
