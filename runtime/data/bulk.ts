/**
 * Bulk create and bulk delete (docs/api.md §5.15; REST's POST and DELETE /<table>/_bulk, GraphQL's
 * create<T>Many): one
 * transaction, a savepoint per item so that BEST_EFFORT can keep the items that worked and
 * ALL_OR_NOTHING can report every failing index before it rolls everything back. A create tries
 * the valid items as one multi-row INSERT first (insertAll): when the database takes them all,
 * the answer is the one the items one by one would have given, at a fraction of the statements.
 */
import { againOnConflict, transactionDatabase, type Queryable } from '../db/index.ts';
import { LIMITS } from '../model/index.ts';
import { Problem } from '../http/index.ts';
import {
  and,
  compileWrite,
  createPresets,
  parseKey,
  sameRules,
  writeRules,
  type Condition,
  type InsertRecord,
  type WriteDecision,
} from '../query/index.ts';
import { capturesEvents, onDatabase, readScope, type DataContext } from './context.ts';
import { hooksOf, queueAfterCommits, type AfterCommits } from './hooks.ts';
import { checkRecord, requireObject } from './validate-body.ts';
import { advanceKeySequence, createHooked, deleteHooked, lockTargets, runWrite } from './write.ts';

export const MAX_BULK_ITEMS = LIMITS.maxBulkItems;
export type TransactionMode = 'ALL_OR_NOTHING' | 'BEST_EFFORT';

interface BulkOutcome {
  items: Record<string, unknown>[];
  errors: { index: number; message: string }[];
  total: number;
}

/** The mode from the body, else from `modeParam` (REST's `?mode=`), else ALL_OR_NOTHING. */
function mode(body: Record<string, unknown>, modeParam: string | null): TransactionMode {
  const fromBody = body.transactionMode;
  if (fromBody !== undefined) {
    if (fromBody !== 'ALL_OR_NOTHING' && fromBody !== 'BEST_EFFORT') {
      throw new Problem('validation', 'transactionMode must be ALL_OR_NOTHING or BEST_EFFORT', [
        { field: 'transactionMode', rule: 'enum', message: 'transactionMode must be ALL_OR_NOTHING or BEST_EFFORT' },
      ]);
    }
    return fromBody;
  }
  const fromQuery = modeParam;
  if (fromQuery === null) return 'ALL_OR_NOTHING';
  if (fromQuery !== 'ALL_OR_NOTHING' && fromQuery !== 'BEST_EFFORT') {
    throw new Problem('invalid-parameter', 'mode must be ALL_OR_NOTHING or BEST_EFFORT', [
      { field: 'mode', rule: 'enum', message: 'mode must be ALL_OR_NOTHING or BEST_EFFORT' },
    ]);
  }
  return fromQuery;
}

function rejectUnknownKeys(body: Record<string, unknown>, allowed: readonly string[]): void {
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length) {
    throw new Problem(
      'validation',
      `unknown field ${unknown.map((k) => `"${k}"`).join(', ')}; the body takes ${allowed.join(', ')}`,
      unknown.map((field) => ({ field, rule: 'unknown_field', message: `unknown field "${field}"` })),
    );
  }
}

function envelope(transactionMode: TransactionMode, outcome: BulkOutcome) {
  const failed = outcome.errors.length;
  return {
    success: failed === 0,
    transactionMode,
    totalRequested: outcome.total,
    totalSucceeded: transactionMode === 'ALL_OR_NOTHING' && failed > 0 ? 0 : outcome.items.length,
    totalFailed: transactionMode === 'ALL_OR_NOTHING' && failed > 0 ? outcome.total : failed,
    items: transactionMode === 'ALL_OR_NOTHING' && failed > 0 ? [] : outcome.items,
    errors: outcome.errors.sort((a, b) => a.index - b.index),
  };
}

/** A bulk write's answer: its status (207 when BEST_EFFORT kept only some items) and envelope. */
export interface BulkAnswer {
  readonly status: number;
  readonly data: ReturnType<typeof envelope>;
}

/** 2xx with the envelope, or the ALL_OR_NOTHING 422 Problem carrying it as `data`. */
function bulkAnswer(transactionMode: TransactionMode, outcome: BulkOutcome, okStatus: number): BulkAnswer {
  const data = envelope(transactionMode, outcome);
  if (data.success) return { status: okStatus, data };
  if (transactionMode === 'BEST_EFFORT') return { status: 207, data };
  const errors = data.errors.map((e) => ({ field: `items[${e.index}]`, rule: 'item', message: e.message }));
  throw new Problem(
    'validation',
    `${outcome.errors.length} of ${outcome.total} items failed; nothing was changed`,
    errors,
    {},
    { data },
  );
}

/** Runs `work` per item under a savepoint; an item's refusal (a Problem: constraint, role filter) is recorded, not thrown. */
async function eachItem<T>(
  tx: Queryable,
  items: readonly { index: number; value: T }[],
  work: (value: T, index: number) => Promise<Record<string, unknown> | string>,
  outcome: BulkOutcome,
): Promise<void> {
  for (const { index, value } of items) {
    await tx.query('SAVEPOINT bulk_item');
    try {
      const result = await work(value, index);
      if (typeof result === 'string') {
        outcome.errors.push({ index, message: result });
        await tx.query('ROLLBACK TO SAVEPOINT bulk_item');
      } else {
        outcome.items.push(result);
        await tx.query('RELEASE SAVEPOINT bulk_item');
      }
    } catch (error) {
      if (!(error instanceof Problem) || error.status >= 500) throw error;
      outcome.errors.push({ index, message: error.detail });
      await tx.query('ROLLBACK TO SAVEPOINT bulk_item');
    }
  }
}

/** Most problems one bulk item's message names; the rest are counted (a body of 100 items stays small). */
const ITEM_MESSAGES = 5;

function itemMessage(messages: readonly string[]): string {
  const shown = messages.slice(0, ITEM_MESSAGES).join('; ');
  return messages.length > ITEM_MESSAGES ? `${shown}; … and ${messages.length - ITEM_MESSAGES} more` : shown;
}

class RollBack extends Error {}

async function inTransaction(
  ctx: DataContext,
  transactionMode: TransactionMode,
  run: (tx: Queryable) => Promise<void>,
  outcome: BulkOutcome,
) {
  const recorded = { items: outcome.items.length, errors: outcome.errors.length };
  try {
    // Run again whole when rolled back for a concurrent write (docs/api.md §6.2 "Concurrent writes").
    await againOnConflict(
      ctx.db,
      () =>
        ctx.db.transaction(async (tx) => {
          await run(tx);
          if (transactionMode === 'ALL_OR_NOTHING' && outcome.errors.length > 0) throw new RollBack();
        }),
      () => {
        outcome.items.length = recorded.items;
        outcome.errors.length = recorded.errors;
      },
    );
  } catch (error) {
    if (!(error instanceof RollBack)) throw error;
  }
}

function keyOf(ctx: DataContext, row: Record<string, unknown>): Record<string, unknown> {
  const pk = ctx.table.spec.primaryKey;
  return pk.length === 1 ? { id: row[pk[0]!] } : Object.fromEntries(pk.map((k) => [k, row[k]]));
}

/** Bind parameters a multi-row INSERT may use for its values (the rest: role filters, event capture). */
const PARAMETER_BUDGET = 60_000;

/**
 * Bulk create as set operations: one multi-row INSERT (with its events) per run of
 * consecutive items decided by the same rules, usually one for the whole request. True when every
 * item was inserted (keys in `outcome`, in item order). False, with nothing changed, when the
 * database refused a statement: one statement cannot say which item it refused, so the caller
 * runs the items one by one to name them (then keeps the others or rolls back, as the mode says).
 */
async function insertAll(
  ctx: DataContext,
  valid: readonly { index: number; value: Record<string, unknown>; written: string[] }[],
  capture: boolean,
  outcome: BulkOutcome,
): Promise<boolean> {
  const runs: InsertRecord[][] = [];
  let runRules: WriteDecision | undefined;
  // A statement's bind parameters are bounded (65,535): a very wide table takes fewer rows a statement.
  const perStatement = Math.max(1, Math.floor(PARAMETER_BUDGET / (ctx.table.spec.fields.length + 1)));
  for (const { value, written } of valid) {
    const rules = writeRules(readScope(ctx), ctx.table, 'create', written);
    if (runRules && sameRules(rules, runRules) && runs.at(-1)!.length < perStatement)
      runs.at(-1)!.push({ values: value, written });
    else runs.push([{ values: value, written }]);
    runRules = rules;
  }
  const insertRun = async (db: Queryable, records: readonly InsertRecord[]) => {
    const scope = readScope(ctx);
    const rows = await runWrite(
      db,
      ctx.table,
      compileWrite(scope, { kind: 'insertMany', table: ctx.table, records }, { kind: 'key' }, capture),
      scope,
    );
    if (rows.length !== records.length)
      throw new Error(`a bulk insert of ${records.length} records returned ${rows.length} rows`);
    return rows.map((row) => keyOf(ctx, JSON.parse(row[0] as string) as Record<string, unknown>));
  };
  const keys: Record<string, unknown>[] = [];
  try {
    // A transaction even for one statement: under an Idempotency-Key ctx.db is the key's open
    // transaction, which a refused statement would abort; there it is a savepoint to roll back to.
    await againOnConflict(
      ctx.db,
      () =>
        ctx.db.transaction(async (tx) => {
          // Before the insert: a row of the statement that takes the next key must not meet a key
          // another item chose (all of one statement's defaults are drawn before any row is checked).
          const highest = highestChosenKey(
            ctx,
            valid.map((v) => v.value),
          );
          if (highest) await advanceKeySequence(ctx, tx, highest);
          for (const run of runs) keys.push(...(await insertRun(tx, run)));
        }),
      () => {
        keys.length = 0;
      },
    );
  } catch (error) {
    if (error instanceof Problem && error.status < 500) return false;
    throw error;
  }
  outcome.items.push(...keys);
  return true;
}

/** The item with the highest integer key chosen by the caller, if any (advanceKeySequence moves past it). */
function highestChosenKey(
  ctx: DataContext,
  values: readonly Record<string, unknown>[],
): Record<string, unknown> | undefined {
  const id = ctx.table.idField;
  if (!id || (id.type !== 'Int' && id.type !== 'BigInt')) return undefined;
  let highest: Record<string, unknown> | undefined;
  for (const v of values) {
    if (!Object.hasOwn(v, id.name) || v[id.name] === null) continue;
    if (!highest || BigInt(String(v[id.name])) > BigInt(String(highest[id.name]))) highest = v;
  }
  return highest;
}

/**
 * The items of a bulk write to a table with hooks (docs/own-code.md "Hooks"), one by one in one
 * transaction, each under its savepoint (eachItem): a hook's refusal is that item's failure, kept
 * apart in BEST_EFFORT, rolling everything back in ALL_OR_NOTHING; any other hook failure fails the
 * request. The afterCommit hooks of the items kept run once the transaction has committed.
 */
async function hookedItems<T>(
  ctx: DataContext,
  transactionMode: TransactionMode,
  outcome: BulkOutcome,
  items: readonly ({ index: number } & T)[],
  work: (tx: DataContext, item: T, later: AfterCommits, index: number) => Promise<Record<string, unknown> | string>,
): Promise<void> {
  let pending: { index: number; later: AfterCommits }[] = [];
  await inTransaction(
    ctx,
    transactionMode,
    (tx) => {
      pending = [];
      const txCtx = onDatabase(ctx, transactionDatabase(ctx.db.pool, tx));
      return eachItem(
        tx,
        items.map((item) => ({ index: item.index, value: item })),
        (item, index) => {
          const later: AfterCommits = [];
          pending.push({ index, later });
          return work(txCtx, item, later, index);
        },
        outcome,
      );
    },
    outcome,
  );
  if (transactionMode === 'ALL_OR_NOTHING' && outcome.errors.length > 0) return;
  const failed = new Set(outcome.errors.map((e) => e.index));
  queueAfterCommits(
    ctx,
    pending.filter((p) => !failed.has(p.index)).flatMap((p) => p.later),
  );
}

/** A bulk body: an object of the `allowed` keys (422 otherwise), and its transaction mode. */
function bulkBody(
  input: unknown,
  allowed: readonly string[],
  modeParam: string | null,
): { body: Record<string, unknown>; transactionMode: TransactionMode } {
  const body = requireObject(input);
  rejectUnknownKeys(body, allowed);
  return { body, transactionMode: mode(body, modeParam) };
}

/** Creates the body's `items` (`modeParam`: a transaction mode the body may leave out). */
export async function createMany(
  ctx: DataContext,
  input: unknown,
  modeParam: string | null = null,
): Promise<BulkAnswer> {
  const { body, transactionMode } = bulkBody(input, ['items', 'transactionMode'], modeParam);
  const items = body.items;
  if (!Array.isArray(items) || items.length === 0) {
    throw new Problem('validation', 'items must be a non-empty array of records', [
      { field: 'items', rule: 'required', message: 'items must be a non-empty array' },
    ]);
  }
  if (items.length > MAX_BULK_ITEMS) {
    throw new Problem('validation', `at most ${MAX_BULK_ITEMS} items per request; got ${items.length}`, [
      { field: 'items', rule: 'max_items', message: `at most ${MAX_BULK_ITEMS} items` },
    ]);
  }
  const outcome: BulkOutcome = { items: [], errors: [], total: items.length };
  const valid: { index: number; value: Record<string, unknown>; written: string[] }[] = [];
  const presetScope = readScope(ctx);
  items.forEach((item, index) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) {
      outcome.errors.push({ index, message: 'the item must be a JSON object of field values' });
      return;
    }
    // A field the caller may not write, in any item, refuses the whole request (403).
    const written = Object.keys(item).filter((k) => ctx.table.fields.has(k));
    const presets = createPresets(presetScope, ctx.table, written);
    const checked = checkRecord(
      ctx.table,
      ctx.table.module.validators.create,
      { ...presets, ...(item as Record<string, unknown>) },
      'create',
    );
    if (checked.errors.length)
      outcome.errors.push({ index, message: itemMessage(checked.errors.map((e) => e.message)) });
    else valid.push({ index, value: checked.value, written });
  });
  const hooks = hooksOf(ctx);
  if (hooks && !(transactionMode === 'ALL_OR_NOTHING' && outcome.errors.length > 0) && valid.length > 0) {
    await hookedItems(ctx, transactionMode, outcome, valid, (tx, { value, written }, later) =>
      createHooked(tx, hooks, value, written, later).then(({ key }) => key),
    );
  } else if (!(transactionMode === 'ALL_OR_NOTHING' && outcome.errors.length > 0) && valid.length > 0) {
    const capture = await capturesEvents(ctx);
    // Every item inserted is the same outcome in either mode; only a refusal needs the items one by one.
    if (await insertAll(ctx, valid, capture, outcome)) return bulkAnswer(transactionMode, outcome, 201);
    await inTransaction(
      ctx,
      transactionMode,
      (tx) =>
        eachItem(
          tx,
          valid.map(({ index, value, written }) => ({ index, value: { value, written } })),
          async ({ value, written }) => {
            const scope = readScope(ctx);
            const rows = await runWrite(
              tx,
              ctx.table,
              compileWrite(
                scope,
                { kind: 'insert', table: ctx.table, values: value, written },
                { kind: 'key' },
                capture,
              ),
              scope,
              value,
            );
            await advanceKeySequence(ctx, tx, value);
            return keyOf(ctx, JSON.parse(rows[0]![0] as string) as Record<string, unknown>);
          },
          outcome,
        ),
      outcome,
    );
  }
  return bulkAnswer(transactionMode, outcome, 201);
}

/** Deletes the records the body's `ids` or `filters` name (`modeParam` as for createMany). */
export async function deleteMany(
  ctx: DataContext,
  input: unknown,
  modeParam: string | null = null,
): Promise<BulkAnswer> {
  const { body, transactionMode } = bulkBody(input, ['ids', 'filters', 'transactionMode'], modeParam);
  const pk = ctx.table.spec.primaryKey;
  if (body.ids !== undefined && body.filters !== undefined) {
    throw new Problem('validation', 'send either ids or filters, not both', [
      { field: 'ids', rule: 'exclusive', message: 'ids and filters cannot be mixed' },
    ]);
  }
  let targets: { index: number; value: Record<string, unknown> }[];
  const outcome: BulkOutcome = { items: [], errors: [], total: 0 };
  const list = (body.ids ?? body.filters) as unknown;
  const field = body.ids !== undefined ? 'ids' : 'filters';
  if (!Array.isArray(list) || list.length === 0) {
    throw new Problem('validation', 'send ids (an array of keys) or filters (an array of key objects)', [
      { field, rule: 'required', message: `${field} must be a non-empty array` },
    ]);
  }
  if (list.length > MAX_BULK_ITEMS) {
    throw new Problem('validation', `at most ${MAX_BULK_ITEMS} ${field} per request`, [
      { field, rule: 'max_items', message: `at most ${MAX_BULK_ITEMS} ${field}` },
    ]);
  }
  outcome.total = list.length;
  if (field === 'ids' && pk.length !== 1) {
    throw new Problem(
      'validation',
      `${ctx.table.spec.name} has a composite primary key; send filters: [{ ${pk.join(', ')} }]`,
      [{ field: 'ids', rule: 'composite_key', message: 'composite primary keys require filters' }],
    );
  }
  targets = [];
  list.forEach((entry, index) => {
    const keyValues: Record<string, unknown> = {};
    let problem: string | undefined;
    if (field === 'ids') {
      if (typeof entry !== 'string' && typeof entry !== 'number') problem = 'each id must be a string or a number';
      else keyValues[pk[0]!] = entry;
    } else if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      problem = `each filter must be an object of the key fields ${pk.join(', ')}`;
    } else {
      const keys = Object.keys(entry);
      if (keys.length !== pk.length || !pk.every((k) => keys.includes(k)))
        problem = `each filter must name exactly the key fields ${pk.join(', ')}`;
      else Object.assign(keyValues, entry);
    }
    if (!problem) {
      for (const k of pk) {
        const raw = keyValues[k];
        const value = parseKey(
          ctx.table.fields.get(k)!,
          typeof raw === 'string' || typeof raw === 'number' ? String(raw) : '\u0000',
        );
        if (value === undefined) problem = `no ${ctx.table.spec.name} record with ${k} ${JSON.stringify(raw)}`;
        keyValues[k] = value;
      }
    }
    if (problem) outcome.errors.push({ index, message: problem });
    else targets.push({ index, value: keyValues });
  });
  const missing = (keyValues: Record<string, unknown>, index: number) =>
    `no ${ctx.table.spec.name} record at index ${index} (${pk.map((k) => `${k} ${JSON.stringify(keyValues[k])}`).join(', ')})`;
  const answered = (index: number) =>
    field === 'ids'
      ? { id: (list as unknown[])[index] }
      : { ...((list as unknown[])[index] as Record<string, unknown>) };
  const keyOfItem = (keyValues: Record<string, unknown>) =>
    and(...pk.map((k): Condition => ({ kind: 'compare', path: [k], op: 'equals', value: keyValues[k] })));
  const hooks = hooksOf(ctx);
  if (hooks && !(transactionMode === 'ALL_OR_NOTHING' && outcome.errors.length > 0) && targets.length > 0) {
    await hookedItems(ctx, transactionMode, outcome, targets, async (tx, { value: keyValues }, later, index) => {
      const [target] = await lockTargets(tx, {
        kind: 'delete',
        table: ctx.table,
        where: { kind: 'true' },
        key: keyOfItem(keyValues),
      });
      if (!target || !(await deleteHooked(tx, hooks, target, later))) return missing(keyValues, index);
      return answered(index);
    });
  } else if (!(transactionMode === 'ALL_OR_NOTHING' && outcome.errors.length > 0) && targets.length > 0) {
    const capture = await capturesEvents(ctx);
    await inTransaction(
      ctx,
      transactionMode,
      (tx) =>
        eachItem(
          tx,
          targets,
          async (keyValues, index) => {
            const scope = readScope(ctx);
            const key = keyOfItem(keyValues);
            const rows = await runWrite(
              tx,
              ctx.table,
              compileWrite(
                scope,
                { kind: 'delete', table: ctx.table, where: { kind: 'true' }, key },
                { kind: 'key' },
                capture,
              ),
              scope,
            );
            if (rows.length === 0) return missing(keyValues, index);
            return answered(index);
          },
          outcome,
        ),
      outcome,
    );
  }
  return bulkAnswer(transactionMode, outcome, 200);
}
