/**
 * How a caller's write is decided before any SQL is written (docs/permissions.md "Writing",
 * "Several roles"): refused (WriteRefused, a 403) or the rows on which the caller may write the
 * fields, and the values a create gets from its roles' filters. Kept per caller and shape, so
 * repeated writes of one shape decide once; compile-write.ts compiles the statements from these.
 */
import type { CatalogTable } from './catalog.ts';
import type { Scope } from './compile-condition.ts';
import type { Action } from './description.ts';
import { PerCallerCache } from './per-caller.ts';
import { presetsOf, writeDecision, type WriteDecision } from './policy.ts';

/** The caller may not do this write at all, or not with these fields: a 403 for the front end. */
export class WriteRefused extends Error {
  constructor(
    message: string,
    /** The fields at fault (none when the action itself is denied). */
    readonly fields: readonly string[],
  ) {
    super(message);
    this.name = 'WriteRefused';
  }
}

// A write's decision and a create's presets depend only on the caller's grant for the action (its
// roles' rules, their variables such as `$user.id` resolved once per principal: policy.ts; no rule
// value moves with the clock) and the set of fields written: kept per caller (its Access, one per
// principal), table, action and field set, so repeated writes of one shape decide once.
const keptDecisions = new PerCallerCache<WriteDecision>(1_000);
const keptPresets = new PerCallerCache<Readonly<Record<string, unknown>>>(1_000);

/** The same text for every order of `fields`. */
function fieldSet(fields: readonly string[]): string[] {
  return [...fields].sort();
}

/**
 * How a write of `fields` is decided (docs/permissions.md "Writing", "Several roles"): refused
 * (403) when no role allows the action, or names a field that no role allowing it lists;
 * otherwise the rows on which the caller may write every one of the fields (policy.ts
 * writeDecision: per row, the union of the lists of the roles allowing the action there).
 */
export function writeRules(
  scope: Scope,
  table: CatalogTable,
  action: Exclude<Action, 'read'>,
  fields: readonly string[],
): WriteDecision {
  const sorted = fieldSet(fields);
  const key = `${table.spec.name}\n${action}\n${sorted.join(',')}`;
  // Only decisions are kept: a refusal of the same caller and field set is thrown afresh below.
  const kept = keptDecisions.get(scope.access, key);
  if (kept) return kept;
  const grant = scope.access.grant(table.spec.name, action);
  if (!grant) throw new WriteRefused(`your role may not ${action} ${table.spec.name} records`, []);
  const forbidden = fields.filter((f) => grant.fields !== null && !grant.fields.has(f));
  if (forbidden.length > 0)
    throw new WriteRefused(`your role may not write ${forbidden.join(', ')} of ${table.spec.name}`, forbidden);
  const decision = writeDecision(grant, sorted);
  keptDecisions.set(scope.access, key, decision);
  return decision;
}

/** Values a create of `fields` gets from the filters of the roles bearing on them (`$user.id`, ...) where the body has none. */
export function createPresets(
  scope: Scope,
  table: CatalogTable,
  fields: readonly string[],
): Readonly<Record<string, unknown>> {
  const key = `${table.spec.name}\n${fieldSet(fields).join(',')}`;
  const kept = keptPresets.get(scope.access, key);
  if (kept) return kept;
  const presets = presetsOf(writeRules(scope, table, 'create', fields).rules);
  for (const f of fields) delete presets[f];
  keptPresets.set(scope.access, key, Object.freeze(presets));
  return presets;
}

/** Whether two writeRules answers decide alike (so one row filter check serves both records). */
export function sameRules(a: WriteDecision, b: WriteDecision): boolean {
  return a.key === b.key;
}
