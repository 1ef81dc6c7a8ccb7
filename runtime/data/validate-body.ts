/** Request bodies against the generated zod validators, with every failure named by field (422). */
import type { z, ZodType } from 'zod';
import { Problem, type FieldError } from '../http/index.ts';
import type { CatalogTable } from '../query/index.ts';
import { fieldDescription, itemDescription, valueProblems } from './field-rules.ts';

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

/** `['tags', 3]` → `tags[3]`, `['meta', 'a']` → `meta.a`: the field as docs/api.md §6.1 names it. */
function fieldPath(path: readonly PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

/**
 * A zod issue as a field error in words (docs/api.md §6.1): the message says what the field takes,
 * from its description in the model, never zod's default text or a pattern.
 */
function issueError(table: CatalogTable, issue: z.core.$ZodIssue, body: Record<string, unknown>): FieldError {
  const name = String(issue.path[0] ?? '');
  const field = table.fields.get(name);
  const at = fieldPath(issue.path);
  if (!field) return { field: at, rule: RULES[issue.code] ?? issue.code, message: `${at}: ${issue.message}` };
  if (issue.path.length === 1 && !(name in body)) {
    return { field: at, rule: 'required', message: `${at} is required: expected ${fieldDescription(field)}` };
  }
  const value = issue.path.length === 1 ? body[name] : (body[name] as unknown[] | undefined)?.[issue.path[1] as number];
  const described = issue.path.length === 1 ? fieldDescription(field) : itemDescription(field);
  if (value === null) return { field: at, rule: 'required', message: `${at} cannot be null: expected ${described}` };
  let rule = RULES[issue.code] ?? issue.code;
  if (field.type === 'Enum' && issue.path.length === (field.list ? 2 : 1)) rule = 'enum';
  // The one refinement of the generated validators: a BigInt string past 64 bits.
  if (issue.code === 'custom' && field.type === 'BigInt') rule = String(value).startsWith('-') ? 'min' : 'max';
  return { field: at, rule, message: `${at}: expected ${described}` };
}

/**
 * Field errors of one record body, or [] when valid; `value` is the validated record. Unknown,
 * read-only, missing and invalid fields are all reported together, so one answer lists every
 * field to fix (the Problem caps how many it shows).
 */
export function checkRecord(
  table: CatalogTable,
  validator: ZodType,
  body: Record<string, unknown>,
  mode: 'create' | 'update',
): { errors: FieldError[]; value: Record<string, unknown> } {
  const errors: FieldError[] = [];
  const known: Record<string, unknown> = {};
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
    } else if (field.managed) {
      errors.push({ field: key, rule: 'read_only', message: `${key} is set by the server and cannot be written` });
    } else if (mode === 'update' && field.id) {
      errors.push({
        field: key,
        rule: 'read_only',
        message: `${key} is part of the record's key and cannot be changed`,
      });
    } else {
      known[key] = body[key];
    }
  }
  const result = validator.safeParse(known);
  if (!result.success) {
    for (const issue of result.error.issues) {
      if (issue.code === 'unrecognized_keys') {
        for (const key of issue.keys)
          errors.push({ field: key, rule: 'unknown_field', message: `${table.spec.name} has no field "${key}"` });
      } else {
        errors.push(issueError(table, issue, known));
      }
    }
    return { errors, value: {} };
  }
  const value = result.data as Record<string, unknown>;
  for (const [key, v] of Object.entries(value)) {
    const field = table.fields.get(key);
    if (!field) continue;
    for (const problem of valueProblems(field, v)) {
      errors.push({
        field: `${key}${problem.at}`,
        rule: problem.rule,
        message: `${key}${problem.at}: ${problem.message}`,
      });
    }
  }
  return errors.length > 0 ? { errors, value: {} } : { errors, value };
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
