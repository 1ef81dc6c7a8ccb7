/**
 * What runtime/graphql/http.ts shares between the data and the management schema: reading the
 * request for graphql-http, the options both handlers pass it, and turning its result into the
 * HTTP answer (docs/graphql.md "Requests" and "Errors").
 */
import { GraphQLError, specifiedRules } from 'graphql';
import type { Config } from '../config/index.ts';
import { MAX_JSON_DEPTH, type ApiRequest, type Reply } from '../http/index.ts';
import { nestsDeeperThan } from '../http/json-body.ts';
import type { Tenant } from '../tenancy/index.ts';
import { DataText, spliceData } from './direct.ts';
import type { DocumentCache } from './document-cache.ts';
import { unmarkDecimals } from './exact-numbers.ts';
import { CostRule, NoIntrospectionRule, ServedOperationsRule } from './rules.ts';

/** What execution reports for the HTTP answer (answer()). */
export interface AnswerState {
  /** Set when execution answered no data at all (variables that could not be coerced): a request error. */
  noData?: boolean;
  /** Retry-After of a field's database fault, sent as the answer's header. */
  retryAfter?: string;
  /** The answer's data as JSON text, from the fast path (runtime/graphql/direct.ts). */
  dataText?: DataText;
}

/** Errors graphql-js raises itself get the code, type and status every answer's errors carry. */
function formatError(error: Readonly<GraphQLError | Error>, logFault: (error: unknown) => void): GraphQLError {
  if (error instanceof GraphQLError && typeof error.extensions.code === 'string') return error;
  const message = error.message;
  if (error instanceof GraphQLError && error.path !== undefined) {
    // A value graphql-js could not serialize, or a fault below a root field: the server's, not the caller's.
    logFault(error.originalError ?? error);
    return new GraphQLError('the server could not complete this field', {
      path: error.path,
      extensions: { code: 'INTERNAL', type: '/errors/internal', status: 500 },
    });
  }
  const code = message.startsWith('Syntax Error')
    ? 'GRAPHQL_PARSE_FAILED'
    : message.startsWith('Variable "$')
      ? 'BAD_USER_INPUT'
      : error instanceof GraphQLError
        ? 'GRAPHQL_VALIDATION_FAILED'
        : 'BAD_REQUEST';
  const nodes = error instanceof GraphQLError ? error.nodes : undefined;
  return new GraphQLError(message, { nodes, extensions: { code, type: '/errors/invalid-parameter', status: 400 } });
}

function introspectionOn(config: Config, environment: string): boolean {
  const setting = config.graphql.introspection;
  return Array.isArray(setting) ? setting.includes(environment) : setting;
}

/** The validation rules, one array per introspection setting: the document cache keys validations by the array. */
const RULES = [...specifiedRules, ServedOperationsRule, CostRule];
const RULES_WITHOUT_INTROSPECTION = [...RULES, NoIntrospectionRule];

/** The parts of graphql-http's options both schemas share: parsing and validation (cached), error shapes. */
export function commonOptions(config: Config, documents: DocumentCache, logFault: (error: unknown) => void) {
  return {
    parse: documents.parse as never,
    validate: documents.validate as never,
    validationRules: (req: { context: { tenant: Tenant } }) =>
      introspectionOn(config, req.context.tenant.environment) ? RULES : RULES_WITHOUT_INTROSPECTION,
    formatError: (error: Readonly<GraphQLError | Error>) => formatError(error, logFault),
    onOperation: (req: { context: AnswerState }, _args: unknown, result: object) => {
      if (!('data' in result)) req.context.noData = true;
      else if ((result as { data: unknown }).data instanceof DataText)
        req.context.dataText = (result as { data: DataText }).data;
    },
  };
}

export const TOO_DEEP = Symbol('too deep');

/**
 * The POST body (null for GET), read here, not by graphql-http: a body over limits.bodyBytes is a
 * 413 Problem, not "unparsable". As every JSON body of the API, nesting is bounded before anything
 * recursive reads it (variables included).
 */
export async function readBody(req: ApiRequest): Promise<string | null | typeof TOO_DEEP> {
  const body = req.method === 'POST' ? ((await req.readBody())?.toString('utf8') ?? '') : null;
  const json = [body, req.query.get('variables'), req.query.get('extensions')];
  return json.some((text) => text !== null && nestsDeeperThan(text, MAX_JSON_DEPTH)) ? TOO_DEEP : body;
}

export function graphqlRequest<C>(req: ApiRequest, body: string | null, context: C) {
  const search = req.query.toString();
  return {
    method: req.method,
    url: `${req.path}${search ? `?${search}` : ''}`,
    headers: req.headers as Record<string, string | string[] | undefined>,
    body,
    raw: req,
    context,
  };
}

export function answer(
  context: AnswerState,
  text: string | null,
  init: { status: number; headers?: Record<string, string> },
  headers: Record<string, string>,
): Reply {
  // GraphQL over HTTP: with application/graphql-response+json, a response without data is a 4xx
  // (graphql-http sends 200 for a failed variable coercion, which execution reports).
  const requestError =
    context.noData === true &&
    init.status === 200 &&
    init.headers?.['content-type']?.startsWith('application/graphql-response+json') === true;
  const retry: Record<string, string> = context.retryAfter !== undefined ? { 'retry-after': context.retryAfter } : {};
  return {
    status: requestError ? 400 : init.status,
    headers: { ...init.headers, ...headers, ...retry },
    body: text === null ? undefined : spliceData(unmarkDecimals(text), context.dataText),
  };
}

export function tooDeep(headers: Record<string, string>): Reply {
  const message = `the request's JSON (body or variables) nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`;
  return {
    status: 400,
    headers: { 'content-type': 'application/graphql-response+json; charset=utf-8', ...headers },
    body: JSON.stringify({
      errors: [{ message, extensions: { code: 'BAD_REQUEST', type: '/errors/invalid-json', status: 400 } }],
    }),
  };
}
