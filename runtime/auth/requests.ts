/** Project, environment and body of an /auth request, with the auth surface's errors. */
import type { z } from 'zod';
import type { Config } from '../config/index.ts';
import { AuthError, JsonBodyError, Problem, header, parseJsonBody, type ApiRequest } from '../http/index.ts';
import type { AuthRules } from '../model/wire/index.ts';
import { DEFAULT_ENVIRONMENT, type Tenant } from '../tenancy/index.ts';
import { validationError, type Violation } from './auth-errors.ts';
import { passwordViolations } from './password-rule.ts';

/**
 * X-Project-Id required (400 VALIDATION_ERROR), then the project, the environment and auth being
 * enabled there (404 AUTH_NOT_CONFIGURED otherwise). The query parameters `project_id` and
 * `environment` stand in for the headers, so a JWKS client can fetch by URL (docs/api.md §3 "Verifying tokens yourself (JWKS)").
 */
export function resolveAuthTenant(req: ApiRequest, config: Config): Tenant {
  const projectId = header(req, 'x-project-id') || req.query.get('project_id') || undefined;
  if (projectId === undefined) {
    throw validationError([
      {
        field: 'X-Project-Id',
        rule: 'required',
        message: 'send the project id in the X-Project-Id header (or the project_id query parameter)',
      },
    ]);
  }
  const environment =
    header(req, 'environment') || header(req, 'x-environment') || req.query.get('environment') || DEFAULT_ENVIRONMENT;
  if (projectId !== config.project.id || !authEnabledIn(config, environment))
    throw new AuthError('AUTH_NOT_CONFIGURED');
  return { projectId, environment };
}

export function authEnabledIn(config: Config, environment: string): boolean {
  return (
    config.auth.enabled &&
    config.environments.includes(environment) &&
    (config.auth.environments ?? config.environments).includes(environment)
  );
}

function zodViolations(error: z.ZodError): Violation[] {
  return error.issues.map((issue) => {
    const field = issue.path.join('.') || 'body';
    // Our own rules (password, roleId) carry their rule name and a whole message.
    if (issue.code === 'custom' && typeof issue.params?.rule === 'string')
      return { field, rule: issue.params.rule, message: issue.message };
    return {
      field,
      rule: issue.code === 'invalid_type' && issue.input === undefined ? 'required' : issue.code,
      message: `${field}: ${issue.message}`,
    };
  });
}

/** The JSON body, validated by `schema`; any problem → 400 VALIDATION_ERROR naming the field. */
export async function readAuthBody<S extends z.ZodType>(req: ApiRequest, schema: S): Promise<z.output<S>> {
  let body: Buffer | undefined;
  try {
    body = await req.readBody();
  } catch (error) {
    if (error instanceof Problem) throw validationError([{ field: 'body', rule: 'max_size', message: error.detail }]);
    throw error;
  }
  const contentType = (header(req, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (contentType !== 'application/json') {
    throw validationError([
      { field: 'Content-Type', rule: 'media_type', message: 'send the body as application/json' },
    ]);
  }
  let raw: unknown;
  try {
    raw = parseJsonBody(body ?? Buffer.alloc(0));
  } catch (error) {
    if (error instanceof JsonBodyError)
      throw validationError([{ field: error.field, rule: error.rule, message: error.message }]);
    throw error;
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw validationError(zodViolations(parsed.error));
  return parsed.data;
}

/** The config's rules for the wire schemas (runtime/model/wire/auth.ts): the password rule, the roles open to signup. */
export function authRules(config: Config): AuthRules {
  const open = Object.entries(config.roles)
    .filter(([, role]) => role.signup)
    .map(([name]) => name);
  return {
    password: (value, field) => passwordViolations(value, field, config.auth.password.minLength),
    signupRole: (value) =>
      open.includes(value)
        ? []
        : [
            {
              rule: 'signup_role',
              message: open.length
                ? `roleId must be one of the roles open to signup: ${open.join(', ')}`
                : 'no role is open to signup; leave roleId out',
            },
          ],
  };
}
