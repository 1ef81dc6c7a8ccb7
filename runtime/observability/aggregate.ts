/**
 * The one /metrics text of `serve --workers`: the primary (cli/cluster.ts) gathers every worker's
 * metrics over the cluster channel and adds them up here, so that a scrape reaching any worker sees
 * the whole server. The primary loads this file and prom-client only, not the server runtime.
 *
 * The rules are prom-client's AggregatorRegistry's, by each metric's `aggregator`: counters and
 * histograms are summed (a request counts whichever worker answered it), and so are gauges unless
 * they say otherwise (pool connections: every worker's together; the webhook queue depth, which
 * every worker reads from the one database, takes the max). Process metrics (`process_*`,
 * `nodejs_*`) are not added up but kept per worker with a `worker` label (1..n, which a replacement
 * keeps): a sum of heaps or an average event-loop lag would hide the one worker in trouble.
 */
import { AggregatorRegistry } from 'prom-client';
import type { MetricsJson } from './metrics.ts';

export interface WorkerMetrics {
  /** The worker's number, 1..n */
  worker: number;
  metrics: MetricsJson;
}

export interface MetricsText {
  contentType: string;
  body: string;
}

/** collectDefaultMetrics' names; svcgen's own metrics never start so. */
const PER_PROCESS = /^(process|nodejs)_/;

export async function aggregateWorkerMetrics(reports: WorkerMetrics[]): Promise<MetricsText> {
  const labelled = reports.map(({ worker, metrics }) =>
    metrics.map((metric) =>
      PER_PROCESS.test(metric.name)
        ? {
            ...metric,
            // One value per worker and label set now, so nothing is combined ('omit' would drop the start time).
            aggregator: 'first' as const,
            values: metric.values.map((value) => ({ ...value, labels: { ...value.labels, worker: String(worker) } })),
          }
        : metric,
    ),
  );
  const registry = AggregatorRegistry.aggregate(labelled);
  return { contentType: registry.contentType, body: await registry.metrics() };
}
