/** Observability: the structured logger (pino) and the Prometheus metrics (prom-client) of a process. */
export {
  createLogger,
  defaultLogFormat,
  flushLogger,
  flushLoggerSync,
  LOG_BATCH_BYTES,
  LOG_FLUSH_INTERVAL_MS,
  pretty,
  requestLineWriter,
  silentLogger,
  type RequestLineWriter,
  type LogFormat,
  type Logger,
  type LoggerOptions,
  type LogLevel,
} from './logger.ts';
export {
  collectProcessMetrics,
  metrics,
  metricsAsJson,
  renderMetrics,
  type MetricsJson,
  type PoolLike,
  type ReadBudgetLike,
  type WebhookQueueDepth,
} from './metrics.ts';
export { metricsHandler, useClusterMetrics, type MetricsAccess } from './endpoint.ts';
export type { MetricsText } from './aggregate.ts';
