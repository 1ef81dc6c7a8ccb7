/**
 * The data API (docs/api.md §5): what its pipeline reads (catalog, permissions, cursor codec, the
 * expensive-read budget). Its routes are the generated route table, which the HTTP front matches
 * before Express (../app.ts).
 */
import type { Config } from '../../config/index.ts';
import { Admission, FixedLimit, GradientLimit, type ConcurrencyLimit } from '../../db/index.ts';
import { pruneIdempotency } from '../../idempotency/index.ts';
import { metrics, type Logger } from '../../observability/index.ts';
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
  async start({ config, service, db, rateLimiter, metricsToken, logger }, teardown) {
    const { poolSize, poolWaitTimeoutMs, expensiveReadConcurrency, expensiveReadQueue } = config.database;
    const catalog = new Catalog(service.tables);
    const expensiveReads = new Admission({
      limit:
        expensiveReadConcurrency === undefined
          ? expensiveReadLimit(poolSize, logger)
          : new FixedLimit(expensiveReadConcurrency),
      queue: expensiveReadQueue,
      waitTimeoutMs: poolWaitTimeoutMs,
      perKey: expensiveReadsPerCaller(config.database),
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

/** The most expensive reads the budget may run at once: the fixed limit, or the adaptive one's ceiling. */
function mostSlots(poolSize: number, expensiveReadConcurrency?: number): number {
  return expensiveReadConcurrency ?? Math.max(1, poolSize - Math.ceil(poolSize / 4));
}

/**
 * A caller's share of the budget's places, running and waiting (docs/config.md
 * `database.expensiveReadsPerCaller`): the setting, else half of the most places the budget has
 * (its most slots and its queue; 28 of 7 + 50 by default), at least 1, so that one caller's burst
 * leaves about the other half to everyone else.
 */
export function expensiveReadsPerCaller(database: Config['database']): number {
  const { poolSize, expensiveReadConcurrency, expensiveReadQueue, expensiveReadsPerCaller: set } = database;
  return set ?? Math.max(1, Math.floor((mostSlots(poolSize, expensiveReadConcurrency) + expensiveReadQueue) / 2));
}

/**
 * The default budget (docs/deployment.md "Sizing the pool"): it starts at half the pool and follows
 * the reads' latency (runtime/db/concurrency-limit.ts) between 1 and the pool less a quarter of it
 * (at least 1), so cheap reads and writes always find a connection even while the database keeps up
 * and the limit is at its highest.
 */
export function expensiveReadLimit(poolSize: number, logger: Logger): ConcurrencyLimit {
  const max = mostSlots(poolSize);
  return new GradientLimit({
    initial: Math.max(1, Math.floor(poolSize / 2)),
    min: 1,
    max,
    onChange: ({ limit, previous, shortRttMs, longRttMs, gradient }) =>
      logger.debug(
        {
          limit,
          previous,
          max,
          lastReadMs: Math.round(shortRttMs * 10) / 10,
          usualReadMs: Math.round(longRttMs * 10) / 10,
          gradient: Math.round(gradient * 100) / 100,
        },
        'expensive-read limit changed',
      ),
  });
}
