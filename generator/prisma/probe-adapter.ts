// A driver adapter with no database behind it. The wasm schema engine insists
// on a connection and sends exactly one query when it starts (namespace check
// + server version); answering it is all a datamodel-to-datamodel diff needs.
import type {
  SqlDriverAdapter,
  SqlMigrationAwareDriverAdapterFactory,
  SqlQuery,
  SqlResultSet,
} from '@prisma/driver-adapter-utils';
import { loadDriverAdapterUtils } from './prisma-packages.ts';

export interface PostgresServerInfo {
  /** What `SELECT version()` returns. */
  version: string;
  /** current_setting('server_version_num'), e.g. 160004. */
  versionNum: number;
}

/**
 * Reported when there is no server at all. The engine only uses it to pick
 * the PostgreSQL flavour (not CockroachDB); the DDL it writes for a datamodel
 * diff does not depend on the exact version.
 */
export const OFFLINE_POSTGRES: PostgresServerInfo = {
  version: 'PostgreSQL 16.4 on x86_64-pc-linux-gnu (svcgen offline schema-engine probe)',
  versionNum: 160004,
};

// The engine's connection probe (schema-engine sql_schema_connector, postgres flavour):
//   SELECT EXISTS(SELECT 1 FROM pg_namespace WHERE nspname = $1), version(),
//          current_setting('server_version_num')::integer as numeric_version;
function isVersionProbe(sql: string): boolean {
  return /\bversion\(\)/.test(sql) && /server_version_num/.test(sql);
}

function noDatabase(what: string): Error {
  return new Error(`svcgen: the schema engine asked for ${what}, but this adapter has no database behind it`);
}

function probeOnlyAdapter(server: PostgresServerInfo): SqlDriverAdapter {
  const { ColumnTypeEnum } = loadDriverAdapterUtils();
  return {
    provider: 'postgres',
    adapterName: 'svcgen-probe-only',
    async queryRaw(query: SqlQuery): Promise<SqlResultSet> {
      if (!isVersionProbe(query.sql)) throw noDatabase(`the query ${JSON.stringify(query.sql.slice(0, 120))}`);
      // "exists": the schema ("public") exists, as in any fresh PostgreSQL database;
      // answering false would make the engine try to CREATE SCHEMA.
      return {
        columnNames: ['exists', 'version', 'numeric_version'],
        columnTypes: [ColumnTypeEnum.Boolean, ColumnTypeEnum.Text, ColumnTypeEnum.Int32],
        rows: [[true, server.version, server.versionNum]],
      };
    },
    async executeRaw(query: SqlQuery): Promise<number> {
      throw noDatabase(`the statement ${JSON.stringify(query.sql.slice(0, 120))}`);
    },
    async executeScript(): Promise<void> {
      throw noDatabase('a script');
    },
    async startTransaction(): Promise<never> {
      throw noDatabase('a transaction');
    },
    async dispose(): Promise<void> {},
  };
}

/**
 * Adapter factory whose "main database" only answers the engine's start-up
 * probe. `connectToShadowDb` is supplied by callers that have a real shadow
 * database (pg-shadow-database.ts); without one it fails with a clear message.
 */
export function probeOnlyAdapterFactory(
  server: PostgresServerInfo = OFFLINE_POSTGRES,
  connectToShadowDb: () => Promise<SqlDriverAdapter> = async () => {
    throw noDatabase('a shadow database');
  },
): SqlMigrationAwareDriverAdapterFactory {
  return {
    provider: 'postgres',
    adapterName: 'svcgen-probe-only',
    connect: async () => probeOnlyAdapter(server),
    connectToShadowDb,
  };
}
