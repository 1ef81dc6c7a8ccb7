/** Project, environment and body of an /auth request, with the auth surface's errors. */
import { z } from 'zod';
import type { Config } from '../config/index.ts';
import { AuthError, JsonBodyError, Problem, header, parseJsonBody, type ApiRequest } from '../http/index.ts';
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

/** A string field checked by one of our rules, each violation its own issue (so all are listed at once). */
function ruled(check: (value: string) => Violation[]) {
  return z.string().superRefine((value, ctx) => {
    for (const v of check(value)) ctx.addIssue({ code: 'custom', message: v.message, params: { rule: v.rule } });
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

const text = (max: number) => z.string().trim().min(1).max(max);
const email = z.string().trim().pipe(z.email().max(254));

/** The signup body: the password rule and the roles open to signup come from the config. */
export function signupBody(config: Config) {
  const open = Object.entries(config.roles)
    .filter(([, role]) => role.signup)
    .map(([name]) => name);
  return z.object({
    email,
    password: ruled((value) => passwordViolations(value, 'password', config.auth.password.minLength)),
    firstName: text(100),
    lastName: text(100),
    roleId: ruled((value) =>
      open.includes(value)
        ? []
        : [
            {
              field: 'roleId',
              rule: 'signup_role',
              message: open.length
                ? `roleId must be one of the roles open to signup: ${open.join(', ')}`
                : 'no role is open to signup; leave roleId out',
            },
          ],
    ).optional(),
  });
}

export function resetBody(config: Config) {
  return z.object({
    email: z.string().max(254),
    newPassword: ruled((value) => passwordViolations(value, 'newPassword', config.auth.password.minLength)),
    code: z.string().max(64),
  });
}

export const loginBody = z.object({ email: z.string().max(254), password: z.string() });
export const confirmBody = z.object({ email: z.string().max(254), code: z.string().max(64) });
export const recoverBody = z.object({ email: z.string().max(254) });
export const refreshBody = z.object({ refreshToken: z.string().max(512) });

/** Bodies of a signed-in user's account changes (docs/api.md §3 "Your account"). */
export function changePasswordBody(config: Config) {
  return z.object({
    currentPassword: z.string().max(1024),
    newPassword: ruled((value) => passwordViolations(value, 'newPassword', config.auth.password.minLength)),
  });
}
export const changeEmailBody = z.object({ newEmail: email, currentPassword: z.string().max(1024) });
export const confirmEmailChangeBody = z.object({ code: z.string().max(64) });
export const deleteAccountBody = z.object({ currentPassword: z.string().max(1024) });
