/**
 * `POST /gw/api/rest/rpc/<name>` (docs/own-code.md "Database functions"): admitted like every
 * data route (runtime/data/admission.ts: tenancy, credentials, the function as the resource, rate
 * limit), then the function's own grant: one of the roles its config entry lists (none: nobody;
 * management tokens never), then its arguments, then the call.
 */
import type { Config } from '../config/index.ts';
import { admit, dataLimits, refuseManagement, type AdmissionServices } from '../data/index.ts';
import type { Database } from '../db/index.ts';
import { jsonBodyProblem, parseJsonBody, Problem, rawJsonReply, type ApiRequest, type Handler } from '../http/index.ts';
import type { FunctionSpec } from '../model/index.ts';
import type { RolePrincipal } from '../principal/index.ts';
import { parseArguments } from './arguments.ts';
import { callFunction } from './call.ts';

export interface FunctionServices extends AdmissionServices {
  readonly db: Database;
  /** The functions served: the config's, each with its signature from generated/functions.ts. */
  readonly functions: ReadonlyMap<string, FunctionSpec>;
}

/** A management token is refused as on data; a role principal needs one of the function's roles. */
export function requireFunctionGrant(config: Config, name: string, principal: RolePrincipal): void {
  const roles = config.functions[name]?.roles ?? [];
  if (!principal.roles.some((role) => roles.includes(role)))
    throw new Problem('forbidden', `your role may not call the database function ${name}`);
}

/** The body: none is `{}` (a function without arguments); else JSON as every data route reads it. */
async function readArguments(req: ApiRequest): Promise<unknown> {
  const body = await req.readBody();
  if (body === undefined) return {};
  const contentType = String(req.headers['content-type'] ?? '')
    .split(';')[0]!
    .trim()
    .toLowerCase();
  if (contentType !== 'application/json')
    throw new Problem(
      'unsupported-media-type',
      contentType
        ? `Content-Type ${contentType} is not accepted here; send application/json`
        : 'send the body with Content-Type application/json',
    );
  try {
    return parseJsonBody(body);
  } catch (error) {
    throw jsonBodyProblem(error);
  }
}

export function functionHandler(services: FunctionServices): Handler {
  const limits = dataLimits(services);
  const resource = (req: ApiRequest): FunctionSpec => {
    const name = req.params.name ?? '';
    const spec = services.functions.get(name);
    if (!spec) throw new Problem('not-found', `there is no database function named "${name}"`);
    return spec;
  };
  return async (req) => {
    const admitted = admit(limits, services.config, req, () => resource(req));
    const { tenant, principal, resource: spec, headers } = admitted instanceof Promise ? await admitted : admitted;
    try {
      const caller = refuseManagement(principal);
      requireFunctionGrant(services.config, spec.name, caller);
      const args = parseArguments(spec, await readArguments(req));
      const data = await callFunction(services.db, spec, caller, tenant.environment, args);
      return rawJsonReply(200, `{"data":${data}}`, headers);
    } catch (error) {
      if (error instanceof Problem) Object.assign(error.headers, headers);
      throw error;
    }
  };
}
