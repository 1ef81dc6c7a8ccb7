/** The request body of POST /_apikeys (docs/api.md §4): the runtime validates with it, OpenAPI is derived from it. */
import { z } from 'zod';
import { KEY_PREFIX, KEY_PREFIX_RULE } from '../api-keys.ts';
import { CONTEXT_KEY, contextKeyProblem } from '../names.ts';

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
