/** Request bodies against the generated zod validators, with every failure named by field (422). */
import type { ZodType } from 'zod';
import { Problem, type FieldError } from '../http/index.ts';
import type { CatalogTable } from '../query/index.ts';

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function requireObject(value: unknown, what = 'the body'): Record<string, unknown> {
  if (!isPlainObject(value)) {
    throw new Problem('validation', `${what} must be a JSON object of field values`, [
      { field: '', rule: 'type', message: `${what} must be a JSON object` },
    ]);
  }
  return value;
}

const RULES: Record<string, string> = {
  invalid_type: 'type',
  invalid_value: 'enum',
  invalid_format: 'format',
  invalid_union: 'type',
  too_big: 'max',
  too_small: 'min',
  not_multiple_of: 'multiple_of',
  custom: 'custom',
};

/** Field errors of one record body, or [] when valid; `parsed` receives the validated value. */
export function checkRecord(
  table: CatalogTable,
  validator: ZodType,
  body: Record<string, unknown>,
  mode: 'create' | 'update',
): { errors: FieldError[]; value: Record<string, unknown> } {
  const errors: FieldError[] = [];
  for (const key of Object.keys(body)) {
    const field = table.fields.get(key);
    if (!field) {
      const relation = table.relations.get(key);
      errors.push({
        field: key,
        rule: 'unknown_field',
        message: relation
          ? `${key} is a relation; link records through its foreign key field${relation.fields.length ? ` (${relation.fields.join(', ')})` : ' on the other table'}`
          : `${table.spec.name} has no field "${key}"`,
      });
    } else if (field.managed || (mode === 'update' && field.id)) {
      errors.push({ field: key, rule: 'read_only', message: `${key} is set by the server and cannot be written` });
    }
  }
  if (errors.length > 0) return { errors, value: {} };
  const result = validator.safeParse(body);
  if (result.success) return { errors, value: result.data as Record<string, unknown> };
  for (const issue of result.error.issues) {
    const field = issue.path.map(String).join('.');
    const top = String(issue.path[0] ?? '');
    if (issue.code === 'invalid_type' && issue.path.length === 1 && !(top in body)) {
      errors.push({ field, rule: 'required', message: `${field} is required` });
    } else if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) errors.push({ field: key, rule: 'unknown_field', message: `${table.spec.name} has no field "${key}"` });
    } else {
      errors.push({ field, rule: RULES[issue.code] ?? issue.code, message: `${field}: ${issue.message}` });
    }
  }
  return { errors, value: {} };
}

export function validateRecord(
  table: CatalogTable,
  validator: ZodType,
  body: unknown,
  mode: 'create' | 'update',
): Record<string, unknown> {
  const object = requireObject(body);
  const { errors, value } = checkRecord(table, validator, object, mode);
  if (errors.length > 0) {
    throw new Problem('validation', errors.map((e) => e.message).join('; '), errors);
  }
  return value;
}
