/** Health, readiness and metrics (docs/api.md §9): /healthz, /readyz, /metrics and the gauges behind them. */
import { DATABASE_RETRY_AFTER_SECONDS, jsonReply, Problem } from '../../http/index.ts';
import { pendingMigrations, Readiness } from '../../db/index.ts';
import { metrics, metricsHandler, useClusterMetrics } from '../../observability/index.ts';
import type { Route, ServerFeature } from '../feature.ts';

export const observabilityFeature: ServerFeature<{ readiness: Readiness }> = {
  name: 'observability',
  start({ options, config, db, channel, migrationsDir, metricsToken }, teardown) {
    const readiness = new Readiness({
      // Straight on the pool: not a request's statement, so not reported to onQuery.
      probe: async () => void (await db.pool.query('SELECT 1')),
      pendingMigrations: async () =>
        (await pendingMigrations(db, migrationsDir, config.environments)).map((p) => `${p.name} in ${p.environment}`),
      listenerLive: () => channel.live,
      poolBusy: () => db.pool.waitingCount > 0,
    });
    readiness.start();
    teardown.add('readiness', () => readiness.stop());
    // Load balancers stop sending new requests while the in-flight ones finish.
    teardown.onDrain(() => readiness.drain());
    if (metricsToken) {
      teardown.add('pool metrics', metrics.watchPool(db.pool, 'api'));
      if (options.clusterMetrics) teardown.add('cluster metrics', useClusterMetrics(options.clusterMetrics));
    }
    return {
      services: { readiness },
      routes() {
        const routes: Route[] = [
          { method: 'get', path: '/healthz', handler: async () => jsonReply(200, { status: 'ok' }) },
          {
            method: 'get',
            path: '/readyz',
            handler: async () => {
              // Cached state (runtime/db/readiness.ts): a load balancer polling this costs no query.
              const report = readiness.report();
              if (report.ready) return jsonReply(200, { status: 'ready', checks: report.checks });
              throw new Problem(
                'unavailable',
                `not ready: ${report.reasons.join('; ')}`,
                [],
                { 'retry-after': String(DATABASE_RETRY_AFTER_SECONDS) },
                { checks: report.checks },
              );
            },
          },
        ];
        // Off (404) unless config metrics.enabled; the token is required then (the foundation checks).
        if (metricsToken)
          routes.unshift({ method: 'get', path: '/metrics', handler: metricsHandler({ token: metricsToken }) });
        return routes;
      },
    };
  },
};
