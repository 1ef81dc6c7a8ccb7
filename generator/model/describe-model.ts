/**
 * Stage 2 of the generator: Prisma's DMMF → the sorted, plain table descriptions of
 * `runtime/model`. Everything the later stages know about the data model comes from here.
 */
import type { DMMF } from '../prisma/index.ts';
import {
  RESERVED_PATH_NAMES,
  type ClientDefault,
  type FieldSpec,
  type FileReference,
  type IndexSpec,
  type RelationSpec,
  type ScalarType,
  type TableSpec,
} from '../../runtime/model/index.ts';

export class ModelError extends Error {
  constructor(readonly problems: string[]) {
    super(`schema.prisma cannot be served:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ModelError';
  }
}

const SCALARS = new Set<string>([
  'String',
  'Int',
  'BigInt',
  'Float',
  'Decimal',
  'Boolean',
  'DateTime',
  'Json',
  'Bytes',
]);

function clientDefault(field: DMMF.Field): ClientDefault | undefined {
  const d = field.default as { name?: string; args?: unknown[] } | undefined;
  if (!d || typeof d !== 'object' || Array.isArray(d) || !('name' in d)) return undefined;
  switch (d.name) {
    case 'uuid':
      return d.args?.[0] === 7 ? 'uuid7' : 'uuid4';
    case 'cuid':
      return 'cuid';
    case 'nanoid':
      return 'nanoid';
    case 'ulid':
      return 'ulid';
    default:
      return undefined;
  }
}

/** True when the migration SQL gives the column a default (autoincrement, now(), literals, dbgenerated). */
function hasDatabaseDefault(field: DMMF.Field): boolean {
  if (!field.hasDefaultValue) return false;
  return clientDefault(field) === undefined;
}

/** The marker of a file-reference field in its documentation comment (docs/storage.md "Records that reference files"). */
const FILE_MARKER = /@svcgen\.file\b(?:\(([^)]*)\))?/;

/**
 * `/// @svcgen.file(<bucket>)` or `/// @svcgen.file(<bucket>, onDelete: delete)` on a field: the
 * file reference it declares, undefined without a marker, or a problem saying what to fix.
 */
function fileReference(model: string, field: DMMF.Field): FileReference | string | undefined {
  const match = FILE_MARKER.exec(field.documentation ?? '');
  if (!match) return undefined;
  const at = `model ${model}: field ${field.name}`;
  const usage = `write /// @svcgen.file(<bucket>) or /// @svcgen.file(<bucket>, onDelete: delete) (found "${match[0]}")`;
  const [bucket = '', ...options] = (match[1] ?? '').split(',').map((p) => p.trim());
  if (!/^[a-z0-9][a-z0-9_-]{0,62}$/.test(bucket)) return `${at}: @svcgen.file needs the name of a bucket; ${usage}`;
  let onDelete: FileReference['onDelete'] = 'keep';
  for (const option of options) {
    const m = /^onDelete\s*:\s*(keep|delete)$/.exec(option);
    if (!m) return `${at}: @svcgen.file takes only onDelete: keep or onDelete: delete after the bucket; ${usage}`;
    onDelete = m[1] as FileReference['onDelete'];
  }
  if (field.kind !== 'scalar' || field.type !== 'String' || field.isList)
    return `${at}: a file reference holds one file id, so the field must be String or String @db.Uuid (not ${field.type}${field.isList ? '[]' : ''})`;
  const native = field.nativeType?.[0];
  if (native !== undefined && native !== 'Uuid' && native !== 'Text' && native !== 'VarChar')
    return `${at}: a file reference must be String, String @db.Uuid or String @db.Text (not @db.${native})`;
  if (field.isId) return `${at}: a file reference cannot be the primary key`;
  return { bucket, onDelete };
}

function describeField(field: DMMF.Field, enums: Map<string, DMMF.DatamodelEnum>, file?: FileReference): FieldSpec {
  const isEnum = field.kind === 'enum';
  const enumDef = isEnum ? enums.get(field.type) : undefined;
  const spec: FieldSpec = {
    name: field.name,
    column: field.dbName ?? field.name,
    type: (isEnum ? 'Enum' : field.type) as ScalarType,
    ...(enumDef ? { enumValues: enumDef.values.map((v) => v.name), enumDbName: enumDef.dbName ?? enumDef.name } : {}),
    ...(field.nativeType ? { nativeType: [field.nativeType[0], field.nativeType[1]] as const } : {}),
    list: field.isList,
    nullable: !field.isRequired,
    id: field.isId,
    unique: field.isUnique,
    dbDefault: hasDatabaseDefault(field),
    ...(clientDefault(field) ? { clientDefault: clientDefault(field) } : {}),
    managed: field.isUpdatedAt || field.name === 'createdAt' || field.name === 'updatedAt',
    ...(file ? { file } : {}),
  };
  return spec;
}

function describeRelation(model: DMMF.Model, field: DMMF.Field, models: Map<string, DMMF.Model>): RelationSpec {
  const from = field.relationFromFields ?? [];
  if (from.length > 0) {
    return {
      name: field.name,
      target: field.type,
      kind: 'one',
      fields: from,
      targetFields: field.relationToFields ?? [],
      nullable: !field.isRequired,
    };
  }
  // The foreign key sits on the other side: find the opposite field of the same relation.
  const target = models.get(field.type)!;
  const opposite = target.fields.find(
    (f) =>
      f.relationName === field.relationName &&
      f.kind === 'object' &&
      !(target.name === model.name && f.name === field.name),
  );
  const oppositeFrom = opposite?.relationFromFields ?? [];
  return {
    name: field.name,
    target: field.type,
    kind: field.isList ? 'many' : 'one',
    fields: opposite?.relationToFields ?? [],
    targetFields: oppositeFrom,
    nullable: field.isList ? false : !field.isRequired,
  };
}

/**
 * The model's B-tree indexes, primary key first, duplicates dropped. DMMF lists `@id`/`@unique`
 * next to `@@id`/`@@unique`/`@@index` with field names (not column names) and sort orders.
 */
function describeIndexes(model: DMMF.Model, all: readonly DMMF.Index[], primaryKey: readonly string[]): IndexSpec[] {
  const out: IndexSpec[] = [{ fields: primaryKey, unique: true }];
  const seen = new Set([primaryKey.join(',')]);
  for (const index of all) {
    if (
      index.model !== model.name ||
      index.type === 'fulltext' ||
      (index.algorithm !== undefined && index.algorithm !== 'BTree')
    )
      continue;
    const fields = index.fields.map((f) => (f.sortOrder === 'desc' ? `-${f.name}` : f.name));
    const key = fields.join(',');
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ fields, unique: index.type !== 'normal' });
  }
  return out;
}

export function describeModel(dmmf: DMMF.Document): TableSpec[] {
  const problems: string[] = [];
  const enums = new Map(dmmf.datamodel.enums.map((e) => [e.name, e]));
  const models = new Map(dmmf.datamodel.models.map((m) => [m.name, m]));
  const tables: TableSpec[] = [];

  for (const model of [...dmmf.datamodel.models].sort((a, b) => a.name.localeCompare(b.name, 'en'))) {
    if (RESERVED_PATH_NAMES.has(model.name)) {
      problems.push(`model ${model.name}: the name is reserved by the REST API`);
      continue;
    }
    const byName = new Map(model.fields.map((f) => [f.name, f]));
    const missing: string[] = [];
    const createdAt = byName.get('createdAt');
    const updatedAt = byName.get('updatedAt');
    const createdDefault = createdAt?.default as { name?: string } | undefined;
    if (createdAt?.type !== 'DateTime' || createdDefault?.name !== 'now') {
      missing.push('createdAt DateTime @default(now())');
    }
    if (updatedAt?.type !== 'DateTime' || !updatedAt.isUpdatedAt) missing.push('updatedAt DateTime @updatedAt');
    if (missing.length > 0) {
      problems.push(
        `model ${model.name} is missing ${missing.join(' and ')}; add ${missing.length > 1 ? 'them' : 'it'} to the model`,
      );
    }

    const primaryKey = model.primaryKey?.fields ?? model.fields.filter((f) => f.isId).map((f) => f.name);
    if (primaryKey.length === 0) {
      problems.push(`model ${model.name} has no primary key; add @id to a field or @@id([...]) to the model`);
    }

    const fields: FieldSpec[] = [];
    const relations: RelationSpec[] = [];
    for (const field of model.fields) {
      if (field.kind === 'object') {
        relations.push(describeRelation(model, field, models));
      } else if (field.kind === 'unsupported' || (field.kind === 'scalar' && !SCALARS.has(field.type))) {
        problems.push(`model ${model.name}: field ${field.name} has a type svcgen cannot serve (${field.type})`);
      } else {
        const file = fileReference(model.name, field);
        if (typeof file === 'string') problems.push(file);
        else fields.push(describeField(field, enums, file));
      }
    }
    const indexes = primaryKey.length > 0 ? describeIndexes(model, dmmf.datamodel.indexes ?? [], primaryKey) : [];
    tables.push({ name: model.name, dbName: model.dbName ?? model.name, primaryKey, fields, relations, indexes });
  }
  if (problems.length > 0) throw new ModelError(problems);
  return tables;
}

/**
 * File references to buckets the config does not declare, each with the schema line of its field
 * (`schema.prisma:<line>`), as ModelError problems.
 */
export function unknownFileBuckets(
  tables: readonly TableSpec[],
  buckets: readonly string[],
  schemaText: string,
): string[] {
  const lines = schemaText.split('\n');
  const lineOf = (model: string, field: string): number | undefined => {
    let inModel = false;
    for (const [i, line] of lines.entries()) {
      const m = /^\s*model\s+(\w+)\s*\{/.exec(line);
      if (m) inModel = m[1] === model;
      else if (inModel && new RegExp(`^\\s*${field}\\s`).test(line)) return i + 1;
    }
    return undefined;
  };
  const problems: string[] = [];
  for (const table of tables) {
    for (const field of table.fields) {
      if (!field.file || buckets.includes(field.file.bucket)) continue;
      const line = lineOf(table.name, field.name);
      const known = buckets.length ? `the buckets are ${buckets.join(', ')}` : 'svcgen.config.json declares no bucket';
      problems.push(
        `${line ? `schema.prisma:${line}: ` : ''}model ${table.name}: field ${field.name} references files of bucket ${field.file.bucket}, which storage.buckets does not declare (${known})`,
      );
    }
  }
  return problems;
}
