/**
 * PostGraphile 5 on the benchmark database, for `npm run bench:graphql` (./graphql.ts): its
 * library mode as its documentation recommends it (postgraphile.org/postgraphile/5/usage-library):
 * a preset extending `PostGraphileAmberPreset`, one `makePgService` for the shop's tables (schema
 * env_master), served by grafserv on node:http at /graphql; production settings: no watch mode, no
 * GraphiQL, no explain, NODE_ENV=production (set by ./graphql.ts). One change, documented at
 * postgraphile.org/postgraphile/5/filtering: Amber offers `condition` and `orderBy` on indexed
 * columns only; without PgIndexBehaviorsPlugin every column has them (the example indexes neither
 * Order.status nor Order.total, which the filtered case uses). No authentication and no rate
 * limit: PostGraphile leaves those to the application (svcgen checks an API key and counts every
 * request against its rate limits).
 *
 * PostGraphile is not a dependency of svcgen: ./graphql.ts installs it (exact versions) into
 * bench/.cache/postgraphile (gitignored) and passes that folder as BENCH_POSTGRAPHILE_DIR. Its pg
 * pool is built from this checkout's pg (max 10, as svcgen's), passed to makePgService as `pool`, so
 * ./child-harness.ts counts its statements as it does the other servers'.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import path from 'node:path';
import pg from 'pg';
import { runChild } from './child-harness.ts';

const databaseUrl = process.env.BENCH_DATABASE_URL;
if (!databaseUrl) throw new Error('BENCH_DATABASE_URL is not set');
const installDir = process.env.BENCH_POSTGRAPHILE_DIR;
if (!installDir) throw new Error('BENCH_POSTGRAPHILE_DIR is not set (start this through bench/graphql.ts)');
const POOL_SIZE = 10;

// PostGraphile is CommonJS with an exports map; resolved from its own install folder.
const load = createRequire(path.join(installDir, 'package.json'));
const { postgraphile } = load('postgraphile');
const { grafserv } = load('postgraphile/grafserv/node');
const { PostGraphileAmberPreset } = load('postgraphile/presets/amber');
const { makePgService } = load('postgraphile/adaptors/pg');

await runChild(async () => {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: POOL_SIZE });
  pool.on('error', () => {});
  const preset = {
    extends: [PostGraphileAmberPreset],
    disablePlugins: ['PgIndexBehaviorsPlugin'],
    pgServices: [makePgService({ pool, schemas: ['env_master'] })],
    grafserv: { watch: false, graphiql: false, graphqlPath: '/graphql' },
    grafast: { explain: false },
  };
  const pgl = postgraphile(preset);
  const serv = pgl.createServ(grafserv);
  const server = http.createServer();
  serv.addTo(server);
  await pgl.getSchema(); // introspected and built before the parent measures anything
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pgl.release();
      await pool.end();
    },
  };
});
