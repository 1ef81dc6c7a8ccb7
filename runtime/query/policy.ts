/**
 * Role permissions (docs/permissions.md) compiled once into lookups; a caller's grant for one
 * (table, action) is built on first use and kept with the principal. The compilers ask for grants
 * themselves (runtime/query/access.ts), so every table a statement touches gets its rows and fields.
 */
import type { ActionRule, Config } from '../config/index.ts';
import { isOperator, OPERATOR_DEFINITIONS } from '../model/index.ts';
import { principalVariables, type Principal, type RolePrincipal } from '../principal/index.ts';
import {
  and,
  or,
  type Access,
  type Action,
  type Condition,
  type Grant,
  type Operator,
  type RoleRule,
} from './description.ts';

interface CompiledRule {
  /** Row filter with variables (`$user.id`, `$context.x`) still unresolved. */
  readonly filter: Record<string, unknown> | undefined;
  readonly fields: ReadonlySet<string> | null;
}

/** Role filters take the operators marked for them (not the date helpers, which move with the clock). */
function inRoleFilters(op: string): op is Operator {
  return isOperator(op) && OPERATOR_DEFINITIONS[op].inRoleFilters;
}

function compileRule(rule: ActionRule | undefined): CompiledRule | null {
  if (rule === undefined || rule === false) return null;
  if (rule === true) return { filter: undefined, fields: null };
  return { filter: rule.filter, fields: rule.fields ? new Set(rule.fields) : null };
}

function isVariable(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith('$');
}

function resolveValue(
  value: unknown,
  variables: ReadonlyMap<string, unknown>,
): { ok: true; value: unknown } | { ok: false } {
  if (isVariable(value)) return variables.has(value) ? { ok: true, value: variables.get(value) } : { ok: false };
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    for (const v of value) {
      const r = resolveValue(v, variables);
      if (!r.ok) return r;
      out.push(r.value);
    }
    return { ok: true, value: out };
  }
  return { ok: true, value };
}

/**
 * Types a role filter's value for its field: undefined when it cannot be a value of that field,
 * which makes the filter match no row.
 */
export type RoleOperand = (
  table: string,
  path: readonly string[],
  op: Operator,
  value: unknown,
) => { value: unknown } | undefined;

/**
 * A role filter for one caller: its condition (a variable the caller lacks, or a value that cannot
 * be one of the field's, matches no row: fail closed) and the presets of its variable equalities.
 */
function resolveRule(
  table: string,
  rule: CompiledRule,
  variables: ReadonlyMap<string, unknown>,
  operand: RoleOperand,
): RoleRule {
  if (rule.filter === undefined) return { rows: { kind: 'true' }, fields: rule.fields, presets: {}, filterFields: [] };
  const items: Condition[] = [];
  const presets: Record<string, unknown> = {};
  let matchesNothing = false;
  for (const [field, raw] of Object.entries(rule.filter)) {
    const operators =
      raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? Object.entries(raw) : [['equals', raw] as const];
    // An operator object naming no operator would add no condition: it matches nothing instead.
    if (operators.length === 0) matchesNothing = true;
    for (const [op, value] of operators) {
      const r = resolveValue(value, variables);
      const path = field.split('.');
      const typed = r.ok && r.value !== undefined && inRoleFilters(op) ? operand(table, path, op, r.value) : undefined;
      if (!typed) {
        matchesNothing = true;
        continue;
      }
      items.push({ kind: 'compare', path, op: op as Operator, value: typed.value });
      // The typed value: what the field's create validator takes (a number for an Int field, ...).
      if (op === 'equals' && path.length === 1 && isVariable(value)) presets[field] = typed.value;
    }
  }
  return {
    rows: matchesNothing ? { kind: 'false' } : and(...items),
    fields: rule.fields,
    presets: matchesNothing ? {} : presets,
    filterFields: Object.keys(rule.filter),
  };
}

/** The rows on which each field is visible, for fields that not every rule allows (Grant.fieldRows). */
function fieldRows(
  rules: readonly RoleRule[],
  fields: ReadonlySet<string> | null,
  allFields: readonly string[],
): Map<string, Condition> {
  const out = new Map<string, Condition>();
  if (rules.every((r) => r.fields === null) || rules.length < 2) return out;
  for (const field of fields ?? allFields) {
    const allowing = rules.filter((r) => r.fields === null || r.fields.has(field));
    if (allowing.length === rules.length) continue;
    const rows = or(...allowing.map((r) => r.rows));
    if (rows.kind !== 'true') out.set(field, rows);
  }
  return out;
}

export class Policy {
  /** role → table → action → rule; table `*` is the fallback for tables a role does not name. */
  private readonly rules = new Map<string, Map<string, Map<Action, CompiledRule | null>>>();
  /** Per principal, per action: table → grant (null: denied). Compilers ask many times per statement. */
  private readonly grants = new WeakMap<Principal, Record<Action, Map<string, Grant | null>>>();
  private readonly variables = new WeakMap<Principal, ReadonlyMap<string, unknown>>();
  private readonly accesses = new WeakMap<Principal, Access>();

  constructor(
    roles: Config['roles'],
    private readonly operand: RoleOperand,
    /** Field names per table, in model order (for per-field visibility). */
    private readonly tableFields: (table: string) => readonly string[],
  ) {
    for (const [roleName, role] of Object.entries(roles)) {
      const tables = new Map<string, Map<Action, CompiledRule | null>>();
      for (const [table, perms] of Object.entries(role.tables)) {
        const actions = new Map<Action, CompiledRule | null>();
        for (const action of ['read', 'create', 'update', 'delete'] as const)
          actions.set(action, compileRule(perms[action]));
        tables.set(table, actions);
      }
      this.rules.set(roleName, tables);
    }
  }

  roleNames(): string[] {
    return [...this.rules.keys()];
  }

  /** The caller's access, as the compilers ask for it (one object per principal, not per request). */
  access(principal: Principal): Access {
    let access = this.accesses.get(principal);
    if (!access) {
      access = { grant: (table, action) => this.grant(principal, table, action) };
      this.accesses.set(principal, access);
    }
    return access;
  }

  /**
   * The grant of `principal` for `action` on `table`, or null when no role allows it. Several
   * roles: rows are the union of theirs, and each field is visible on the rows of the roles listing it.
   */
  grant(principal: Principal, table: string, action: Action): Grant | null {
    if (principal.kind === 'management') return null;
    const grants = this.grantsOf(principal)[action];
    let grant = grants.get(table);
    if (grant === undefined) grants.set(table, (grant = this.compileGrant(principal, table, action)));
    return grant;
  }

  /** Principals are immutable and reused while their credential is cached: so are their grants. */
  private grantsOf(principal: RolePrincipal): Record<Action, Map<string, Grant | null>> {
    let byAction = this.grants.get(principal);
    if (!byAction)
      this.grants.set(
        principal,
        (byAction = { read: new Map(), create: new Map(), update: new Map(), delete: new Map() }),
      );
    return byAction;
  }

  private compileGrant(principal: RolePrincipal, table: string, action: Action): Grant | null {
    const compiled: CompiledRule[] = [];
    for (const role of principal.roles) {
      // Own properties only: a role named like an Object.prototype member is not a role.
      const tables = this.rules.get(role);
      const rule = (tables?.get(table) ?? tables?.get('*'))?.get(action);
      if (rule) compiled.push(rule);
    }
    if (compiled.length === 0) return null;
    let variables = this.variables.get(principal);
    if (!variables) this.variables.set(principal, (variables = new Map(Object.entries(principalVariables(principal)))));
    const rules = compiled.map((rule) => resolveRule(table, rule, variables, this.operand));
    let fields: Set<string> | null = new Set();
    for (const rule of rules) {
      if (rule.fields === null) fields = null;
      else if (fields) for (const f of rule.fields) fields.add(f);
    }
    return {
      rows: or(...rules.map((r) => r.rows)),
      fields,
      fieldRows: action === 'read' ? fieldRows(rules, fields, this.tableFields(table)) : new Map(),
      rules,
    };
  }
}

/**
 * How a write of `fields` is decided under several roles (docs/permissions.md "Several roles",
 * CONTRACT §5): a row's writable fields are the union of the lists of the roles that allow the
 * action on that row, so the write may change a row when, for every field, some rule listing it
 * holds there. Every condition uses the rules' own filters (variables resolved for the caller).
 */
export interface WriteDecision {
  /** Rows on which every one of the fields is writable: those an update changes, and what a written row must match afterwards. */
  readonly rows: Condition;
  /** Rows some rule allows the action on at all, whatever the fields. */
  readonly anyRows: Condition;
  /**
   * Each field that is not writable on every row of `anyRows`, with the rows it is writable on
   * (the rules listing it): what names the fields of a 403 on a row the caller may update.
   */
  readonly fieldRows: ReadonlyMap<string, Condition>;
  /** The rules that bear on the fields (listing one of them; all when there are none): presets and `row_filter`'s field names come from them. */
  readonly rules: readonly RoleRule[];
  /** Equal for two field lists that are decided alike (bulk records sharing one statement). */
  readonly key: string;
}

/** The decision for `fields` of a write grant (fields no rule lists make it match no row: the caller refuses them first). */
export function writeDecision(grant: Grant, fields: readonly string[]): WriteDecision {
  const anyRows = or(...grant.rules.map((r) => r.rows));
  const listing = (field: string) => grant.rules.filter((r) => r.fields === null || r.fields.has(field));
  // Fields listed by the same rules share one condition.
  const groups = new Map<string, { rules: RoleRule[]; fields: string[] }>();
  for (const field of fields) {
    const rules = listing(field);
    const key = rules.map((r) => grant.rules.indexOf(r)).join(',');
    const group = groups.get(key);
    if (group) group.fields.push(field);
    else groups.set(key, { rules, fields: [field] });
  }
  const fieldRows = new Map<string, Condition>();
  const conditions: Condition[] = [];
  for (const group of groups.values()) {
    const rows = or(...group.rules.map((r) => r.rows));
    conditions.push(rows);
    if (group.rules.length < grant.rules.length && rows.kind !== 'true')
      for (const field of group.fields) fieldRows.set(field, rows);
  }
  const bearing =
    fields.length === 0
      ? grant.rules
      : grant.rules.filter((r) => fields.some((f) => r.fields === null || r.fields.has(f)));
  return {
    rows: fields.length === 0 ? anyRows : and(...conditions),
    anyRows,
    fieldRows,
    rules: bearing,
    key: [...groups.keys()].sort().join(';'),
  };
}

/** Values the rules fill in on create; a field two rules would fill differently is left alone. */
export function presetsOf(rules: readonly RoleRule[]): Record<string, unknown> {
  const presets: Record<string, unknown> = {};
  const conflicting = new Set<string>();
  for (const rule of rules) {
    for (const [field, value] of Object.entries(rule.presets)) {
      if (Object.hasOwn(presets, field) && presets[field] !== value) conflicting.add(field);
      else presets[field] = value;
    }
  }
  for (const field of conflicting) delete presets[field];
  return presets;
}
