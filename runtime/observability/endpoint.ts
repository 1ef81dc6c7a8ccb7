/**
 * `GET /metrics`: the Prometheus text, behind a bearer token. Metrics name routes, tables and
 * volumes, so they are never public: the server refuses to start with metrics on and no token.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { header, Problem, type ApiRequest, type Reply } from '../http/index.ts';
import { collectProcessMetrics, renderMetrics } from './metrics.ts';

export interface MetricsAccess {
  /** The bearer token scrapers send (SVCGEN_METRICS_TOKEN, else config metrics.token). */
  token: string;
}

const digest = (value: string) => createHash('sha256').update(value).digest();

export function metricsHandler(access: MetricsAccess): (req: ApiRequest) => Promise<Reply> {
  const expected = digest(access.token);
  collectProcessMetrics();
  return async (req) => {
    const match = /^Bearer +(\S+)$/i.exec(header(req, 'authorization')?.trim() ?? '');
    // Digests of equal length: the comparison takes the same time whatever was sent.
    if (!match || !timingSafeEqual(digest(match[1]!), expected)) {
      throw new Problem('unauthorized', 'send the metrics token (SVCGEN_METRICS_TOKEN) as "Authorization: Bearer <token>"', [], { 'www-authenticate': 'Bearer' });
    }
    const { contentType, body } = await renderMetrics();
    return { status: 200, headers: { 'content-type': contentType, 'cache-control': 'no-store' }, body };
  };
}
