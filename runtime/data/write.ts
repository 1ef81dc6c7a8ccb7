/**
 * Writes of one record and writes by filter, for every front end (REST's POST /<table>, PATCH and
 * DELETE /<table>/<id>, PATCH /<table>?<filters>; GraphQL's mutations). Each is one statement from
 * compileWrite, atomic on its own, carrying its webhook events and checked against the caller's
 * roles (docs/permissions.md "Writing").
 */
import { againOnConflict, type Queryable } from '../db/index.ts';
import {
  and,
  compactJson,
  compileLockTargets,
  compileUnwritableFields,
  compileWrite,
  createPresets,
  writeRules,
  WriteRefused,
  type CompiledWrite,
  type CatalogTable,
  type Condition,
  type Scope,
  type Write,
  parseKey,
} from '../query/index.ts';
import { capturesEvents, readScope, type DataContext } from './context.ts';
import { afterWrite, hookedWrite, hooksOf, runBefore, runHook, type AfterCommits, type Hooks } from './hooks.ts';
import { databaseProblem } from './database-errors.ts';
import { writeRefusedProblem } from './query-problems.ts';
import { keyCondition, notFound } from './record-key.ts';
import { requireObject, validateRecord } from './validate-body.ts';

/**
 * Runs a compiled write; database refusals (constraints, a row outside the role's filter, a value
 * the column cannot hold) become Problems, naming fields among the `written` values.
 */
export async function runWrite(
  db: Queryable,
  table: CatalogTable,
  write: CompiledWrite,
  scope: Scope,
  written: Readonly<Record<string, unknown>> = {},
): Promise<unknown[][]> {
  try {
    // Rolled back for a concurrent write, it changed nothing and runs again (docs/api.md §6.2
    // "Concurrent writes"); in a transaction, its owner runs the whole again.
    return await againOnConflict(db, () => db.queryArrays(write.sql, scope.params.values));
  } catch (error) {
    throw databaseProblem(error, table, write.filterFields, written) ?? error;
  }
}

/** The body's fields of the table (unknown keys are left to validation, which names them). */
export function writtenFields(table: CatalogTable, body: Record<string, unknown>): string[] {
  return Object.keys(body).filter((k) => table.fields.has(k));
}

/**
 * A create body as the statement writes it: refused (403) when the caller may not write its
 * fields, completed with the presets of the deciding roles, then validated (422).
 */
export function createValues(
  ctx: DataContext,
  scope: Scope,
  body: Record<string, unknown>,
): { values: Record<string, unknown>; written: string[] } {
  const written = writtenFields(ctx.table, body);
  const presets = createPresets(scope, ctx.table, written);
  return {
    values: validateRecord(ctx.table, ctx.table.module.validators.create, { ...presets, ...body }, 'create'),
    written,
  };
}

/**
 * After a create that chose its own integer key, moves the key's sequence past it, so that later
 * creates that leave the key to the database do not collide with it (409). Sequences are not
 * transactional: a rolled-back create may leave a gap, never a collision.
 */
export async function advanceKeySequence(
  ctx: DataContext,
  db: Queryable,
  values: Record<string, unknown>,
): Promise<void> {
  const id = ctx.table.idField;
  if (!id?.dbDefault || (id.type !== 'Int' && id.type !== 'BigInt') || !Object.hasOwn(values, id.name)) return;
  await db.query(
    `SELECT setval(seq, $3::bigint) FROM (SELECT pg_get_serial_sequence($1, $2)::regclass AS seq) s
     WHERE seq IS NOT NULL AND $3::bigint > coalesce(pg_sequence_last_value(seq), 0)`,
    [ctx.table.qualified(ctx.tenant.environment), id.column, String(values[id.name])],
  );
}

/** A created record: as the caller reads it (recordText) and its primary key's values. */
export interface Created {
  readonly record: string;
  readonly key: Record<string, unknown>;
}

/** Creates one record from a body (403 for fields the caller may not write, 422 for values). */
export async function createRecord(ctx: DataContext, input: unknown): Promise<Created> {
  const body = requireObject(input);
  const scope = readScope(ctx);
  const { values, written } = createValues(ctx, scope, body);
  const hooks = hooksOf(ctx);
  if (hooks) return hookedWrite(ctx, (tx, later) => createHooked(tx, hooks, values, written, later));
  const write = compileWrite(
    scope,
    { kind: 'insert', table: ctx.table, values, written },
    { kind: 'record' },
    await capturesEvents(ctx),
  );
  const rows = await runWrite(ctx.db, ctx.table, write, scope, values);
  await advanceKeySequence(ctx, ctx.db, values);
  const [json, keyJson] = rows[0] as [string | null, string];
  return { record: recordText(ctx, json), key: JSON.parse(keyJson) as Record<string, unknown> };
}

/**
 * A create with hooks, in the transaction of `ctx`: beforeCreate may change the values (validated
 * again; the caller's `written` fields decide its permissions), the row is inserted, afterWrite
 * sees it whole. The created record as the caller reads it, or a Problem for the item (bulk).
 */
export async function createHooked(
  ctx: DataContext,
  hooks: Hooks,
  values: Record<string, unknown>,
  written: readonly string[],
  later: AfterCommits,
): Promise<Created> {
  let final = values;
  if (hooks.beforeCreate) {
    const input = await runBefore(ctx, 'beforeCreate', values, (input, code) =>
      hooks.beforeCreate!({ input, ctx: code }),
    );
    final = validateRecord(ctx.table, ctx.table.module.validators.create, input, 'create');
  }
  const scope = readScope(ctx);
  const write = compileWrite(
    scope,
    { kind: 'insert', table: ctx.table, values: final, written },
    { kind: 'full' },
    await capturesEvents(ctx),
  );
  const rows = await runWrite(ctx.db, ctx.table, write, scope, final);
  await advanceKeySequence(ctx, ctx.db, final);
  const [full, json, keyJson] = rows[0] as [string, string | null, string];
  await afterWrite(ctx, hooks, { action: 'create', record: JSON.parse(full), previous: null }, later);
  return { record: recordText(ctx, json), key: JSON.parse(keyJson) as Record<string, unknown> };
}

/** A written record as the caller reads it ({} where it may not read the row), Json fields compacted (compactJson). */
function recordText(ctx: DataContext, json: string | null): string {
  if (json === null) return '{}';
  return ctx.table.spec.fields.some((f) => f.type === 'Json') ? compactJson(json) : json;
}

/** A merge-patch body: refused (403) when the caller may not write its fields, then validated (422). */
export function patchValues(ctx: DataContext, scope: Scope, body: Record<string, unknown>): Record<string, unknown> {
  writeRules(scope, ctx.table, 'update', writtenFields(ctx.table, body));
  return validateRecord(ctx.table, ctx.table.module.validators.update, body, 'update');
}

/** Runs of an update by key that found no row it may write while the probe found one (rows changing meanwhile). */
const UPDATE_RUNS = 3;

/** Applies a merge patch to the record `id` names; the record as the caller reads it (recordText). */
export async function updateRecord(ctx: DataContext, id: string, input: unknown): Promise<string> {
  const body = requireObject(input);
  const patch = patchValues(ctx, readScope(ctx), body);
  const key = keyCondition(ctx, id); // existence comes after validation (docs/api.md "Order of checks")
  const hooks = hooksOf(ctx);
  const written = hooks && writtenFields(ctx.table, body);
  for (let run = 1; ; run++) {
    if (hooks) {
      const json = await hookedWrite(ctx, async (tx, later) => {
        const [target] = await lockTargets(tx, { kind: 'update', table: ctx.table, where: TRUE, key, patch, written });
        return target && (await updateHooked(tx, hooks, target, patch, written!, later));
      });
      if (json !== undefined) return recordText(ctx, json);
    } else {
      const scope = readScope(ctx);
      const write = compileWrite(
        scope,
        { kind: 'update', table: ctx.table, where: TRUE, key, patch },
        { kind: 'record' },
        await capturesEvents(ctx),
      );
      const rows = await runWrite(ctx.db, ctx.table, write, scope, patch);
      if (rows.length > 0) return recordText(ctx, rows[0]![0] as string | null);
    }
    const unwritable = await unwritableFields(ctx, key, Object.keys(patch));
    if (unwritable === undefined || run === UPDATE_RUNS) throw notFound(ctx, id);
    if (unwritable.length > 0)
      throw writeRefusedProblem(
        new WriteRefused(
          `your roles may not write ${unwritable.join(', ')} of this ${ctx.table.spec.name} record`,
          unwritable,
        ),
      );
    // The record became writable after the update looked: run it again.
  }
}

/**
 * Why an update by key changed nothing (docs/permissions.md "Several roles"): undefined when the
 * record is not found (not readable, or no role may update it), else the fields of the body that
 * no role allowing the update of this record lists (403 forbidden_field, as for a field no role
 * lists at all); empty when it has become writable meanwhile.
 */
async function unwritableFields(ctx: DataContext, key: Condition, fields: string[]): Promise<string[] | undefined> {
  const scope = readScope(ctx);
  const sql = compileUnwritableFields(scope, ctx.table, key, fields);
  if (sql === undefined) return undefined;
  const rows = await ctx.db.queryArrays(sql, scope.params.values);
  return rows.length === 0 ? undefined : (rows[0]![0] as string[]);
}

/** Deletes the record `id` names (404 when the caller finds no such record it may delete). */
export async function deleteRecord(ctx: DataContext, id: string): Promise<void> {
  const hooks = hooksOf(ctx);
  if (hooks) {
    const key = keyCondition(ctx, id);
    const deleted = await hookedWrite(ctx, async (tx, later) => {
      const [target] = await lockTargets(tx, { kind: 'delete', table: ctx.table, where: TRUE, key });
      return target !== undefined && (await deleteHooked(tx, hooks, target, later));
    });
    if (!deleted) throw notFound(ctx, id);
    return;
  }
  const scope = readScope(ctx);
  const write = compileWrite(
    scope,
    { kind: 'delete', table: ctx.table, where: TRUE, key: keyCondition(ctx, id) },
    { kind: 'key' },
    await capturesEvents(ctx),
  );
  const rows = await runWrite(ctx.db, ctx.table, write, scope);
  if (rows.length === 0) throw notFound(ctx, id);
}

/**
 * Applies a merge patch to every row matching the caller's `where` that it may update (an update
 * by filter, of REST or GraphQL); the number of rows changed.
 */
export async function updateMatching(
  ctx: DataContext,
  where: Condition,
  body: Record<string, unknown>,
): Promise<number> {
  const scope = readScope(ctx);
  const patch = patchValues(ctx, scope, body);
  const hooks = hooksOf(ctx);
  if (hooks) {
    const written = writtenFields(ctx.table, body);
    return hookedWrite(ctx, async (tx, later) => {
      let count = 0;
      for (const target of await lockTargets(tx, { kind: 'update', table: ctx.table, where, patch, written }))
        if ((await updateHooked(tx, hooks, target, patch, written, later)) !== undefined) count++;
      return count;
    });
  }
  const write = compileWrite(
    scope,
    { kind: 'update', table: ctx.table, where, patch },
    { kind: 'count' },
    await capturesEvents(ctx),
  );
  const rows = await runWrite(ctx.db, ctx.table, write, scope, patch);
  return Number(rows[0]![0]);
}

/**
 * Deletes every row matching the caller's `where` that it may read and delete (GraphQL's
 * delete<T>Where; REST deletes by key only); the number of rows deleted. Each deleted row is
 * captured as a DELETE event, as a delete by key is.
 */
export async function deleteMatching(ctx: DataContext, where: Condition): Promise<number> {
  const hooks = hooksOf(ctx);
  if (hooks) {
    return hookedWrite(ctx, async (tx, later) => {
      let count = 0;
      for (const target of await lockTargets(tx, { kind: 'delete', table: ctx.table, where }))
        if (await deleteHooked(tx, hooks, target, later)) count++;
      return count;
    });
  }
  const scope = readScope(ctx);
  const write = compileWrite(
    scope,
    { kind: 'delete', table: ctx.table, where },
    { kind: 'count' },
    await capturesEvents(ctx),
  );
  const rows = await runWrite(ctx.db, ctx.table, write, scope);
  return Number(rows[0]![0]);
}

const TRUE: Condition = { kind: 'true' };

/** A row an update or delete with hooks reaches, locked: every field of it, and its key as a condition. */
export interface LockedRow {
  readonly previous: Record<string, unknown>;
  readonly key: Condition;
}

/**
 * The rows `write` reaches for the caller (the same conditions as its statement), locked FOR UPDATE
 * in the transaction of `ctx` and read whole, as the system (docs/own-code.md "Hooks": `previous`).
 */
export async function lockTargets(
  ctx: DataContext,
  write: Write & { kind: 'update' | 'delete' },
): Promise<LockedRow[]> {
  const scope = readScope(ctx);
  const rows = await runWrite(ctx.db, ctx.table, { sql: compileLockTargets(scope, write), filterFields: [] }, scope);
  return rows.map(([full, keyJson]) => {
    const key = JSON.parse(keyJson as string) as Record<string, unknown>;
    return {
      previous: JSON.parse(full as string) as Record<string, unknown>,
      key: and(
        ...Object.entries(key).map(([name, value]): Condition => {
          const field = ctx.table.fields.get(name)!;
          return { kind: 'compare', path: [name], op: 'equals', value: parseKey(field, String(value)) };
        }),
      ),
    };
  });
}

/**
 * An update with hooks of one locked row: beforeUpdate may change the patch (validated again; the
 * caller's `written` fields decide its permissions), then afterWrite. The record as the caller
 * reads it (JSON, null where it may not), or undefined when the row is no longer reached.
 */
export async function updateHooked(
  ctx: DataContext,
  hooks: Hooks,
  target: LockedRow,
  patch: Record<string, unknown>,
  written: readonly string[],
  later: AfterCommits,
): Promise<string | null | undefined> {
  let final = patch;
  if (hooks.beforeUpdate) {
    const input = await runBefore(ctx, 'beforeUpdate', patch, (input, code) =>
      hooks.beforeUpdate!({ input, previous: target.previous, ctx: code }),
    );
    final = validateRecord(ctx.table, ctx.table.module.validators.update, input, 'update');
  }
  const scope = readScope(ctx);
  const write = compileWrite(
    scope,
    { kind: 'update', table: ctx.table, where: TRUE, key: target.key, patch: final, written },
    { kind: 'full' },
    await capturesEvents(ctx),
  );
  const rows = await runWrite(ctx.db, ctx.table, write, scope, final);
  if (rows.length === 0) return undefined;
  const [full, json] = rows[0] as [string, string | null];
  await afterWrite(ctx, hooks, { action: 'update', record: JSON.parse(full), previous: target.previous }, later);
  return json;
}

/** A delete with hooks of one locked row: beforeDelete, the delete, afterWrite; whether it was deleted. */
export async function deleteHooked(
  ctx: DataContext,
  hooks: Hooks,
  target: LockedRow,
  later: AfterCommits,
): Promise<boolean> {
  if (hooks.beforeDelete)
    await runHook(ctx, 'beforeDelete', (code) => hooks.beforeDelete!({ previous: target.previous, ctx: code }));
  const scope = readScope(ctx);
  const write = compileWrite(
    scope,
    { kind: 'delete', table: ctx.table, where: TRUE, key: target.key },
    { kind: 'key' },
    await capturesEvents(ctx),
  );
  const rows = await runWrite(ctx.db, ctx.table, write, scope);
  if (rows.length === 0) return false;
  await afterWrite(ctx, hooks, { action: 'delete', record: null, previous: target.previous }, later);
  return true;
}
