/** Project and environment of a request (docs/api.md §2 "Headers", "Order of checks"). */
import type { Config } from '../config/index.ts';
import { Problem } from '../http/index.ts';
import { header, type ApiRequest } from '../http/index.ts';

export interface Tenant {
  readonly projectId: string;
  readonly environment: string;
}

export const DEFAULT_ENVIRONMENT = 'master';

/** Data and webhook routes: project from `X-Project-Id` or `?project_id`, environment from `environment` / `x-environment`. */
export function resolveDataTenant(
  req: ApiRequest,
  config: Config,
  options: { requireEnvironment?: boolean } = {},
): Tenant {
  const projectId = header(req, 'x-project-id') ?? req.query.get('project_id') ?? undefined;
  if (projectId === undefined || projectId === '') {
    throw new Problem(
      'missing-project',
      'send the project id in the X-Project-Id header (or the project_id query parameter)',
      [{ field: 'X-Project-Id', rule: 'required', message: 'X-Project-Id is required' }],
    );
  }
  if (projectId !== config.project.id) {
    throw new Problem('unknown-project', `no project with id "${projectId}" is served here`);
  }
  const named = header(req, 'environment') ?? header(req, 'x-environment');
  if (options.requireEnvironment && (named === undefined || named === '')) {
    throw new Problem('bad-request', 'send the environment header on every webhook request', [
      { field: 'environment', rule: 'required', message: 'environment header is required' },
    ]);
  }
  const environment = named === undefined || named === '' ? DEFAULT_ENVIRONMENT : named;
  if (!config.environments.includes(environment)) {
    throw new Problem('unknown-environment', `project "${projectId}" has no environment "${environment}"`);
  }
  return { projectId, environment };
}
