/**
 * The svcgen server of the benchmark, in its own process so that the load generator does not share
 * its event loop: the example shop project served by runtime `startServer` (pool of 10 connections).
 * Started by ./run.ts with BENCH_DATABASE_URL; reports its port over IPC (./child-harness.ts).
 */
import path from 'node:path';
import { loadService } from '../cli/project.ts';
import { startServer } from '../runtime/index.ts';
import { runChild } from './child-harness.ts';

const databaseUrl = process.env.BENCH_DATABASE_URL;
if (!databaseUrl) throw new Error('BENCH_DATABASE_URL is not set');
const projectDir = path.resolve(import.meta.dirname, '../examples/shop');

await runChild(async () => {
  const { service, config } = await loadService(projectDir);
  const server = await startServer({
    projectDir,
    service,
    config,
    databaseUrl,
    port: 0,
    host: '127.0.0.1',
    log: (message) => console.error(`[svcgen] ${message}`),
  });
  return { port: server.port, close: () => server.close() };
});
