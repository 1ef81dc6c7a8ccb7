/** Observability: the structured logger (pino) and the Prometheus metrics (prom-client) of a process. */
export { createLogger, defaultLogFormat, pretty, silentLogger, type LogFormat, type Logger, type LoggerOptions, type LogLevel } from './logger.ts';
export { collectProcessMetrics, metrics, renderMetrics, type PoolLike, type WebhookQueueDepth } from './metrics.ts';
export { metricsHandler, type MetricsAccess } from './endpoint.ts';
