/**
 * One dev cycle (docs/dev.md "On each save"): read the inputs, check the model and config, print
 * the change report, render and migrate, write generated/, restart the server, in that order.
 * generated/ and the database therefore only move to a model that rendered and migrated, and a
 * broken edit leaves the running server (and generated/) alone.
 */
import type { ApiChange } from '../../generator/diff/diff-models.ts';
import type { Config } from '../../runtime/config/index.ts';
import type { TableSpec } from '../../runtime/model/index.ts';
import { codeEntry } from '../project.ts';
import { generateWithCode } from './code-generate.ts';
import { changedIn, migrationsFingerprint, readInputs, WATCHED, type Inputs } from './inputs.ts';
import { keepStandby, startServer } from './servers.ts';
import type { DevContext } from './state.ts';

/** Says why a cycle stopped, and what is serving meanwhile. */
export function fail(ctx: DevContext, message: string | undefined): void {
  if (message) ctx.say(message);
  const { server } = ctx.state;
  ctx.say(
    server
      ? `keeping the last good server running (${server.url})`
      : 'no server running: waiting for the next edit of schema.prisma or svcgen.config.json',
  );
}

/** A migration folder name that says what changed when one thing did (`add_customer_nickname`), else `dev`. */
export function migrationName(changes: readonly ApiChange[]): string {
  if (changes.length !== 1) return 'dev';
  const [change] = changes;
  const verb = change.kind.endsWith('added') ? 'add' : change.kind.endsWith('removed') ? 'remove' : 'change';
  const subject = change.subject
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
  return `${verb}_${subject}`.slice(0, 80);
}

/** migrate dev, in this process: the schema engine stays warm between edits (docs/dev.md "How fast"). */
async function migrate(
  ctx: DevContext,
  name: string,
  environments: string[],
  migratedSchema: string | undefined,
): Promise<boolean> {
  try {
    const { runMigrateDev } = await import('../commands/migrate.ts');
    await runMigrateDev({
      dir: ctx.dir,
      environments,
      url: ctx.database.directUrl,
      name,
      acceptDataLoss: false,
      createOnly: false,
      project: ctx.options.project,
      // dev never accepts data loss for you, and never asks: the command it names does.
      interactive: false,
      print: ctx.say,
      warn: ctx.say,
      trustRecord: true,
      migratedSchema,
    });
    return true;
  } catch (error) {
    ctx.say(`svcgen: ${ctx.modules.describeError(error).message}`);
    return false;
  }
}

/**
 * Prints what `svcgen diff` prints for the running server's version against this one, when the
 * schema or the config differs from it; returns the model's changes (which name the migration).
 */
function report(ctx: DevContext, inputs: Inputs, tables: TableSpec[], config: Config): ApiChange[] {
  const { good } = ctx.state;
  const { changeReport, reportLines, isModelChange } = ctx.modules;
  if (!good || WATCHED.every((f) => inputs[f] === good.inputs[f])) return [];
  const { changes, graphql } = changeReport(good, { tables, config });
  for (const line of reportLines(changes, graphql)) ctx.say(line);
  return changes.filter(isModelChange);
}

/** One pass: render, migrate when the schema or migrations moved, write generated/, restart. `trigger` is undefined at start. */
export async function cycle(ctx: DevContext, trigger?: Set<string>, since = performance.now()): Promise<void> {
  const { state, dir, say, timed, modules } = ctx;
  const inputs = await readInputs(dir);
  const migrationsCurrent =
    state.migrated?.schema === inputs['schema.prisma'] && state.migrated?.migrations === inputs.migrations;
  const runsThis = state.server && state.good && migrationsCurrent && changedIn(inputs, state.good.inputs).length === 0;
  if (trigger) {
    const changed = changedIn(inputs, state.seen);
    // A save that changes nothing while the server runs is a no-op (so are dev's own migrations); otherwise any save retries.
    if (changed.length === 0 && runsThis) return;
    say(`change detected: ${(changed.length > 0 ? changed : [...trigger].sort()).join(', ')}`);
  }
  state.seen = inputs;
  state.onSeen?.();
  if (runsThis) return say(`back to what the server runs (${state.server!.url}): nothing to restart`);
  const { good } = state;
  if (
    state.server &&
    good &&
    migrationsCurrent &&
    inputs.migrations === good.inputs.migrations &&
    WATCHED.every((f) => inputs[f] === good.inputs[f])
  ) {
    // Only your code changed (docs/own-code.md "Where the code lives"): the model and the database
    // stay as they are; its endpoints in generated/ follow it, and the next server loads it afresh.
    if ((await codeGenerated(ctx, good.config)) === false) return;
    return restart(ctx, inputs, good.tables, good.config, trigger, since);
  }

  let tables: TableSpec[];
  let config: Config;
  try {
    // Schema and config are checked here first so that a broken edit prints its error once
    // (migrate dev would print the same) and starts no migration.
    tables = (await modules.readModel(dir)).tables;
    config = await modules.loadConfig(
      dir,
      Object.fromEntries(tables.map((t) => [t.name, t.fields.map((f) => f.name)])),
    );
  } catch (error) {
    return fail(ctx, modules.describeError(error).message);
  }
  const changes = report(ctx, inputs, tables, config);

  const rendering = timed('render generated/', modules.renderProject(dir)).then(
    (files) => ({ files }),
    (error: unknown) => ({ error }),
  );
  // While migrations/ is as dev's last migrate left it, the new migration is a diff from the schema
  // that migrate saw; otherwise the engine replays the folder.
  const { migrated } = state;
  const known =
    migrated?.schema !== undefined && migrated.migrations === inputs.migrations ? migrated.schema : undefined;
  const migrating = migrationsCurrent
    ? Promise.resolve(true)
    : timed('migrate dev', migrate(ctx, migrationName(changes), config.environments, known));
  const [rendered, ok] = await Promise.all([rendering, migrating]);
  // The fingerprint after this migration (dev's own new folder included), so that its watch event is a no-op.
  if (ok && !migrationsCurrent) {
    state.migrated = { schema: inputs['schema.prisma'], migrations: await migrationsFingerprint(dir) };
    state.seen = { ...inputs, migrations: state.migrated.migrations };
  }
  if (state.shuttingDown) return;
  if ('error' in rendered) return fail(ctx, modules.describeError(rendered.error).message);
  if (!ok)
    return fail(
      ctx,
      'migrate dev failed (see above): fix schema.prisma, or run the command it names, then save schema.prisma again',
    );

  const withCode = await codeGenerated(ctx, config);
  if (withCode === false) return;
  // With code, the generate run above wrote generated/ whole (the model and the code's endpoints).
  if (withCode === undefined)
    try {
      const { written, removed } = await modules.writeProject(dir, rendered.files);
      if (written + removed.length > 0)
        say(`generated/: ${written} file${written === 1 ? '' : 's'} written, ${removed.length} removed`);
    } catch (error) {
      return fail(ctx, `could not write generated/: ${modules.describeError(error).message}`);
    }

  // An edit made while this cycle ran would make serve refuse the generated/ just written (or
  // serve a stale one): leave the running server to the cycle that follows.
  const now = await readInputs(dir);
  if (WATCHED.some((f) => now[f] !== inputs[f])) return say('more changes arrived: not restarting for this one');

  await restart(ctx, inputs, tables, config, trigger, since);
}

/**
 * With a code entry, `svcgen generate` in a process of its own writes generated/ whole, the code's
 * endpoints included (./code-generate.ts): true once it did, false (said why) when it failed, which
 * leaves generated/ as it was. Undefined without a code entry: generated/ is this process's to write.
 */
async function codeGenerated(ctx: DevContext, config: Config): Promise<boolean | undefined> {
  let entry: string | undefined;
  try {
    entry = await codeEntry(ctx.dir, config);
  } catch (error) {
    fail(ctx, `svcgen: ${ctx.modules.describeError(error).message}`);
    return false;
  }
  if (entry === undefined) return undefined;
  if (await ctx.timed('generate with your code', generateWithCode(ctx.dir, ctx.say))) return true;
  fail(ctx, undefined);
  return false;
}

/** Starts the next server on what `inputs` describe and makes it the good one; the running one stays when it fails. */
async function restart(
  ctx: DevContext,
  inputs: Inputs,
  tables: TableSpec[],
  config: Config,
  trigger: Set<string> | undefined,
  since: number,
): Promise<void> {
  const { state, say, timed } = ctx;
  const next = await timed('start the server', startServer(ctx));
  if (!next) return state.shuttingDown ? undefined : fail(ctx, 'the server did not start (see above)');
  state.server = next;
  state.good = { inputs: { ...inputs, migrations: state.migrated!.migrations }, tables, config };
  state.seen = state.good.inputs;
  // --port 0 picks a free port once; restarts keep it so that the URL stays put.
  state.port = Number(new URL(next.url).port) || state.port;
  const seconds = ((performance.now() - since) / 1000).toFixed(1);
  say(
    trigger
      ? `restarted: serving ${next.url} ${seconds} s after the change`
      : `started: serving ${next.url} ${seconds} s after svcgen dev started`,
  );
  // The next restart's process, started now that this one is up (not competing with it).
  keepStandby(ctx);
}
