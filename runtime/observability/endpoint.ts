/**
 * `GET /metrics`: the Prometheus text, behind a bearer token. Metrics name routes, tables and
 * volumes, so they are never public: the server refuses to start with metrics on and no token.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { header, Problem, type ApiRequest, type Reply } from '../http/index.ts';
import type { MetricsText } from './aggregate.ts';
import { collectProcessMetrics, renderMetrics } from './metrics.ts';

export interface MetricsAccess {
  /** The bearer token scrapers send (SVCGEN_METRICS_TOKEN, else config metrics.token). */
  token: string;
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * Set in a worker of `serve --workers`: /metrics then answers the whole server's metrics, which the
 * primary gathers from every worker, instead of this process's alone. Like the registry, it is the
 * process's.
 */
let clusterMetrics: (() => Promise<MetricsText>) | undefined;

/** Answers /metrics from `source` until the returned function is called. */
export function useClusterMetrics(source: () => Promise<MetricsText>): () => void {
  clusterMetrics = source;
  return () => {
    if (clusterMetrics === source) clusterMetrics = undefined;
  };
}

export function metricsHandler(access: MetricsAccess): (req: ApiRequest) => Promise<Reply> {
  const expected = digest(access.token);
  collectProcessMetrics();
  return async (req) => {
    const match = /^Bearer +(\S+)$/i.exec(header(req, 'authorization')?.trim() ?? '');
    // Digests of equal length: the comparison takes the same time whatever was sent.
    if (!match || !timingSafeEqual(digest(match[1]!), expected)) {
      throw new Problem(
        'unauthorized',
        'send the metrics token (SVCGEN_METRICS_TOKEN) as "Authorization: Bearer <token>"',
        [],
        { 'www-authenticate': 'Bearer' },
      );
    }
    const { contentType, body } = clusterMetrics ? await fromCluster(clusterMetrics) : await renderMetrics();
    return { status: 200, headers: { 'content-type': contentType, 'cache-control': 'no-store' }, body };
  };
}

/** A scrape that cannot be answered for the whole server fails: one worker's counters alone would read as a counter reset. */
async function fromCluster(source: () => Promise<MetricsText>): Promise<MetricsText> {
  try {
    return await source();
  } catch (error) {
    throw new Problem(
      'unavailable',
      `the metrics of every worker could not be gathered: ${error instanceof Error ? error.message : String(error)}`,
      [],
      { 'retry-after': '1' },
    );
  }
}
