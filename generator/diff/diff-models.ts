/**
 * API changes between two data models (`svcgen diff`): tables, fields, relations and enum values
 * added or removed, types and nullability changed, each marked breaking or not for a client of
 * the generated API. Indexes are not compared: an `@@index` changes which reads are expensive
 * (runtime/data/cost.ts), never a request or a response.
 */
import type { FieldSpec, RelationSpec, TableSpec } from '../../runtime/model/index.ts';

export interface ApiChange {
  readonly kind:
    | 'table added'
    | 'table removed'
    | 'field added'
    | 'field removed'
    | 'type changed'
    | 'nullability changed'
    | 'enum value added'
    | 'enum value removed'
    | 'file reference changed'
    | 'primary key changed'
    | 'relation added'
    | 'relation removed'
    | 'relation changed'
    | 'endpoint added'
    | 'endpoint removed'
    | 'endpoint changed';
  /** `Table` or `Table.field`; an endpoint's name. */
  readonly subject: string;
  readonly detail: string;
  readonly breaking: boolean;
}

/**
 * The type as the schema spells it: `Int?`, `String[]`, `String? @db.VarChar(20)`. Without
 * `nullable` the `?` is left out, which is what a type change compares (nullability is its own change).
 */
export function typeName(field: FieldSpec, nullable = field.nullable): string {
  const base = field.type === 'Enum' ? `enum(${field.enumDbName ?? ''})` : field.type;
  const native = field.nativeType
    ? ` @db.${field.nativeType[0]}${field.nativeType[1].length ? `(${field.nativeType[1].join(', ')})` : ''}`
    : '';
  return `${base}${field.list ? '[]' : ''}${nullable ? '?' : ''}${native}`;
}

/** A client may leave the field out of a create: nullable, defaulted, a list or server-set. */
export function optionalOnCreate(field: FieldSpec): boolean {
  return field.nullable || field.list || field.dbDefault || field.clientDefault !== undefined || field.managed;
}

function compareFields(table: string, before: FieldSpec, after: FieldSpec, out: ApiChange[]): void {
  const subject = `${table}.${after.name}`;
  if (typeName(before, false) !== typeName(after, false)) {
    out.push({ kind: 'type changed', subject, detail: `${typeName(before)} → ${typeName(after)}`, breaking: true });
  } else if (before.type === 'Enum') {
    const was = new Set(before.enumValues);
    const now = new Set(after.enumValues);
    for (const v of after.enumValues ?? [])
      if (!was.has(v)) out.push({ kind: 'enum value added', subject, detail: v, breaking: false });
    for (const v of before.enumValues ?? [])
      if (!now.has(v)) out.push({ kind: 'enum value removed', subject, detail: v, breaking: true });
  }
  const reference = (f: FieldSpec) =>
    f.file
      ? `files of ${f.file.bucket}${f.file.onDelete === 'delete' ? ', onDelete: delete' : ''}`
      : 'no file reference';
  if (reference(before) !== reference(after)) {
    // A new or other bucket, or onDelete: delete (which needs delete permission), refuses values a
    // writer could send before; dropping the reference, or onDelete: delete, refuses none.
    const stricter =
      after.file !== undefined &&
      (before.file?.bucket !== after.file.bucket ||
        (after.file.onDelete === 'delete' && before.file.onDelete !== 'delete'));
    out.push({
      kind: 'file reference changed',
      subject,
      detail: `${reference(before)} → ${reference(after)}`,
      breaking: stricter,
    });
  }
  if (before.nullable !== after.nullable) {
    // Either way a client breaks: required → nullable hands readers nulls; nullable → required
    // rejects writers that leave it out.
    out.push({
      kind: 'nullability changed',
      subject,
      detail: `${typeName(before)} → ${typeName(after)} (${before.nullable ? 'nullable → required' : 'required → nullable'})`,
      breaking: true,
    });
  } else if (optionalOnCreate(before) && !optionalOnCreate(after)) {
    out.push({
      kind: 'nullability changed',
      subject,
      detail: `${typeName(after)}: default removed, now required on create`,
      breaking: true,
    });
  }
}

const relationTarget = (r: RelationSpec) => (r.kind === 'many' ? `${r.target}[]` : r.target);

export function diffModels(before: readonly TableSpec[], after: readonly TableSpec[]): ApiChange[] {
  const out: ApiChange[] = [];
  const was = new Map(before.map((t) => [t.name, t]));
  const now = new Map(after.map((t) => [t.name, t]));
  const names = [...new Set([...was.keys(), ...now.keys()])].sort();
  for (const name of names) {
    const a = was.get(name);
    const b = now.get(name);
    if (!a) {
      out.push({ kind: 'table added', subject: name, detail: `/gw/api/rest/${name}`, breaking: false });
      continue;
    }
    if (!b) {
      out.push({ kind: 'table removed', subject: name, detail: `/gw/api/rest/${name} is gone`, breaking: true });
      continue;
    }
    if (a.primaryKey.join(',') !== b.primaryKey.join(',')) {
      out.push({
        kind: 'primary key changed',
        subject: name,
        detail: `(${a.primaryKey.join(', ')}) → (${b.primaryKey.join(', ')})`,
        breaking: true,
      });
    }
    const fieldsBefore = new Map(a.fields.map((f) => [f.name, f]));
    const fieldsAfter = new Map(b.fields.map((f) => [f.name, f]));
    for (const field of b.fields) {
      const old = fieldsBefore.get(field.name);
      if (!old) {
        const optional = optionalOnCreate(field);
        out.push({
          kind: 'field added',
          subject: `${name}.${field.name}`,
          detail: `${typeName(field)}${optional ? '' : ', required on create'}`,
          breaking: !optional,
        });
      } else {
        compareFields(name, old, field, out);
      }
    }
    for (const field of a.fields) {
      if (!fieldsAfter.has(field.name))
        out.push({ kind: 'field removed', subject: `${name}.${field.name}`, detail: typeName(field), breaking: true });
    }
    const relationsAfter = new Set(b.relations.map((r) => r.name));
    const relationsBefore = new Map(a.relations.map((r) => [r.name, r]));
    for (const r of b.relations) {
      const old = relationsBefore.get(r.name);
      if (!old)
        out.push({ kind: 'relation added', subject: `${name}.${r.name}`, detail: `→ ${r.target}`, breaking: false });
      // Same name, other records (an implicit many-to-many replaced by a join model): what an
      // include or a filter on it reads and returns is another table's.
      else if (old.target !== r.target || old.kind !== r.kind)
        out.push({
          kind: 'relation changed',
          subject: `${name}.${r.name}`,
          detail: `${relationTarget(old)} → ${relationTarget(r)}`,
          breaking: true,
        });
    }
    for (const r of a.relations)
      if (!relationsAfter.has(r.name))
        out.push({ kind: 'relation removed', subject: `${name}.${r.name}`, detail: `→ ${r.target}`, breaking: true });
  }
  return out;
}
