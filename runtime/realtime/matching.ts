/**
 * Which changes go to which subscription (docs/realtime.md "What a subscription gives" and
 * "Permissions"): each `<table>Changed` subscription is a LiveListener of the hub that matches every
 * change in memory against the caller's read filter, removes the fields the caller may not read,
 * then applies the subscriber's `where` and `events`; `fileChanged` does the same with a bucket's
 * read rule. A change is checked and executed once for all the subscriptions that would see it alike.
 */
import {
  GraphQLError,
  createSourceEventStream,
  execute,
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLFieldResolver,
  type GraphQLSchema,
} from 'graphql';
import { problemError, toProblem } from '../graphql/execute.ts';
import type { SubscriptionFieldMeta } from '../graphql/schema.ts';
import { whereCondition } from '../graphql/translate.ts';
import { FILES_TABLE } from '../model/index.ts';
import { metrics } from '../observability/index.ts';
import {
  containmentsOf,
  HIDDEN,
  holds,
  unsupportedIn,
  type Access,
  type CatalogTable,
  type Condition,
  type Containment,
  type Grant,
} from '../query/index.ts';
import { requireGrant } from '../data/index.ts';
import { Problem } from '../http/index.ts';
import { CLOSE, type Caller, type LiveConnection, type RealtimeDeps, type RealtimeLimits } from './connection.ts';
import type { FileFieldMeta } from './files.ts';
import type { LiveEvent, LiveListener } from './hub.ts';
import { LiveQueue } from './queue.ts';

/** How long a client closed for reading too slowly may take to read the close before it is cut. */
const SLOW_CLOSE_GRACE_MS = 1000;

/** The access of a caller with no file access at all: no role of theirs may read any bucket. */
const NO_GRANTS: Pick<Access, 'grant'> = { grant: () => null };

export class Matching {
  /** Subscriptions live now (for metrics). */
  subscriptions = 0;

  constructor(
    private readonly deps: Pick<RealtimeDeps, 'catalog' | 'access' | 'files' | 'buckets' | 'hub' | 'log'>,
    private readonly limits: Pick<RealtimeLimits, 'maxQueuedChanges' | 'maxBufferedBytes'>,
  ) {}

  /**
   * graphql-js's subscribe(), but each change is executed once for every subscription with the
   * same schema, document and variables that was handed the same payload (sharedPayload: the same
   * principal, table and `where`), not once per subscription: the change types resolve from the
   * payload alone.
   */
  async run(args: ExecutionArgs): Promise<AsyncGenerator<ExecutionResult> | ExecutionResult> {
    const source = await createSourceEventStream({
      ...args,
      subscribeFieldResolver: this.subscribeField as GraphQLFieldResolver<unknown, unknown>,
    });
    if (!(Symbol.asyncIterator in source)) return source;
    const key = (args.contextValue as { executionKey: string }).executionKey;
    return mapped(source, (payload) => sharedExecution(args, key, payload));
  }

  /** The source stream of one `<table>Changed` field. */
  private readonly subscribeField = async (
    _source: unknown,
    args: { where?: unknown; events?: string[] | null },
    context: { caller: Caller; socket: LiveConnection },
    info: { fieldName: string; parentType: { getFields(): Record<string, { extensions: Record<string, unknown> }> } },
  ): Promise<AsyncIterable<unknown> | GraphQLError> => {
    const meta = info.parentType.getFields()[info.fieldName]?.extensions.svcgen as
      | SubscriptionFieldMeta
      | FileFieldMeta
      | undefined;
    if (!meta) return new GraphQLError(`${info.fieldName} is not a subscription of this API`);
    if ('files' in meta)
      return this.subscribeFiles(args as { bucket: string; events?: string[] | null }, context, info.fieldName);
    const { caller } = context;
    const table = this.deps.catalog.require(meta.table);
    const access = this.deps.access(caller.principal);
    let grant: Grant;
    try {
      grant = requireGrant(access, meta.table, 'read');
    } catch (error) {
      // Answered with the refusal's words alone, as subscriptions always have been.
      if (error instanceof Problem) return new GraphQLError(error.detail);
      throw error;
    }
    let where: Condition;
    try {
      where = whereCondition({ catalog: this.deps.catalog, access }, table, args.where);
    } catch (error) {
      return problemError(toProblem(error, { log: (e) => this.deps.log('realtime where failed', e) }));
    }
    const reason =
      unsupportedIn(table, where) ??
      unsupportedIn(table, grant.rows) ??
      [...grant.fieldRows.values()].map((c) => unsupportedIn(table, c)).find((r) => r !== undefined);
    if (reason)
      return new GraphQLError(`this subscription cannot be matched in memory: ${reason}`, {
        extensions: { code: 'BAD_REQUEST', type: '/errors/invalid-parameter', status: 400 },
      });
    const whereKey = JSON.stringify(args.where ?? null);
    return this.listen(
      context,
      info.fieldName,
      meta.table,
      args.events,
      () => access.grant(meta.table, 'read'),
      whereKey,
      (event) => visibleChange(table, access, event, where),
      // Captured at all only if the role filter and `where` can hold (docs/realtime.md "What a write costs").
      containmentsOf(table, { kind: 'and', items: [grant.rows, where] }),
    );
  };

  /**
   * `fileChanged(bucket:, events:)` (docs/realtime.md "File changes"): the `_files` changes of one
   * bucket, each checked in memory against the caller's read rule of that bucket exactly as a
   * table row against a role's read filter.
   */
  private async subscribeFiles(
    args: { bucket: string; events?: string[] | null },
    context: { caller: Caller; socket: LiveConnection },
    fieldName: string,
  ): Promise<AsyncIterable<unknown> | GraphQLError> {
    const { caller } = context;
    const buckets = this.deps.buckets ?? [];
    if (!buckets.includes(args.bucket))
      return new GraphQLError(`there is no bucket named "${args.bucket}"; buckets: ${buckets.join(', ')}`, {
        extensions: { code: 'BAD_REQUEST', type: '/errors/invalid-parameter', status: 400 },
      });
    const files = this.deps.files?.(caller.principal);
    // Without a file access (no bucket configured) no role may read the bucket: the same refusal.
    const access = files?.access(args.bucket, caller.tenant.environment) ?? NO_GRANTS;
    let grant: Grant;
    try {
      grant = requireGrant(access, FILES_TABLE, 'read', `the files of bucket "${args.bucket}"`);
    } catch (error) {
      if (error instanceof Problem) return problemError(error);
      throw error;
    }
    const table = files!.catalog.require(FILES_TABLE);
    const reason =
      unsupportedIn(table, grant.rows) ??
      [...grant.fieldRows.values()].map((c) => unsupportedIn(table, c)).find((r) => r !== undefined);
    if (reason)
      return new GraphQLError(`this subscription cannot be matched in memory: ${reason}`, {
        extensions: { code: 'BAD_REQUEST', type: '/errors/invalid-parameter', status: 400 },
      });
    const always: Condition = { kind: 'true' };
    return this.listen(
      context,
      fieldName,
      FILES_TABLE,
      args.events,
      () => access.grant(FILES_TABLE, 'read'),
      '',
      (event) => visibleChange(table, access, event, always),
      // The rule pins the bucket and environment (and the owner, for `ownerId: $user.id`).
      containmentsOf(table, grant.rows),
    );
  }

  /** A subscription's source stream: the hub's changes of `table` the caller may see, bounded. */
  private async listen(
    context: { caller: Caller; socket: LiveConnection },
    fieldName: string,
    tableName: string,
    wanted: readonly string[] | null | undefined,
    currentGrant: () => Grant | null,
    whereKey: string,
    visible: (event: LiveEvent) => VisibleChange | undefined,
    interest?: readonly Containment[],
  ): Promise<AsyncIterable<unknown>> {
    const { caller, socket } = context;
    const info = { fieldName };
    const meta = { table: tableName };
    const events = new Set(wanted ?? ['INSERT', 'UPDATE', 'DELETE']);
    const queue = new LiveQueue<unknown>();
    let dropped = false;
    const listener: LiveListener = {
      environment: caller.tenant.environment,
      table: meta.table,
      interest,
      deliver: (event) => {
        if (dropped || !events.has(event.operation)) return;
        const now = currentGrant();
        if (!now) return;
        const change = sharedVisibleChange(now, whereKey, event, () => visible(event));
        if (!change) return;
        if (
          queue.length + (socket.queued ?? 0) >= this.limits.maxQueuedChanges ||
          socket.bufferedAmount > this.limits.maxBufferedBytes
        ) {
          dropped = true;
          metrics.realtimeEvents('dropped');
          socket.close(CLOSE.tooSlow, 'changes come faster than this client reads them; subscribe again');
          // A client that stopped reading never reads the close frame either: without this its
          // socket (and what is buffered for it) would stay until ws's 30 s close timeout.
          if (socket.terminate) setTimeout(() => socket.terminate?.(), SLOW_CLOSE_GRACE_MS).unref();
          return;
        }
        metrics.realtimeEvents('out');
        queue.push(sharedPayload(change, info.fieldName));
      },
      interrupted: () =>
        socket.close(CLOSE.interrupted, 'the server lost its channel to the database; changes may have been missed'),
    };
    const remove = await this.deps.hub.add(listener);
    this.subscriptions++;
    queue.onEnd(() => {
      this.subscriptions--;
      remove();
    });
    return queue;
  }
}

/**
 * What one change shows to the subscribers holding the same grant and the same `where` (a grant
 * belongs to one principal and table: same grant, same role filter, fields and values of
 * `$user`/`$context`), worked out once per change: a thousand alike subscribers cost one check.
 * Kept while the hub hands the change out (the event object is then dropped).
 */
const outcomes = new WeakMap<LiveEvent, WeakMap<Grant, Map<string, VisibleChange | undefined>>>();

function sharedVisibleChange(
  grant: Grant,
  whereKey: string,
  event: LiveEvent,
  work: () => VisibleChange | undefined,
): VisibleChange | undefined {
  let byGrant = outcomes.get(event);
  if (!byGrant) outcomes.set(event, (byGrant = new WeakMap()));
  let byWhere = byGrant.get(grant);
  if (!byWhere) byGrant.set(grant, (byWhere = new Map()));
  if (byWhere.has(whereKey)) return byWhere.get(whereKey);
  const change = work();
  byWhere.set(whereKey, change);
  return change;
}

/** The root value of a change's execution, one object per change and field (sharedExecution keys on it). */
const payloads = new WeakMap<VisibleChange, Map<string, Record<string, VisibleChange>>>();

function sharedPayload(change: VisibleChange, fieldName: string): Record<string, VisibleChange> {
  let byField = payloads.get(change);
  if (!byField) payloads.set(change, (byField = new Map()));
  let payload = byField.get(fieldName);
  if (!payload) byField.set(fieldName, (payload = { [fieldName]: change }));
  return payload;
}

const executions = new WeakMap<object, WeakMap<GraphQLSchema, Map<string, ReturnType<typeof execute>>>>();

/** execute() of one payload, once per schema and execution key (operation, variables, document text). */
function sharedExecution(args: ExecutionArgs, key: string, payload: unknown): ReturnType<typeof execute> {
  if (typeof payload !== 'object' || payload === null) return execute({ ...args, rootValue: payload });
  let bySchema = executions.get(payload);
  if (!bySchema) executions.set(payload, (bySchema = new WeakMap()));
  let byKey = bySchema.get(args.schema);
  if (!byKey) bySchema.set(args.schema, (byKey = new Map()));
  let result = byKey.get(key);
  if (!result) byKey.set(key, (result = execute({ ...args, rootValue: payload })));
  return result;
}

/** `source` with `map` applied to each value; return() and throw() reach the source (graphql-js's mapAsyncIterator). */
function mapped<T, U>(
  source: AsyncGenerator<T> | AsyncIterable<T>,
  map: (value: T) => U | Promise<U>,
): AsyncGenerator<Awaited<U>> {
  const iterator = source[Symbol.asyncIterator]() as AsyncIterator<T>;
  const step = async (result: IteratorResult<T>): Promise<IteratorResult<Awaited<U>>> =>
    result.done ? { value: undefined, done: true } : { value: await map(result.value), done: false };
  const out: AsyncGenerator<Awaited<U>> = {
    next: () => iterator.next().then(step),
    return: async () => (iterator.return ? step(await iterator.return()) : { value: undefined as never, done: true }),
    throw: async (error?: unknown) => {
      if (iterator.throw) return step(await iterator.throw(error));
      throw error;
    },
    [Symbol.asyncIterator]: () => out,
  };
  return out;
}

/**
 * What the caller sees of an event, or undefined when nothing: the record must be one the caller's
 * role filter lets it read (for an UPDATE, as it is after the change: a record that leaves the
 * filter is not shown, new values never), fields it may not read are removed (null where a field
 * is hidden on this row), and then the subscriber's `where` must hold.
 */
export interface VisibleChange {
  readonly id: string;
  readonly event: LiveEvent['operation'];
  readonly record: Record<string, unknown>;
  readonly changedFields: readonly string[];
  readonly timestamp: string;
}

export function visibleChange(
  table: CatalogTable,
  access: Access,
  event: LiveEvent,
  where: Condition,
): VisibleChange | undefined {
  const grant = access.grant(table.spec.name, 'read');
  if (!grant || !holds(table, grant.rows, event.record)) return undefined;
  const seen: Record<string, unknown> = {};
  for (const field of table.spec.fields) {
    if (grant.fields !== null && !grant.fields.has(field.name)) continue;
    const rows = grant.fieldRows.get(field.name);
    seen[field.name] = rows && !holds(table, rows, event.record) ? HIDDEN : (event.record[field.name] ?? null);
  }
  if (!holds(table, where, seen)) return undefined;
  const record: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(seen)) record[name] = value === HIDDEN ? null : value;
  return {
    id: event.id,
    event: event.operation,
    record,
    changedFields: event.changedFields.filter((f) => Object.hasOwn(seen, f) && seen[f] !== HIDDEN),
    timestamp: event.timestamp,
  };
}
