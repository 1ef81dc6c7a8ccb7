/** API key management routes (docs/api.md §4): management token only. */
import { z } from 'zod';
import { Problem, jsonReply, readJson, type ApiRequest, type Reply } from '../http/index.ts';
import { contextKeyProblem, createApiKey, listApiKeys } from '../keys/index.ts';
import { authenticate } from '../principal/index.ts';
import { resolveDataTenant, type Tenant } from '../tenancy/index.ts';
import type { Services } from './services.ts';

async function requireManagement(services: Services, req: ApiRequest): Promise<Tenant> {
  const tenant = resolveDataTenant(req, services.config);
  const principal = await authenticate(req, tenant, services.resolvers);
  if (principal.kind !== 'management') {
    throw new Problem('forbidden', 'managing API keys needs a management token (Authorization: Bearer <management token>)');
  }
  return tenant;
}

const KEY_PREFIX = /^[A-Za-z][A-Za-z0-9_-]{0,31}$/;

/**
 * Context keys are checked on the parsed JSON, before zod's record: that would silently drop a
 * `__proto__` key (JSON.parse makes it an own property), and a bad key must be a 422 naming
 * `context.<key>`, not a key lost or a prototype changed (docs/api.md §4).
 */
function checkContextKeys(value: unknown, ctx: z.RefinementCtx): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  for (const key of Object.keys(value)) {
    const problem = contextKeyProblem(key);
    if (problem) ctx.addIssue({ code: 'custom', path: [key], message: problem, params: { rule: 'name' }, input: value });
  }
  return value;
}

export const newKeySchema = z
  .object({
    name: z.string().min(1).max(200),
    prefix: z.string().regex(KEY_PREFIX, 'a scheme word: a letter, then letters, digits, _ or -, at most 32 characters'),
    roles: z.array(z.string()).min(1),
    context: z.preprocess(checkContextKeys, z.record(z.string(), z.string())).default({}),
    environment: z.string(),
  })
  .strict();

/** Checks what the schema cannot: roles and environment exist in this project. */
export function keyProblems(services: Services, input: z.output<typeof newKeySchema>): { field: string; rule: string; message: string }[] {
  const problems: { field: string; rule: string; message: string }[] = [];
  if (!services.config.environments.includes(input.environment)) {
    problems.push({ field: 'environment', rule: 'enum', message: `environment must be one of ${services.config.environments.join(', ')}` });
  }
  input.roles.forEach((role, i) => {
    // Own roles only: `toString` or `__proto__` are "in" every object.
    if (!Object.hasOwn(services.config.roles, role)) {
      problems.push({ field: `roles[${i}]`, rule: 'enum', message: `no role named "${role}"; roles: ${Object.keys(services.config.roles).join(', ')}` });
    }
  });
  return problems;
}

/** The rule of a field error: zod's code, or the `rule` a custom check named. */
function issueRule(issue: z.core.$ZodIssue): string {
  const rule = issue.code === 'custom' ? (issue.params as { rule?: unknown } | undefined)?.rule : undefined;
  return typeof rule === 'string' ? rule : issue.code;
}

export function managementHandlers(services: Services) {
  return {
    async create(req: ApiRequest): Promise<Reply> {
      const tenant = await requireManagement(services, req);
      const parsed = newKeySchema.safeParse(await readJson(req));
      if (!parsed.success) {
        const errors = parsed.error.issues.flatMap((issue) =>
          issue.code === 'unrecognized_keys'
            ? issue.keys.map((k) => ({ field: k, rule: 'unknown_field', message: `unknown field "${k}"` }))
            : [{ field: issue.path.join('.'), rule: issueRule(issue), message: `${issue.path.join('.') || 'body'}: ${issue.message}` }],
        );
        throw new Problem('validation', errors.map((e) => e.message).join('; '), errors);
      }
      const errors = keyProblems(services, parsed.data);
      if (errors.length) throw new Problem('validation', errors.map((e) => e.message).join('; '), errors);
      const key = await createApiKey(services.db, { projectId: tenant.projectId, ...parsed.data });
      const { id, name, prefix, roles, environment, createdAt } = key;
      return jsonReply(201, { data: { id, name, prefix, roles, environment, createdAt, key: key.key } });
    },
    async list(req: ApiRequest): Promise<Reply> {
      const tenant = await requireManagement(services, req);
      return jsonReply(200, { data: await listApiKeys(services.db, tenant.projectId, tenant.environment) });
    },
    async revoke(req: ApiRequest): Promise<Reply> {
      const tenant = await requireManagement(services, req);
      const revoked = await services.credentials.revoke(tenant.projectId, req.params.id ?? '');
      if (!revoked) throw new Problem('not-found', `no API key with id "${req.params.id}"`);
      return { status: 204 };
    },
  };
}
