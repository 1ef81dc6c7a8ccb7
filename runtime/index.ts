/** Public surface of the svcgen runtime for the CLI and for embedding a server in a program. */
export {
  startServer,
  startWorkerProcess,
  createApp,
  createRequestListener,
  DATA_BASE_PATH,
  type RunningServer,
  type ServerOptions,
  type WorkerProcessOptions,
} from './server/index.ts';
export { loadConfig, parseConfig, ConfigError, CONFIG_FILE, type Config } from './config/index.ts';
export type { ServiceModule, TableModule, TableSpec, FieldSpec, RelationSpec, RouteSpec } from './model/index.ts';
