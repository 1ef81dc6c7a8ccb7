/**
 * The running server and the next one (docs/dev.md "On each save"): the next server is a child
 * started ahead of time (a standby that has loaded the runtime), which loads the new generated/
 * while the old server still answers and binds the port once the old one has stopped.
 */
import type { ServeChild } from './children.ts';
import type { DevContext, Server } from './state.ts';

/** A server that ignores SIGTERM this long is killed. */
export const STOP_TIMEOUT_MS = 30_000;

/** The standby, or a new child when there is none; the context has no standby afterwards. */
function takeStandby(ctx: DevContext): ServeChild {
  const taken = ctx.state.standby ?? ctx.children.spawnServe();
  ctx.state.standby = undefined;
  return taken;
}

/** Starts the next restart's process, unless there is one already or dev is stopping. */
export function keepStandby(ctx: DevContext): void {
  if (!ctx.state.shuttingDown) ctx.state.standby ??= ctx.children.spawnServe();
}

export async function stopServer(ctx: DevContext): Promise<void> {
  const current = ctx.state.server;
  if (!current) return;
  current.stopping = true;
  ctx.children.terminate(current.child);
  const timer = setTimeout(() => current.child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await current.closed;
  clearTimeout(timer);
  if (ctx.state.server === current) ctx.state.server = undefined;
}

/**
 * The next server: the standby loads generated/ while the running server still answers; then the
 * running one stops and the new one binds the port. Undefined when it could not start (its
 * output says why); the running server is then left alone unless the failure came after it stopped.
 */
export async function startServer(ctx: DevContext): Promise<Server | undefined> {
  const { state, database } = ctx;
  const next = takeStandby(ctx);
  const fail = () => {
    ctx.children.terminate(next.child);
    return undefined;
  };
  if (!(await next.next('standby')) || state.shuttingDown) return fail();
  next.send({ type: 'start', port: state.port, databaseUrl: database.url, directDatabaseUrl: database.directUrl });
  if (!(await next.next('ready')) || state.shuttingDown) return fail();
  await stopServer(ctx);
  next.send({ type: 'listen' });
  const listening = await next.next('listening');
  if (!listening) return undefined;
  const started: Server = {
    child: next.child,
    url: listening.url,
    closed: next.closed.then(() => {}),
    stopping: false,
  };
  void next.closed.then((code) => {
    if (started.stopping || state.shuttingDown) return;
    if (state.server === started) state.server = undefined;
    const how = next.child.signalCode ? `killed by ${next.child.signalCode}` : `exit code ${code}`;
    ctx.say(`the server exited on its own (${how}); save schema.prisma or svcgen.config.json to start it again`);
  });
  return started;
}
