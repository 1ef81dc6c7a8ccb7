/**
 * Role permissions (CONTRACT §5) compiled once into lookups; a request asks for the grant of one
 * (table, action) and gets conditions and a field mask to put into its query.
 */
import type { ActionRule, Config } from '../config/index.ts';
import { principalVariables, type Principal, type RolePrincipal } from '../principal/index.ts';
import { and, type Condition, type Grant, type Operator } from '../query/description.ts';

export type Action = 'read' | 'create' | 'update' | 'delete';

interface CompiledRule {
  /** Row filter with variables (`$user.id`, `$context.x`) still unresolved. */
  readonly filter: Record<string, unknown> | undefined;
  readonly fields: ReadonlySet<string> | null;
}

const OPERATOR_NAMES = new Set<string>([
  'equals', 'not_equals', 'gt', 'gte', 'lt', 'lte', 'contains', 'starts_with', 'ends_with', 'in', 'not_in', 'between', 'is_empty', 'is_not_empty',
]);

function compileRule(rule: ActionRule | undefined): CompiledRule | null {
  if (rule === undefined || rule === false) return null;
  if (rule === true) return { filter: undefined, fields: null };
  return { filter: rule.filter, fields: rule.fields ? new Set(rule.fields) : null };
}

function resolveValue(value: unknown, variables: Record<string, unknown>): { ok: true; value: unknown } | { ok: false } {
  if (typeof value === 'string' && value.startsWith('$')) {
    return value in variables ? { ok: true, value: variables[value] } : { ok: false };
  }
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
export type RoleOperand = (table: string, path: readonly string[], op: Operator, value: unknown) => { value: unknown } | undefined;

/**
 * A role filter as a condition; a variable the principal lacks, or a value that cannot be one of
 * the field's, matches no row (fail closed).
 */
function filterCondition(table: string, filter: Record<string, unknown>, variables: Record<string, unknown>, operand: RoleOperand): Condition {
  const items: Condition[] = [];
  const compare = (field: string, op: string, value: unknown): boolean => {
    const r = resolveValue(value, variables);
    if (!r.ok || r.value === undefined || !OPERATOR_NAMES.has(op)) return false;
    const path = field.split('.');
    const typed = operand(table, path, op as Operator, r.value);
    if (!typed) return false;
    items.push({ kind: 'compare', path, op: op as Operator, value: typed.value });
    return true;
  };
  for (const [field, raw] of Object.entries(filter)) {
    const operators = raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? Object.entries(raw) : [['equals', raw] as const];
    for (const [op, value] of operators) if (!compare(field, op, value)) return { kind: 'false' };
  }
  return and(...items);
}

export class Policy {
  /** role → table → action → rule; table `*` is the fallback for tables a role does not name. */
  private readonly rules = new Map<string, Map<string, Map<Action, CompiledRule | null>>>();
  private readonly grants = new WeakMap<Principal, Map<string, Grant | null>>();

  constructor(
    roles: Config['roles'],
    private readonly operand: RoleOperand,
  ) {
    for (const [roleName, role] of Object.entries(roles)) {
      const tables = new Map<string, Map<Action, CompiledRule | null>>();
      for (const [table, perms] of Object.entries(role.tables)) {
        const actions = new Map<Action, CompiledRule | null>();
        for (const action of ['read', 'create', 'update', 'delete'] as const) actions.set(action, compileRule(perms[action]));
        tables.set(table, actions);
      }
      this.rules.set(roleName, tables);
    }
  }

  roleNames(): string[] {
    return [...this.rules.keys()];
  }

  private rulesFor(roles: readonly string[], table: string, action: Action): CompiledRule[] {
    const out: CompiledRule[] = [];
    for (const role of roles) {
      const tables = this.rules.get(role);
      const rule = (tables?.get(table) ?? tables?.get('*'))?.get(action);
      if (rule) out.push(rule);
    }
    return out;
  }

  /**
   * The grant of `principal` for `action` on `table`, or null when no role allows it. Several
   * roles: rows and fields are the union of theirs.
   */
  grant(principal: Principal, table: string, action: Action): Grant | null {
    if (principal.kind === 'management') return null;
    // Principals are immutable and reused while their credential is cached: so are their grants.
    let grants = this.grants.get(principal);
    if (!grants) this.grants.set(principal, (grants = new Map()));
    const key = `${action} ${table}`;
    let grant = grants.get(key);
    if (grant === undefined) grants.set(key, (grant = this.compileGrant(principal, table, action)));
    return grant;
  }

  private compileGrant(principal: RolePrincipal, table: string, action: Action): Grant | null {
    const rules = this.rulesFor(principal.roles, table, action);
    if (rules.length === 0) return null;
    const variables = principalVariables(principal);
    const rowConditions: Condition[] = [];
    let allRows = false;
    let fields: Set<string> | null = new Set();
    for (const rule of rules) {
      if (rule.filter === undefined) allRows = true;
      else rowConditions.push(filterCondition(table, rule.filter, variables, this.operand));
      if (rule.fields === null) fields = null;
      else if (fields) for (const f of rule.fields) fields.add(f);
    }
    const rows: Condition = allRows ? { kind: 'true' } : rowConditions.length === 1 ? rowConditions[0]! : { kind: 'or', items: rowConditions };
    return { rows, fields };
  }
}
