/**
 * One rule of one role, before and after (`svcgen diff`, docs/diff.md "Permission changes"): a
 * table's rule and a bucket's rule are compared by the same code, so a grant, a row filter or a
 * preset means the same widening or narrowing wherever it sits.
 */

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
    | 'bucket added'
    | 'bucket removed'
    | 'bucket made public'
    | 'bucket made private'
    | 'setting changed';
  /** `role <name>`, `<role>: <Table>.<action>`, `<role>: bucket <name>.<action>`, `bucket <name>` or a setting's path. */
  readonly subject: string;
  readonly detail: string;
  readonly breaking: boolean;
  readonly access: AccessEffect;
}

export type Action = 'read' | 'create' | 'update' | 'delete';

/** A rule as the server applies it: null when denied; `fields` null for every field. */
export interface Effective {
  readonly filter: Readonly<Record<string, unknown>> | undefined;
  readonly fields: readonly string[] | null;
  /** The rule came from the role's `*` entry (the table is not named). */
  readonly viaWildcard: boolean;
}

/** `true`, `false`, absent or `{ filter?, fields? }` (a table's or a bucket's) as the server applies it. */
export function effectiveRule(
  rule: boolean | { filter?: Readonly<Record<string, unknown>>; fields?: readonly string[] } | undefined,
  viaWildcard = false,
): Effective | null {
  if (rule === undefined || rule === false) return null;
  if (rule === true) return { filter: undefined, fields: null, viaWildcard };
  // An empty filter adds no condition: the same as none.
  const filter = rule.filter && Object.keys(rule.filter).length > 0 ? rule.filter : undefined;
  return { filter, fields: rule.fields ?? null, viaWildcard };
}

/** Key order does not matter to a filter or an operator object, so JSON with sorted keys compares them. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

export function change(
  kind: ConfigChange['kind'],
  subject: string,
  detail: string,
  access: AccessEffect,
  breaking = access === 'narrows',
): ConfigChange {
  return { kind, subject, detail, breaking, access };
}

/** `fields`: whether the rule has a field list (a table's read, create and update do; a bucket's rules and delete do not). */
function describeRule(rule: Effective, fields: boolean): string {
  const rows = rule.filter ? `rows where ${canonical(rule.filter)}` : 'all rows';
  const list =
    rule.fields === null ? 'all fields' : rule.fields.length ? `fields ${rule.fields.join(', ')}` : 'no fields';
  return `${rows}${fields ? `, ${list}` : ''}${rule.viaWildcard ? ' (via *)' : ''}`;
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

/**
 * The changes from one rule to the other. `fields` is the table's fields (a field list is read
 * against them), or undefined where rules have no field list (a bucket's, docs/storage.md).
 */
export function compareRule(
  subject: string,
  action: Action,
  was: Effective | null,
  now: Effective | null,
  fields: readonly string[] | undefined,
  out: ConfigChange[],
): void {
  if (!was && !now) return;
  // Delete takes no body: its field list decides nothing.
  const listed = fields !== undefined && action !== 'delete';
  if (!was) return void out.push(change('grant added', subject, describeRule(now!, listed), 'widens'));
  if (!now) return void out.push(change('grant removed', subject, describeRule(was, listed), 'narrows'));
  if (listed) {
    // Against the new model's fields: what a field list means now, not fields the model dropped.
    const before = new Set((was.fields ?? fields).filter((f) => fields.includes(f)));
    const after = new Set((now.fields ?? fields).filter((f) => fields.includes(f)));
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
