/**
 * The request body of POST /_apikeys (docs/api.md §4) and the shapes of the answers: the runtime
 * validates the body and types its answers with these, OpenAPI is derived from them.
 */
import { z } from 'zod';
import { KEY_PREFIX, KEY_PREFIX_RULE } from '../api-keys.ts';
import { CONTEXT_KEY, contextKeyProblem } from '../names.ts';
import { dateTimeText } from './formats.ts';

/**
 * Context keys are checked on the parsed JSON, before zod's record: that would silently drop a
 * `__proto__` key (JSON.parse makes it an own property), and a bad key must be a 422 naming
 * `context.<key>`, not a key lost or a prototype changed (docs/api.md §4).
 */
function checkContextKeys(value: unknown, ctx: z.RefinementCtx): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  for (const key of Object.keys(value)) {
    const problem = contextKeyProblem(key);
    if (problem)
      ctx.addIssue({ code: 'custom', path: [key], message: problem, params: { rule: 'name' }, input: value });
  }
  return value;
}

export const newKeyBody = z
  .object({
    name: z.string().min(1).max(200),
    prefix: z.string().regex(KEY_PREFIX, KEY_PREFIX_RULE),
    roles: z.array(z.string()).min(1),
    context: z
      .preprocess(checkContextKeys, z.record(z.string(), z.string()))
      // The keys checkContextKeys allows (it also refuses the names every object has).
      .meta({ propertyNames: { pattern: CONTEXT_KEY.source } })
      .default({}),
    environment: z.string(),
  })
  .strict();

/** A key as listed: never its value. */
export const apiKey = z.object({
  id: z.string(),
  name: z.string(),
  prefix: z.string(),
  roles: z.array(z.string()),
  environment: z.string(),
  createdAt: dateTimeText,
  context: z.record(z.string(), z.string()),
  lastUsedAt: dateTimeText.nullable(),
});

/** What POST /_apikeys answers in `data`: the key's value is shown here once, never again. */
export const createdApiKey = apiKey
  .pick({ id: true, name: true, prefix: true, roles: true, environment: true, createdAt: true })
  .extend({ key: z.string().meta({ description: 'The key; shown only in this answer' }) });
