/**
 * A project's code as the runtime reads it: checked once at start (names, tables, paths), then
 * looked up per write, route and job. Absent code is the empty registry: tables without hooks pay
 * one map lookup per write (docs/own-code.md "Cost").
 */
import type {
  CodeDefinition,
  EndpointDefinition,
  JobDefinition,
  ScheduleDefinition,
  TableHooks,
  AuthHooks,
} from './definitions.ts';
import type { Anything } from './definitions.ts';
import { checkEndpoint, CodeDefinitionError } from './define.ts';

type AnyHooks = TableHooks<Anything, Anything>;

export class CodeRegistry {
  static readonly EMPTY = new CodeRegistry({}, []);

  readonly endpoints: readonly EndpointDefinition<Anything, Anything, Anything>[];
  readonly jobs: ReadonlyMap<string, JobDefinition<Anything, Anything>>;
  readonly schedules: readonly ScheduleDefinition[];
  readonly auth: AuthHooks<Anything>;
  private readonly hooks: ReadonlyMap<string, AnyHooks>;

  /**
   * `tables`: the service's table names (hooks of another name are refused);
   * `schedules`: the config's code.schedules, joined to the code's own.
   */
  constructor(
    definition: CodeDefinition<Anything>,
    tables: readonly string[],
    schedules: readonly ScheduleDefinition[] = [],
  ) {
    const hooks = new Map<string, AnyHooks>();
    for (const [table, tableHooks] of Object.entries(definition.hooks ?? {})) {
      if (tableHooks === undefined) continue;
      if (!tables.includes(table))
        throw new CodeDefinitionError(
          `hooks of ${JSON.stringify(table)}: no such table (tables: ${tables.join(', ')})`,
        );
      hooks.set(table, tableHooks as AnyHooks);
    }
    this.hooks = hooks;
    this.endpoints = uniqueBy('endpoint', definition.endpoints ?? [], (e) => e.name);
    checkEndpoints(this.endpoints, tables);
    this.jobs = new Map(uniqueBy('job', definition.jobs ?? [], (j) => j.name).map((j) => [j.name, j]));
    this.schedules = uniqueBy('schedule', [...schedules, ...(definition.schedules ?? [])], (s) => s.name);
    for (const schedule of this.schedules) {
      if (!this.jobs.has(schedule.job))
        throw new CodeDefinitionError(
          `schedule ${JSON.stringify(schedule.name)} queues job ${JSON.stringify(schedule.job)}, which the code does not define`,
        );
    }
    this.auth = definition.auth ?? {};
  }

  /** The hooks of a table, undefined when it has none (the write path then adds nothing). */
  hooksOf(table: string): AnyHooks | undefined {
    return this.hooks.get(table);
  }

  get hookedTables(): string[] {
    return [...this.hooks.keys()].sort();
  }
}

/**
 * Each endpoint on its own (define.ts), then against the tables (a first segment that is a table's
 * name would take its routes) and each other: two endpoints of one method whose paths could match
 * the same request (each segment equal, or either a parameter) collide. Nothing wins a collision:
 * it is a load error (docs/own-code.md "Endpoints").
 */
function checkEndpoints(
  endpoints: readonly EndpointDefinition<Anything, Anything, Anything>[],
  tables: readonly string[],
) {
  const seen: { name: string; method: string; segments: string[] }[] = [];
  for (const endpoint of endpoints) {
    checkEndpoint(endpoint);
    const segments = endpoint.path.slice(1).split('/');
    if (tables.includes(segments[0]!))
      throw new CodeDefinitionError(
        `endpoint ${JSON.stringify(endpoint.name)}: path ${endpoint.path} is under the routes of table ${segments[0]}; choose another first segment`,
      );
    for (const other of seen) {
      if (
        other.method === endpoint.method &&
        other.segments.length === segments.length &&
        other.segments.every((s, i) => s === segments[i] || s.startsWith(':') || segments[i]!.startsWith(':'))
      )
        throw new CodeDefinitionError(
          `endpoints ${JSON.stringify(other.name)} and ${JSON.stringify(endpoint.name)} both answer ${endpoint.method} ${endpoint.path}`,
        );
    }
    seen.push({ name: endpoint.name, method: endpoint.method, segments });
  }
}

function uniqueBy<T>(what: string, items: readonly T[], name: (item: T) => string): T[] {
  const seen = new Set<string>();
  for (const item of items) {
    const n = name(item);
    if (seen.has(n)) throw new CodeDefinitionError(`two ${what}s are named ${JSON.stringify(n)}`);
    seen.add(n);
  }
  return [...items];
}
