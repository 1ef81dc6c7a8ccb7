/** /gw/api/rest/_apikeys: API key management (docs/api.md §4), management token only. */
import type { z } from 'zod';
import type { Config } from '../config/index.ts';
import type { Database } from '../db/index.ts';
import { Problem, jsonReply, readJson, type ApiRequest, type Reply } from '../http/index.ts';
import { authenticate, type CredentialResolver } from '../principal/index.ts';
import { resolveDataTenant, type Tenant } from '../tenancy/index.ts';
import { type createdApiKey, newKeyBody } from '../model/wire/index.ts';
import { createApiKey, listApiKeys, type ApiKeyRecord, type CredentialStore } from './store.ts';

export interface KeyRouteDeps {
  readonly config: Config;
  readonly db: Database;
  readonly resolvers: readonly CredentialResolver[];
  readonly credentials: CredentialStore;
}

async function requireManagement(deps: KeyRouteDeps, req: ApiRequest): Promise<Tenant> {
  const tenant = resolveDataTenant(req, deps.config);
  const principal = await authenticate(req, tenant, deps.resolvers);
  if (principal.kind !== 'management') {
    throw new Problem(
      'forbidden',
      'managing API keys needs a management token (Authorization: Bearer <management token>)',
    );
  }
  return tenant;
}

/** Checks what the schema cannot: roles and environment exist in this project. */
export function keyProblems(
  config: Config,
  input: z.output<typeof newKeyBody>,
): { field: string; rule: string; message: string }[] {
  const problems: { field: string; rule: string; message: string }[] = [];
  if (!config.environments.includes(input.environment)) {
    problems.push({
      field: 'environment',
      rule: 'enum',
      message: `environment must be one of ${config.environments.join(', ')}`,
    });
  }
  input.roles.forEach((role, i) => {
    // Own roles only: `toString` or `__proto__` are "in" every object.
    if (!Object.hasOwn(config.roles, role)) {
      problems.push({
        field: `roles[${i}]`,
        rule: 'enum',
        message: `no role named "${role}"; roles: ${Object.keys(config.roles).join(', ')}`,
      });
    }
  });
  return problems;
}

/** The rule of a field error: zod's code, or the `rule` a custom check named. */
function issueRule(issue: z.core.$ZodIssue): string {
  const rule = issue.code === 'custom' ? (issue.params as { rule?: unknown } | undefined)?.rule : undefined;
  return typeof rule === 'string' ? rule : issue.code;
}

/** What POST /_apikeys answers in `data` (runtime/model/wire/keys.ts). */
export type CreatedApiKey = z.output<typeof createdApiKey>;

/**
 * API key management after the caller is known to hold a management token: the one implementation
 * behind REST /_apikeys and the GraphQL management schema (docs/graphql.md "Management").
 */
export function keyOperations(deps: Pick<KeyRouteDeps, 'config' | 'db' | 'credentials'>) {
  return {
    /** Validates a request body as POST /_apikeys does (422 naming each field) and creates the key. */
    async create(tenant: Tenant, body: unknown): Promise<CreatedApiKey> {
      const parsed = newKeyBody.safeParse(body);
      if (!parsed.success) {
        const errors = parsed.error.issues.flatMap((issue) =>
          issue.code === 'unrecognized_keys'
            ? issue.keys.map((k) => ({ field: k, rule: 'unknown_field', message: `unknown field "${k}"` }))
            : [
                {
                  field: issue.path.join('.'),
                  rule: issueRule(issue),
                  message: `${issue.path.join('.') || 'body'}: ${issue.message}`,
                },
              ],
        );
        throw new Problem('validation', errors.map((e) => e.message).join('; '), errors);
      }
      const errors = keyProblems(deps.config, parsed.data);
      if (errors.length) throw new Problem('validation', errors.map((e) => e.message).join('; '), errors);
      const key = await createApiKey(deps.db, { projectId: tenant.projectId, ...parsed.data });
      const { id, name, prefix, roles, environment, createdAt } = key;
      return { id, name, prefix, roles, environment, createdAt, key: key.key };
    },
    list(tenant: Tenant): Promise<ApiKeyRecord[]> {
      return listApiKeys(deps.db, tenant.projectId, tenant.environment);
    },
    /** Revokes the key at once (every process forgets it); 404 Problem when no active key has `id`. */
    async revoke(tenant: Tenant, id: string): Promise<void> {
      const revoked = await deps.credentials.revoke(tenant.projectId, id);
      if (!revoked) throw new Problem('not-found', `no API key with id "${id}"`);
    },
  };
}

export function keyHandlers(deps: KeyRouteDeps) {
  const keys = keyOperations(deps);
  return {
    async create(req: ApiRequest): Promise<Reply> {
      const tenant = await requireManagement(deps, req);
      return jsonReply(201, { data: await keys.create(tenant, await readJson(req)) });
    },
    async list(req: ApiRequest): Promise<Reply> {
      const tenant = await requireManagement(deps, req);
      return jsonReply(200, { data: await keys.list(tenant) });
    },
    async revoke(req: ApiRequest): Promise<Reply> {
      const tenant = await requireManagement(deps, req);
      await keys.revoke(tenant, req.params.id ?? '');
      return { status: 204 };
    },
  };
}
