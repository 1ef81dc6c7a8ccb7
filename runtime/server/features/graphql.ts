/**
 * The GraphQL read API at /gw/api/graphql (docs/graphql.md): a second front end on the query layer
 * with no policy of its own. Requests pass the data routes' stages (tenancy, authentication, the
 * caller's and project's rate limits; request logs, metrics, CORS and fault answers are the HTTP
 * front's, shared by every route); graphql-http speaks GraphQL over HTTP; every root field compiles
 * through runtime/query under the caller's access. Each distinct set of roles gets the schema of
 * what it may read, built once. A management token gets the management schema instead (API keys and
 * webhooks, no data; runtime/graphql/management.ts). Each document runs within a budget of its own
 * (runtime/graphql/document-budget.ts), and introspection answers are kept per schema
 * (runtime/graphql/introspection.ts).
 */
import {
  execute,
  getOperationAST,
  GraphQLError,
  Kind,
  specifiedRules,
  type ExecutionArgs,
  type FragmentDefinitionNode,
  type GraphQLSchema,
} from 'graphql';
import { createHandler } from 'graphql-http';
import { header, MAX_JSON_DEPTH, Problem, type ApiRequest, type Handler, type Reply } from '../../http/index.ts';
import { nestsDeeperThan } from '../../http/json-body.ts';
import { GRAPHQL_PATH } from '../../model/index.ts';
import { buildGraphQLSchema, type SchemaVisibility, type WriteVisibility } from '../../graphql/schema.ts';
import { fieldResolver, type GraphQLContext } from '../../graphql/execute.ts';
import { managementSchema, type ManagementContext } from '../../graphql/management.ts';
import { unmarkDecimals } from '../../graphql/exact-numbers.ts';
import { answerDirectly, DataText, spliceData } from '../../graphql/direct.ts';
import {
  CostRule,
  NoIntrospectionRule,
  parseBounded,
  refuseVariables,
  ServedOperationsRule,
} from '../../graphql/rules.ts';
import { documentCache, type DocumentCache } from '../../graphql/document-cache.ts';
import { countRootFields, DocumentBudget } from '../../graphql/document-budget.ts';
import { introspectionAnswers } from '../../graphql/introspection.ts';
import type { Database } from '../../db/index.ts';
import { withIdempotency } from '../../idempotency/index.ts';
import { keyOperations } from '../../keys/index.ts';
import { callerId, type Principal, type RolePrincipal } from '../../principal/index.ts';
import { resolveDataTenant, type Tenant } from '../../tenancy/index.ts';
import { webhookOperations } from '../../webhooks/index.ts';
import type { ServerFeature } from '../feature.ts';
import { dataLimits, rateLimitHeaders, type DataLimits } from '../../data/index.ts';
import type { Services } from '../services.ts';
import { fileAccess } from '../file-access.ts';

/** Role sets seen are bounded by the config's roles; the cap only guards against a surprise. */
const MAX_CACHED_SCHEMAS = 256;

/** The schema a set of roles sees: what the policy lets it read (fields by role, as Policy computes them). */
export function schemaCache(services: Services): (principal: RolePrincipal) => GraphQLSchema {
  const schemas = new Map<string, GraphQLSchema>();
  const tables = Object.values(services.service.tables).map((t) => t.spec);
  return (principal) => {
    const roles = [...new Set(principal.roles)].sort();
    const key = roles.join('\n');
    let schema = schemas.get(key);
    if (!schema) {
      // A stand-in holding only the roles: the fields a grant lists do not depend on who holds it.
      const holder: RolePrincipal = {
        kind: 'apiKey',
        keyId: `graphql-schema:${key}`,
        environment: '',
        roles,
        context: {},
      };
      const access = services.policy.access(holder);
      const visibility: SchemaVisibility = {
        table: (table) => access.grant(table, 'read') !== null,
        field: (table, field) => {
          const fields = access.grant(table, 'read')?.fields;
          return fields !== undefined && (fields === null || fields.has(field));
        },
      };
      // Writes as the REST pipeline allows them: an action's grant, its fields (compile-write checks them again).
      const writable: WriteVisibility = (table, action) => {
        const grant = access.grant(table, action);
        return grant === null ? undefined : grant.fields;
      };
      try {
        schema = buildGraphQLSchema(tables, visibility, undefined, writable);
      } catch (error) {
        // Names that collide, in a generated/ written before svcgen generate refused them.
        throw new Problem('not-found', `the GraphQL API cannot serve this model: ${(error as Error).message}`);
      }
      if (schemas.size >= MAX_CACHED_SCHEMAS) schemas.clear();
      schemas.set(key, schema);
    }
    return schema;
  };
}

/** What execution reports for the HTTP answer (answer()). */
interface AnswerState {
  /** Set when execution answered no data at all (variables that could not be coerced): a request error. */
  noData?: boolean;
  /** Retry-After of a field's database fault, sent as the answer's header. */
  retryAfter?: string;
  /** The answer's data as JSON text, from the fast path (runtime/graphql/direct.ts). */
  dataText?: DataText;
}

interface RequestContext extends AnswerState {
  readonly tenant: Tenant;
  readonly principal: RolePrincipal;
  readonly req: ApiRequest;
  /** The database of this request: the idempotency transaction's for a keyed mutation. */
  db: Database;
  /** Present for a keyed mutation (GraphQLContext.keyed). */
  keyed?: { failed: boolean };
  /** What the document may take (GraphQLContext.document); its root fields are counted against the rate limit. */
  readonly document: DocumentBudget;
}

interface ManagementRequestContext extends AnswerState {
  readonly tenant: Tenant;
  readonly req: ApiRequest;
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

function introspectionOn(services: Services, environment: string): boolean {
  const setting = services.config.graphql.introspection;
  return Array.isArray(setting) ? setting.includes(environment) : setting;
}

/** The validation rules, one array per introspection setting: the document cache keys validations by the array. */
const RULES = [...specifiedRules, ServedOperationsRule, CostRule];
const RULES_WITHOUT_INTROSPECTION = [...RULES, NoIntrospectionRule];

/** The parts of graphql-http's options both schemas share: parsing and validation (cached), error shapes. */
function commonOptions(services: Services, documents: DocumentCache, logFault: (error: unknown) => void) {
  return {
    parse: documents.parse as never,
    validate: documents.validate as never,
    validationRules: (req: { context: { tenant: Tenant } }) =>
      introspectionOn(services, req.context.tenant.environment) ? RULES : RULES_WITHOUT_INTROSPECTION,
    formatError: (error: Readonly<GraphQLError | Error>) => formatError(error, logFault),
    onOperation: (req: { context: AnswerState }, _args: unknown, result: object) => {
      if (!('data' in result)) req.context.noData = true;
      else if ((result as { data: unknown }).data instanceof DataText)
        req.context.dataText = (result as { data: DataText }).data;
    },
  };
}

/**
 * The management schema's handler (docs/graphql.md "Management"): as REST /_apikeys and
 * /_webhooks, no data rate limit and no Idempotency-Key (those routes ignore it).
 */
function managementHandler(services: Services, documents: DocumentCache, logFault: (error: unknown) => void) {
  const keys = keyOperations(services);
  const webhooks = webhookOperations(services);
  const handle = createHandler<ApiRequest, ManagementRequestContext, ManagementContext>({
    ...commonOptions(services, documents, logFault),
    schema: managementSchema,
    context: (req): ManagementContext => ({
      req: req.raw,
      config: services.config,
      tenant: req.context.tenant,
      keys,
      webhooks,
      log: logFault,
      retryAfter: (seconds) => {
        req.context.retryAfter = seconds;
      },
    }),
  });
  return async (req: ApiRequest, tenant: Tenant): Promise<Reply> => {
    const body = await readBody(req);
    if (body === TOO_DEEP) return tooDeep({});
    const context: ManagementRequestContext = { tenant, req };
    const [text, init] = await handle(graphqlRequest(req, body, context));
    return answer(context, text, init, {});
  };
}

const TOO_DEEP = Symbol('too deep');

/**
 * The POST body (null for GET), read here, not by graphql-http: a body over limits.bodyBytes is a
 * 413 Problem, not "unparsable". As every JSON body of the API, nesting is bounded before anything
 * recursive reads it (variables included).
 */
async function readBody(req: ApiRequest): Promise<string | null | typeof TOO_DEEP> {
  const body = req.method === 'POST' ? ((await req.readBody())?.toString('utf8') ?? '') : null;
  const json = [body, req.query.get('variables'), req.query.get('extensions')];
  return json.some((text) => text !== null && nestsDeeperThan(text, MAX_JSON_DEPTH)) ? TOO_DEEP : body;
}

function graphqlRequest<C>(req: ApiRequest, body: string | null, context: C) {
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

export function graphqlHandler(services: Services): Handler {
  const limits = dataLimits(services);
  const schemaFor = schemaCache(services);
  const documents = documentCache(parseBounded);
  const log = services.logger;
  const logFault = (error: unknown) => log.error({ path: GRAPHQL_PATH, err: error }, 'graphql field failed');
  const manage = managementHandler(services, documents, logFault);
  const introspection = introspectionAnswers();
  const { maxAnswerBytes } = services.config.graphql;
  const { statementTimeoutMs } = services.config.database;
  const handle = createHandler<ApiRequest, RequestContext, GraphQLContext>({
    ...commonOptions(services, documents, logFault),
    schema: (req) => schemaFor(req.context.principal),
    context: (req): GraphQLContext => ({
      data: {
        req: req.raw,
        tenant: req.context.tenant,
        principal: req.context.principal,
        catalog: services.catalog,
        access: services.policy.access(req.context.principal),
        db: req.context.db,
        expensiveReads: services.expensiveReads,
        cursors: services.cursors,
        watchedTables: services.watchedTables,
        basePath: services.basePath,
        files: fileAccess(services.config, req.context.principal),
      },
      document: req.context.document,
      log: logFault,
      retryAfter: (seconds) => {
        req.context.retryAfter = seconds;
      },
      keyed: req.context.keyed,
    }),
    // Variables are checked first, stopping at the first bad one (runtime/graphql/rules.ts); an
    // introspection query is answered from its schema's kept answer; a query of records the
    // database writes as the answer needs them is answered with its text.
    execute: async (args: ExecutionArgs) => {
      const refused = refuseVariables(args);
      if (refused) return refused;
      // What runs counts against the rate limit per root field (docs/graphql.md "Limits").
      const { document } = args.contextValue as GraphQLContext;
      const operation = getOperationAST(args.document, args.operationName);
      if (operation) document.rootFields = countRootFields(operation, (name) => fragmentOf(args, name));
      return (
        introspection.answer(args, document) ??
        (await answerDirectly(args)) ??
        execute({ ...args, fieldResolver: fieldResolver as never })
      );
    },
  });
  return async (req: ApiRequest): Promise<Reply> => {
    if (req.method !== 'GET' && req.method !== 'POST') throw methodNotAllowed(req, GRAPHQL_METHODS);
    const tenant = resolveDataTenant(req, services.config);
    const principal: Principal = await limits.authenticate(req, tenant);
    // A management token reads and writes no data: it gets the management schema instead.
    if (principal.kind === 'management') return manage(req, tenant);
    let headers = rateLimitHeaders(await limits.data(tenant, principal));
    try {
      const body = await readBody(req);
      if (body === TOO_DEEP) return tooDeep(headers);
      const run = async (db: Database, keyed?: { failed: boolean }): Promise<Reply> => {
        const document = new DocumentBudget(maxAnswerBytes, statementTimeoutMs);
        const context: RequestContext = { tenant, principal, req, db, keyed, document };
        const [text, init] = await handle(graphqlRequest(req, body, context));
        headers = (await countMore(limits, tenant, principal, document.rootFields - 1)) ?? headers;
        return answer(context, text, init, headers);
      };
      if (body === null || !isMutation(body, documents)) return await run(services.db);
      // As REST creates: a keyed mutation runs once per key, in the transaction that stores its answer.
      // Its root fields then share that transaction, and an answer with any error is not kept (nor its writes).
      try {
        const reply = await withIdempotency(services.db, req, callerId(principal), tenant, async (db) => {
          const keyed = header(req, 'idempotency-key') !== undefined;
          const reply = await run(db, keyed ? { failed: false } : undefined);
          if (keyed && hasErrors(reply)) throw new NotKept(reply);
          return reply;
        });
        // A replay carries the kept headers only; this request's rate limit is counted all the same.
        return { ...reply, headers: { ...reply.headers, ...headers } };
      } catch (error) {
        if (error instanceof NotKept) return error.reply;
        throw error;
      }
    } catch (error) {
      if (error instanceof Problem) Object.assign(error.headers, headers);
      throw error;
    }
  };
}

/** The methods GraphQL over HTTP answers at /gw/api/graphql (docs/graphql.md "Requests"). */
const GRAPHQL_METHODS = 'GET, POST';

/** 405 with Allow, as a Problem: before the credentials are looked at, nothing counted. */
export function methodNotAllowed(req: ApiRequest, allow: string): Problem {
  return new Problem('method-not-allowed', `${req.path} answers ${allow}, not ${req.method}`, [], { allow });
}

function fragmentOf(args: ExecutionArgs, name: string) {
  return args.document.definitions.find((d) => d.kind === Kind.FRAGMENT_DEFINITION && d.name.value === name) as
    | FragmentDefinitionNode
    | undefined;
}

/**
 * Counts `more` data requests after a document ran, one per root field past the first (the first
 * was counted before it ran; docs/graphql.md "Limits"): its answer stands, and once the caller's
 * share or the project's budget is used up the next request is refused. The headers of the last
 * decision, or undefined when nothing more was counted.
 */
async function countMore(
  limits: DataLimits,
  tenant: Tenant,
  principal: Principal,
  more: number,
): Promise<Record<string, string> | undefined> {
  let last: Record<string, string> | undefined;
  for (let i = 0; i < more; i++) {
    try {
      last = rateLimitHeaders(await limits.data(tenant, principal));
    } catch (error) {
      // Used up: this request is answered; the window stays used up for the next ones.
      if (error instanceof Problem && error.kind === 'rate-limited')
        return Object.fromEntries(Object.entries(error.headers).filter(([name]) => name.startsWith('ratelimit-')));
      throw error;
    }
  }
  return last;
}

/** A keyed mutation's answer with errors: thrown to roll its transaction back, then answered. */
class NotKept extends Error {
  constructor(readonly reply: Reply) {
    super('not kept');
  }
}

function hasErrors(reply: Reply): boolean {
  if (reply.status !== 200 || reply.body === undefined) return true;
  try {
    return (JSON.parse(reply.body) as { errors?: unknown }).errors !== undefined;
  } catch {
    return true;
  }
}

/** Whether a POST body asks for a mutation (anything unreadable is left to graphql-http to refuse). */
function isMutation(body: string, documents: DocumentCache): boolean {
  // A mutation's text holds the word, or (written with JSON escapes) a backslash: a query without
  // either needs no JSON.parse here (graphql-http parses the body itself).
  if (!body.includes('mutation') && !body.includes('\\')) return false;
  try {
    const params = JSON.parse(body) as { query?: unknown; operationName?: unknown };
    if (typeof params.query !== 'string') return false;
    const name = typeof params.operationName === 'string' ? params.operationName : undefined;
    return getOperationAST(documents.parse(params.query), name)?.operation === 'mutation';
  } catch {
    return false;
  }
}

function answer(
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

function tooDeep(headers: Record<string, string>): Reply {
  const message = `the request's JSON (body or variables) nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`;
  return {
    status: 400,
    headers: { 'content-type': 'application/graphql-response+json; charset=utf-8', ...headers },
    body: JSON.stringify({
      errors: [{ message, extensions: { code: 'BAD_REQUEST', type: '/errors/invalid-json', status: 400 } }],
    }),
  };
}

export const graphqlFeature: ServerFeature = {
  name: 'graphql',
  start() {
    return {
      routes(services) {
        const handler = graphqlHandler(services);
        // GET and POST answer; every other method gets a 405 Problem with Allow (graphqlHandler).
        return (['get', 'post', 'all'] as const).map((method) => ({ method, path: GRAPHQL_PATH, handler }));
      },
    };
  },
};
