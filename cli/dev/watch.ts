/**
 * Edits to cycles (docs/dev.md "On each save", "Migrations made elsewhere"): the project folder and
 * migrations/ are watched; events are debounced, and changes arriving while a cycle runs are
 * coalesced into one more cycle afterwards.
 */
import { watch } from 'node:fs';
import path from 'node:path';
import { cycle, fail } from './cycle.ts';
import { MIGRATIONS, migrationsFingerprint, WATCHED } from './inputs.ts';
import type { DevContext } from './state.ts';

/** Editors save in bursts (write + rename + chmod); one cycle per burst. */
const DEBOUNCE_MS = 150;

/** Runs a cycle, then watches migrations/ again if it was missing and schedules what arrived meanwhile. */
export async function runCycle(ctx: DevContext, trigger?: Set<string>, since?: number): Promise<void> {
  const { state } = ctx;
  state.running = cycle(ctx, trigger, since).catch((error: unknown) =>
    fail(ctx, `unexpected: ${ctx.modules.describeError(error).message}`),
  );
  await state.running;
  state.running = undefined;
  watchMigrations(ctx);
  // The events of dev's own migration are not a change (nor the start of the next one's clock).
  if (state.pending.has(MIGRATIONS) && state.seen && (await migrationsFingerprint(ctx.dir)) === state.seen.migrations)
    state.pending.delete(MIGRATIONS);
  if (state.pending.size > 0) schedule(ctx);
}

function schedule(ctx: DevContext): void {
  const { state } = ctx;
  if (state.running || state.shuttingDown) return;
  clearTimeout(state.timer);
  state.timer = setTimeout(() => {
    const trigger = new Set(state.pending.keys());
    const since = Math.min(...state.pending.values());
    state.pending = new Map();
    void runCycle(ctx, trigger, since);
  }, DEBOUNCE_MS);
}

/** An event for `name` (a watched file, or MIGRATIONS). */
function changed(ctx: DevContext, name: string): void {
  const { state } = ctx;
  if (state.shuttingDown) return;
  if (!state.pending.has(name)) state.pending.set(name, performance.now());
  schedule(ctx);
}

/**
 * migrations/ and what is below it: a migration that someone else added or applied (e.g. the
 * `migrate dev --accept-data-loss` dev named) changes the tables the running server expects.
 */
function watchMigrations(ctx: DevContext): void {
  const { state } = ctx;
  if (state.migrationsWatcher || state.shuttingDown) return;
  try {
    state.migrationsWatcher = watch(path.join(ctx.dir, 'migrations'), { recursive: true }, () =>
      changed(ctx, MIGRATIONS),
    );
    state.migrationsWatcher.on('error', () => {
      // The folder was removed (or replaced): watched again after the next cycle.
      state.migrationsWatcher?.close();
      state.migrationsWatcher = undefined;
      changed(ctx, MIGRATIONS);
    });
  } catch {
    // No migrations/ yet: the project folder's watcher sees it appear.
  }
}

/** Whether `name` (relative to the project) is one of the code files the last cycle saw. */
function isCode(ctx: DevContext, name: string): boolean {
  return ctx.state.seen?.code.has(name) ?? false;
}

/**
 * The folders below the project that hold code files (the project folder's own watcher sees its
 * top level): one watcher each, kept in step with the code's imports after every cycle.
 */
function watchCode(ctx: DevContext): void {
  const { state, dir } = ctx;
  if (state.shuttingDown) return;
  const folders = new Set(
    [...(state.seen?.code.keys() ?? [])].map((name) => path.dirname(name)).filter((d) => d !== '.'),
  );
  for (const [folder, watcher] of state.codeWatchers) {
    if (folders.has(folder)) continue;
    watcher.close();
    state.codeWatchers.delete(folder);
  }
  for (const folder of folders) {
    if (state.codeWatchers.has(folder)) continue;
    try {
      const watcher = watch(path.join(dir, folder), (_event, filename) => {
        const name = filename ? path.join(folder, filename.toString()) : undefined;
        if (name && isCode(ctx, name)) changed(ctx, name);
      });
      watcher.on('error', () => {
        watcher.close();
        state.codeWatchers.delete(folder);
      });
      state.codeWatchers.set(folder, watcher);
    } catch {
      // The folder is gone: the file that imported from it changed too, and the next cycle looks again.
    }
  }
}

/** Starts watching; throws when the project folder cannot be watched. */
export function startWatching(ctx: DevContext): void {
  const { state, dir } = ctx;
  // The folder, not the files: editors that save by rename replace the file a file watch holds.
  state.watcher = watch(dir, (_event, filename) => {
    const name = filename?.toString();
    if (name && ((WATCHED as readonly string[]).includes(name) || isCode(ctx, name))) changed(ctx, name);
    else if (name === 'migrations') {
      if (!state.migrationsWatcher) watchMigrations(ctx);
      changed(ctx, MIGRATIONS);
    }
  });
  state.watcher.on('error', (error) => ctx.say(`watching ${dir} failed: ${error.message}`));
  watchMigrations(ctx);
  ctx.say(`watching schema.prisma, svcgen.config.json and migrations/ in ${dir}`);
  state.onSeen = () => watchCode(ctx);
}

/** Stops both watchers and the debounce. */
export function stopWatching(ctx: DevContext): void {
  const { state } = ctx;
  clearTimeout(state.timer);
  state.watcher?.close();
  state.migrationsWatcher?.close();
  for (const watcher of state.codeWatchers.values()) watcher.close();
  state.codeWatchers.clear();
}
