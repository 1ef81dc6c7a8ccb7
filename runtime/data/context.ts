/** What a data handler receives once admission (runtime/data/admission.ts) has run, built here only. */
import { callerId, type Principal } from '../principal/index.ts';
import { AdmissionRefused, type Admission, type Database } from '../db/index.ts';
import { DATABASE_RETRY_AFTER_SECONDS, Problem, type ApiRequest } from '../http/index.ts';
import {
  cursorOwner,
  Params,
  type Access,
  type Catalog,
  type CatalogTable,
  type CursorCodec,
  type FilterContext,
  type FileAccess,
  type Action,
  type Grant,
  type Scope,
} from '../query/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import type { WatchedTables } from '../events/index.ts';
import { requireGrant } from './admission.ts';
import type { WriteHooks } from './hooks.ts';
import { indexedFields, LARGE_PAGE } from './cost.ts';

export interface DataContext {
  readonly req: ApiRequest;
  readonly tenant: Tenant;
  readonly principal: Principal;
  readonly table: CatalogTable;
  /** The grant for the route's own action (already checked to exist). */
  readonly grant: Grant;
  readonly catalog: Catalog;
  /** The caller's permissions; the query compilers ask it about every table a statement touches. */
  readonly access: Access;
  readonly db: Database;
  /** The per-process budget of expensive reads (runtime/data/cost.ts says which reads are). */
  readonly expensiveReads: Admission;
  readonly cursors: CursorCodec;
  /** Whether writes must capture webhook events (tables with active subscriptions). */
  readonly watchedTables: WatchedTables;
  /** Path prefix of data routes, for Location headers. */
  readonly basePath: string;
  /** The caller's access to files, for fields that reference them (none: no file may be referenced). */
  readonly files: FileAccess | undefined;
  /** The project's table hooks (./hooks.ts); none: no table has any. */
  readonly writeHooks: WriteHooks | undefined;
}

/** What a DataContext takes from the running server: the same for every request. */
export interface DataServices {
  readonly catalog: Catalog;
  readonly db: Database;
  readonly expensiveReads: Admission;
  readonly cursors: CursorCodec;
  readonly watchedTables: WatchedTables;
  readonly basePath: string;
  /** The project's table hooks (./hooks.ts); none: no table has any. */
  readonly writeHooks?: WriteHooks;
}

/** A request's context before it names a table: GraphQL's resolvers share one across root fields. */
export type CallerContext = Omit<DataContext, 'table' | 'grant'>;

/**
 * The context of an admitted caller: the server's parts, the request's, and the caller's access.
 * Every context has the same members in the same order (absent ones undefined), so that the
 * handlers reading them see one object shape: a spread or a member added only when present gave
 * each mix its own shape, and every read of `ctx.db` or `ctx.access` on the hot path a
 * megamorphic lookup.
 */
export function callerContext(
  services: DataServices,
  req: ApiRequest,
  tenant: Tenant,
  principal: Principal,
  access: Access,
  files?: FileAccess,
): CallerContext {
  return {
    req,
    tenant,
    principal,
    catalog: services.catalog,
    access,
    db: services.db,
    expensiveReads: services.expensiveReads,
    cursors: services.cursors,
    watchedTables: services.watchedTables,
    basePath: services.basePath,
    files,
    writeHooks: services.writeHooks,
  };
}

/**
 * The context of `action` on `table` for a caller: its grant checked here (requireGrant: 403 when
 * the caller's roles do not allow it; `what` names the records in that refusal).
 */
export function tableContext(caller: CallerContext, table: CatalogTable, action: Action, what?: string): DataContext {
  return withTable(caller, table, requireGrant(caller.access, table.spec.name, action, what));
}

/** `caller` with a table and its grant, member by member in callerContext's order (one shape). */
function withTable(caller: CallerContext, table: CatalogTable, grant: Grant, db = caller.db): DataContext {
  return {
    req: caller.req,
    tenant: caller.tenant,
    principal: caller.principal,
    catalog: caller.catalog,
    access: caller.access,
    db,
    expensiveReads: caller.expensiveReads,
    cursors: caller.cursors,
    watchedTables: caller.watchedTables,
    basePath: caller.basePath,
    files: caller.files,
    writeHooks: caller.writeHooks,
    table,
    grant,
  };
}

/** `ctx` running its statements on `db` (a transaction): the same shape as every context. */
export function onDatabase(ctx: DataContext, db: Database): DataContext {
  return withTable(ctx, ctx.table, ctx.grant, db);
}

/** The caller a list's cursors are bound to, in REST and GraphQL alike (docs/api.md §5.8). */
export function cursorOwnerOf(ctx: DataContext): string {
  return cursorOwner(callerId(ctx.principal), ctx.tenant.environment);
}

/** A fresh statement scope: its parameters, aliases and the caller's access. */
export function readScope(ctx: DataContext): Scope {
  return {
    catalog: ctx.catalog,
    environment: ctx.tenant.environment,
    params: new Params(),
    nextAlias: { n: 0 },
    access: ctx.access,
    files: ctx.files,
  };
}

/**
 * Runs `work` in a slot of the expensive-read budget when `cost` says why the read is expensive,
 * straight away when it is cheap. No slot → 503 database-busy, the caller's share of the budget
 * held already → 429 rate-limited; both say how to make the read cheaper (docs/api.md §6.2).
 */
export function budgeted<T>(ctx: DataContext, cost: string | undefined, work: () => Promise<T>): Promise<T> {
  if (cost === undefined) {
    // A cheap read runs at once, without an async layer of its own.
    try {
      return work();
    } catch (error) {
      return Promise.reject(error);
    }
  }
  return expensive(ctx, cost, work);
}

/**
 * Whose share of the expensive-read budget a read counts against (docs/config.md
 * `database.expensiveReadsPerCaller`): its API key or user, per project and environment, as the
 * data rate limit counts callers. GraphQL's root fields count against it through their context too.
 */
export function budgetKey(ctx: Pick<DataContext, 'tenant' | 'principal'>): string {
  return `${ctx.tenant.projectId}:${ctx.tenant.environment}:${callerId(ctx.principal)}`;
}

async function expensive<T>(ctx: DataContext, cost: string, work: () => Promise<T>): Promise<T> {
  try {
    return await ctx.expensiveReads.run(work, (listener) => ctx.req.onClientGone(listener), budgetKey(ctx));
  } catch (error) {
    if (!(error instanceof AdmissionRefused)) throw error;
    if (error.reason === 'key-share') throw shareTaken(ctx, cost);
    const { slots } = ctx.expensiveReads;
    const { queue, waitTimeoutMs } = ctx.expensiveReads.options;
    const slotCount = `${slots} slot${slots === 1 ? '' : 's'}`;
    const why =
      error.reason === 'queue-full'
        ? `the queue of expensive reads is full (${queue} waiting for ${slotCount})`
        : `it waited ${waitTimeoutMs} ms without getting one of the ${slotCount}`;
    throw new Problem(
      'database-busy',
      `this read is expensive (${cost}), and expensive reads wait in a budget of their own so that they cannot crowd out cheap ones; ${why}. ` +
        `Retry later, or ${cheaper(ctx)}`,
      [],
      { 'retry-after': String(DATABASE_RETRY_AFTER_SECONDS) },
    );
  }
}

/** How a read stops being expensive (runtime/data/cost.ts), the advice of both refusals. */
function cheaper(ctx: DataContext): string {
  return `make the read cheaper: a page of at most ${LARGE_PAGE} records, no Prefer: count=exact, filters and sort on indexed fields (${indexedFields(ctx.table).join(', ')})`;
}

/** How long a caller past its share is told to wait: a place frees as soon as one of its reads ends. */
const SHARE_RETRY_AFTER_SECONDS = 1;

/**
 * The 429 of a caller holding its whole share (docs/api.md §6.2): Retry-After and RateLimit-* of the
 * share, which the data pipeline leaves as they are, so that they do not say the rate limit's requests.
 */
function shareTaken(ctx: DataContext, cost: string): Problem {
  const share = ctx.expensiveReads.options.perKey ?? 0;
  const retry = String(SHARE_RETRY_AFTER_SECONDS);
  return new Problem(
    'rate-limited',
    `this read is expensive (${cost}), and each caller (API key or user) may have ${share} expensive read${share === 1 ? '' : 's'} running or waiting at once (database.expensiveReadsPerCaller) so that one caller cannot take the budget every other caller needs; you have ${share}. ` +
      `Retry in ${retry} s, once one of them has finished, or ${cheaper(ctx)}`,
    [],
    { 'retry-after': retry, 'ratelimit-limit': String(share), 'ratelimit-remaining': '0', 'ratelimit-reset': retry },
  );
}

/** Whether this request's writes must carry the event capture (see compileWrite). */
export function capturesEvents(ctx: DataContext): Promise<boolean> {
  return ctx.watchedTables.watches(ctx.tenant.environment, ctx.table.spec.name, ctx.req.receivedAt, ctx.db);
}

/** Filters, sorts and selects may name only fields and relations the caller can read. */
export function filterContext(ctx: DataContext): FilterContext {
  return { catalog: ctx.catalog, table: ctx.table, access: ctx.access, count: 0 };
}
