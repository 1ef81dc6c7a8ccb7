/**
 * File metadata as a catalog table (docs/storage.md "Permissions"): svcgen.files is the one table
 * `_files`, read and written through the same compilers as table data by storage, and named by
 * webhook subscriptions and live subscriptions like any table.
 */
import { z } from 'zod';
import { FILES_SPEC, FILES_TABLE, type TableModule } from '../model/index.ts';
import { Catalog } from './catalog.ts';

/** The `_files` table as a module: file metadata is never written from a JSON body, so its validators take nothing. */
export const FILES_MODULE: TableModule = {
  spec: FILES_SPEC,
  validators: { create: z.strictObject({}), update: z.strictObject({}) },
};

/** A catalog of the one table `_files`, whose rows are svcgen.files (not an environment's schema). */
export function filesCatalog(): Catalog {
  return new Catalog({ [FILES_TABLE]: FILES_MODULE }, () => 'svcgen.files');
}
