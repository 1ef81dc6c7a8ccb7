/**
 * Changes of the endpoints of a project's own code between two versions (docs/diff.md), read
 * from their generated/openapi.json: the operations marked `x-svcgen-access`. Breaking for a
 * client: an endpoint removed or moved (method or path), its input gaining a required field,
 * losing a field or changing a field's type, its output losing a field or changing its type.
 */
import type { ApiChange } from './diff-models.ts';

interface Operation {
  readonly method: string;
  readonly path: string;
  /** The input's fields: the body's properties, or the query and path parameters. */
  readonly input: ReadonlyMap<string, { readonly required: boolean; readonly type: string }>;
  readonly output: ReadonlyMap<string, { readonly required: boolean; readonly type: string }>;
}

// biome-ignore lint/suspicious/noExplicitAny: a parsed OpenAPI document, read defensively (every member may be missing)
type Json = Record<string, any>;

/** A field's type as compared: its JSON Schema without descriptions, as stable text. */
function typeText(schema: unknown): string {
  return JSON.stringify(schema ?? {}, (key, value: unknown) =>
    key === 'description' || key === 'examples' ? undefined : value,
  );
}

function fields(schema: Json | undefined) {
  const required = new Set<string>(schema?.required ?? []);
  return new Map(
    Object.entries((schema?.properties ?? {}) as Json).map(([name, s]) => [
      name,
      { required: required.has(name), type: typeText(s) },
    ]),
  );
}

/** The endpoints of an OpenAPI document svcgen generated, by operationId (their name). */
export function endpointOperations(doc: unknown): Map<string, Operation> {
  const out = new Map<string, Operation>();
  for (const [path, item] of Object.entries(((doc as Json | undefined)?.paths ?? {}) as Json)) {
    for (const [method, op] of Object.entries(item as Json)) {
      if (typeof op !== 'object' || op === null || !('x-svcgen-access' in op)) continue;
      const body = op.requestBody?.content?.['application/json']?.schema as Json | undefined;
      const input = body
        ? fields(body)
        : new Map(
            ((op.parameters ?? []) as Json[])
              .filter((p) => p.in === 'query' || p.in === 'path')
              .map((p) => [p.name as string, { required: Boolean(p.required), type: typeText(p.schema) }]),
          );
      const success = Object.entries((op.responses ?? {}) as Json).find(([status]) => status.startsWith('2'));
      const output = fields(success?.[1]?.content?.['application/json']?.schema);
      out.set(op.operationId as string, { method: method.toUpperCase(), path, input, output });
    }
  }
  return out;
}

export function diffEndpoints(before: unknown, after: unknown): ApiChange[] {
  const was = endpointOperations(before);
  const now = endpointOperations(after);
  const changes: ApiChange[] = [];
  for (const [name, op] of now)
    if (!was.has(name))
      changes.push({ kind: 'endpoint added', subject: name, detail: `${op.method} ${op.path}`, breaking: false });
  for (const [name, old] of was) {
    const op = now.get(name);
    if (!op) {
      changes.push({ kind: 'endpoint removed', subject: name, detail: `${old.method} ${old.path}`, breaking: true });
      continue;
    }
    const changed = (detail: string, breaking: boolean) =>
      changes.push({ kind: 'endpoint changed', subject: name, detail, breaking });
    if (old.method !== op.method || old.path !== op.path)
      changed(`moved: ${old.method} ${old.path} → ${op.method} ${op.path}`, true);
    for (const [field, f] of op.input) {
      const prior = old.input.get(field);
      if (!prior) changed(`input: ${field} added${f.required ? ', required' : ''}`, f.required);
      else if (prior.type !== f.type) changed(`input: ${field} type changed`, true);
      else if (!prior.required && f.required) changed(`input: ${field} now required`, true);
    }
    for (const field of old.input.keys()) if (!op.input.has(field)) changed(`input: ${field} removed`, true);
    for (const [field, f] of old.output) {
      const next = op.output.get(field);
      if (!next) changed(`output: ${field} removed`, true);
      else if (next.type !== f.type) changed(`output: ${field} type changed`, true);
      else if (f.required && !next.required) changed(`output: ${field} now optional`, true);
    }
    for (const field of op.output.keys()) if (!old.output.has(field)) changed(`output: ${field} added`, false);
  }
  return changes;
}
