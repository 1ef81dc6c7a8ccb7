/**
 * zod validator source for each field, as text for the table template (zod 4 API). They check the
 * JSON shape of a value; the runtime words every failure from the field's description and checks
 * the storage bounds left (Decimal digits, timestamp years, SmallInt, NUL characters) itself
 * (runtime/data/field-rules.ts).
 */
import { literal } from './literal.ts';
import type { FieldSpec } from '../../runtime/model/index.ts';

function scalar(field: FieldSpec): string {
  const [native, args] = field.nativeType ?? [undefined, []];
  switch (field.type) {
    case 'String': {
      // Any 8-4-4-4-12 hex UUID, as PostgreSQL's uuid type takes: z.uuid() would also demand RFC
      // 9562 version and variant bits and refuse ids such as 00000000-0000-0000-0000-000000000001.
      if (native === 'Uuid') return 'z.guid()';
      const max = (native === 'VarChar' || native === 'Char') && args[0] ? `.max(${Number(args[0])})` : '';
      return `z.string()${max}`;
    }
    case 'Int':
      return 'z.int32()';
    case 'BigInt':
      // abort: a string that is not digits must not reach BigInt(), which would throw (a 500).
      return "z.union([z.int(), z.string().regex(/^-?\\d{1,19}$/, { abort: true }).refine((v) => BigInt(v) >= -(2n ** 63n) && BigInt(v) < 2n ** 63n, 'must fit in 64 bits')])";
    case 'Float':
      return 'z.number()';
    case 'Decimal':
      return 'z.union([z.number(), z.string().regex(/^-?\\d+(\\.\\d+)?$/)])';
    case 'Boolean':
      return 'z.boolean()';
    case 'DateTime':
      return 'z.union([z.iso.datetime({ offset: true }), z.iso.date()])';
    case 'Json':
      return 'z.json()';
    case 'Bytes':
      return 'z.base64()';
    case 'Enum':
      return `z.enum([${(field.enumValues ?? []).map((v) => literal(v)).join(', ')}])`;
  }
}

export function zodExpression(field: FieldSpec, mode: 'create' | 'update'): string {
  let expr = scalar(field);
  if (field.list) expr = `z.array(${expr})`;
  if (field.nullable) expr += '.nullable()';
  // A list left out of a create is stored as an empty list (as Prisma's client does).
  const optional =
    mode === 'update' || field.nullable || field.list || field.dbDefault || field.clientDefault !== undefined;
  if (optional) expr += '.optional()';
  return expr;
}

/** Fields a body may carry: everything but server-managed fields (and, for updates, the key). */
export function writableFields(fields: readonly FieldSpec[], mode: 'create' | 'update'): FieldSpec[] {
  return fields.filter((f) => !f.managed && !(mode === 'update' && f.id));
}
