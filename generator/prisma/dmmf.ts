// Prisma's own schema reading: DMMF (models, fields, relations, enums) and the
// config blocks (datasource, generators), both from @prisma/internals' wasm.
import type * as DMMF from '@prisma/dmmf';
import type { ConfigMetaFormat } from '@prisma/internals';
import { loadInternals } from './prisma-packages.ts';
import { schemaErrorFromInternals } from './schema-error.ts';

export type { DMMF };
export type SchemaConfig = ConfigMetaFormat;

// With a path, Prisma's messages point at "<schemaPath>:<line>" instead of "schema.prisma:<line>".
function datamodelInput(schemaText: string, schemaPath: string | undefined): string | [string, string][] {
  return schemaPath === undefined ? schemaText : [[schemaPath, schemaText]];
}

/**
 * Prisma's DMMF for a schema. Throws PrismaSchemaError (Prisma's validation
 * output, no stack noise) when the schema is invalid.
 */
export async function readDmmf(schemaText: string, schemaPath?: string): Promise<DMMF.Document> {
  try {
    return await loadInternals().getDMMF({ datamodel: datamodelInput(schemaText, schemaPath) });
  } catch (error) {
    throw schemaErrorFromInternals(error) ?? error;
  }
}

/** Datasources and generators as Prisma reads them (getConfig). */
export async function readSchemaConfig(schemaText: string, schemaPath?: string): Promise<SchemaConfig> {
  try {
    return await loadInternals().getConfig({ datamodel: datamodelInput(schemaText, schemaPath) });
  } catch (error) {
    throw schemaErrorFromInternals(error) ?? error;
  }
}
