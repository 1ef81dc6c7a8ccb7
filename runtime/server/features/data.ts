/**
 * The data API (docs/api.md §5): what its pipeline reads (catalog, permissions, cursor codec, the
 * expensive-read budget). Its routes are the generated route table, which the HTTP front matches
 * before Express (../app.ts).
 */
import { Admission } from '../../db/index.ts';
import { pruneIdempotency } from '../../idempotency/index.ts';
import { metrics } from '../../observability/index.ts';
import { Catalog, cursorCodec, Policy, roleOperand, type CursorCodec } from '../../query/index.ts';
import { serverSecret } from '../../secrets/index.ts';
import type { ServerFeature } from '../feature.ts';
import { every } from '../housekeeping.ts';

export const dataFeature: ServerFeature<{
  catalog: Catalog;
  policy: Policy;
  cursors: CursorCodec;
  expensiveReads: Admission;
}> = {
  name: 'data',
  async start({ config, service, db, rateLimiter, metricsToken }, teardown) {
    const { poolSize, poolWaitTimeoutMs, expensiveReadConcurrency, expensiveReadQueue } = config.database;
    const catalog = new Catalog(service.tables);
    // Half the pool by default: expensive reads keep going under load, cheap ones keep the other half.
    const expensiveReads = new Admission({
      slots: expensiveReadConcurrency ?? Math.max(1, Math.floor(poolSize / 2)),
      queue: expensiveReadQueue,
      waitTimeoutMs: poolWaitTimeoutMs,
      onRefused: metrics.expensiveReadRefused,
    });
    if (metricsToken) teardown.add('read budget metrics', metrics.watchReadBudget(expensiveReads));
    // Expired idempotency entries and old rate-limit windows.
    teardown.add(
      'data housekeeping',
      every(() => Promise.all([rateLimiter.prune(), pruneIdempotency(db)])),
    );
    return {
      services: {
        catalog,
        policy: new Policy(
          config.roles,
          (table, path, op, value) => roleOperand(catalog, table, path, op, value),
          (table) => catalog.get(table)?.spec.fields.map((f) => f.name) ?? [],
        ),
        cursors: cursorCodec(await serverSecret(db, 'cursor-signing')),
        expensiveReads,
      },
    };
  },
};
