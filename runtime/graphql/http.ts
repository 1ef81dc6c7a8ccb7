/**
 * The GraphQL read API over HTTP at /gw/api/graphql (docs/graphql.md "Requests"): a second front
 * end on the query layer with no policy of its own. Requests pass the data routes' stages (tenancy,
 * authentication, the caller's and project's rate limits); graphql-http speaks GraphQL over HTTP;
 * every root field compiles through runtime/query under the caller's access. A management token
 * gets the management schema instead (API keys and webhooks, no data; ./management.ts). Each
 * document runs within a budget of its own (./document-budget.ts), and introspection answers are
 * kept per schema (./introspection.ts). runtime/server/features/graphql.ts wires it.
 */
import {
  execute,
  getOperationAST,
  Kind,
  type ExecutionArgs,
  type FragmentDefinitionNode,
  type GraphQLSchema,
} from 'graphql';
import { createHandler } from 'graphql-http';
import type { Config } from '../config/index.ts';
import type { Admission, Database } from '../db/index.ts';
import { header, methodNotAllowed, Problem, type ApiRequest, type Handler, type Reply } from '../http/index.ts';
import { withIdempotency } from '../idempotency/index.ts';
import type { keyOperations } from '../keys/index.ts';
import { callerId, type Principal, type RolePrincipal } from '../principal/index.ts';
import type { Catalog, CursorCodec, FileAccess, Policy } from '../query/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import { callerContext, countRequest, identify, type DataLimits, type WriteHooks } from '../data/index.ts';
import type { WatchedTables } from '../events/index.ts';
import type { webhookOperations } from '../webhooks/index.ts';
import { answerDirectly } from './direct.ts';
import { countRootFields, DocumentBudget } from './document-budget.ts';
import { documentCache, type DocumentCache } from './document-cache.ts';
import { fieldResolver, type GraphQLContext } from './execute.ts';
import { answer, commonOptions, graphqlRequest, readBody, TOO_DEEP, tooDeep, type AnswerState } from './http-answer.ts';
import { introspectionAnswers } from './introspection.ts';
import { managementSchema, type ManagementContext } from './management.ts';
import { parseBounded, refuseVariables } from './rules.ts';
import type { CodeFieldMeta } from './schema.ts';

/** What the GraphQL endpoint needs from the running server (runtime/server/features/graphql.ts builds it). */
export interface GraphQLHttpDeps {
  readonly config: Config;
  readonly db: Database;
  readonly catalog: Catalog;
  readonly policy: Pick<Policy, 'access'>;
  readonly expensiveReads: Admission;
  readonly cursors: CursorCodec;
  readonly watchedTables: WatchedTables;
  readonly basePath: string;
  /** The project's table hooks (runtime/data/hooks.ts). */
  readonly writeHooks?: WriteHooks;
  /** The caller's access to files, for fields that reference them (runtime/server/file-access.ts). */
  readonly files: (principal: Principal) => FileAccess | undefined;
  /** The schema of what a set of roles may read (./schema-cache.ts). */
  readonly schemaFor: (principal: RolePrincipal) => GraphQLSchema;
  /** The data API's credential check and rate limits (runtime/data dataLimits), shared with it. */
  readonly limits: DataLimits;
  readonly keys: ReturnType<typeof keyOperations>;
  readonly webhooks: ReturnType<typeof webhookOperations>;
  /** Logs a fault that is answered as an internal error. */
  readonly logFault: (error: unknown) => void;
  /**
   * Runs the project's endpoints and database functions for an admitted caller, as their REST
   * routes do after admission (runtime/server/features/graphql.ts); none: the server has no code.
   */
  readonly code?: CodeRunner;
}

/** What runs a code field (docs/graphql.md "Your own code"): its access rule, input, call and answer. */
export type CodeRunner = (
  meta: CodeFieldMeta,
  args: Record<string, unknown>,
  caller: { readonly tenant: Tenant; readonly principal: RolePrincipal; readonly req: ApiRequest },
) => Promise<unknown>;

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

/**
 * The management schema's handler (docs/graphql.md "Management"): as REST /_apikeys and
 * /_webhooks, no data rate limit and no Idempotency-Key (those routes ignore it).
 */
function managementHandler(deps: GraphQLHttpDeps, documents: DocumentCache) {
  const { config, keys, webhooks, logFault } = deps;
  const handle = createHandler<ApiRequest, ManagementRequestContext, ManagementContext>({
    ...commonOptions(config, documents, logFault),
    schema: managementSchema,
    context: (req): ManagementContext => ({
      req: req.raw,
      config,
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

/** The methods GraphQL over HTTP answers at /gw/api/graphql (docs/graphql.md "Requests"). */
const GRAPHQL_METHODS = 'GET, POST';

export function graphqlHandler(deps: GraphQLHttpDeps): Handler {
  const { config, limits, schemaFor, logFault } = deps;
  const documents = documentCache(parseBounded);
  const manage = managementHandler(deps, documents);
  const introspection = introspectionAnswers();
  const { maxAnswerBytes } = config.graphql;
  const { statementTimeoutMs } = config.database;
  const handle = createHandler<ApiRequest, RequestContext, GraphQLContext>({
    ...commonOptions(config, documents, logFault),
    schema: (req) => schemaFor(req.context.principal),
    context: (req): GraphQLContext => ({
      data: {
        ...callerContext(
          deps,
          req.raw,
          req.context.tenant,
          req.context.principal,
          deps.policy.access(req.context.principal),
          deps.files(req.context.principal),
        ),
        // The idempotency transaction's for a keyed mutation.
        db: req.context.db,
      },
      document: req.context.document,
      log: logFault,
      retryAfter: (seconds) => {
        req.context.retryAfter = seconds;
      },
      keyed: req.context.keyed,
      ...(deps.code
        ? {
            code: (meta: CodeFieldMeta, args: Record<string, unknown>) =>
              deps.code!(meta, args, {
                tenant: req.context.tenant,
                principal: req.context.principal,
                req: req.context.req,
              }),
          }
        : {}),
    }),
    // Variables are checked first, stopping at the first bad one (./rules.ts); an introspection
    // query is answered from its schema's kept answer; a query of records the database writes as
    // the answer needs them is answered with its text.
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
    // runtime/data's admission, with the management schema for a management token before any rate limit.
    const identified = await identify(limits, config, req);
    const { tenant, principal } = identified;
    // A management token reads and writes no data: it gets the management schema instead.
    if (principal.kind === 'management') return manage(req, tenant);
    let headers = await countRequest(limits, identified);
    try {
      const body = await readBody(req);
      if (body === TOO_DEEP) return tooDeep(headers);
      const run = async (db: Database, keyed?: { failed: boolean }): Promise<Reply> => {
        const document = new DocumentBudget(maxAnswerBytes, statementTimeoutMs);
        const context: RequestContext = { tenant, principal, req, db, keyed, document };
        const [text, init] = await handle(graphqlRequest(req, body, context));
        headers = (await countMore(deps, tenant, principal, document.rootFields - 1)) ?? headers;
        return answer(context, text, init, headers);
      };
      if (body === null || !isMutation(body, documents)) return await run(deps.db);
      // As REST creates: a keyed mutation runs once per key, in the transaction that stores its answer.
      // Its root fields then share that transaction, and an answer with any error is not kept (nor its writes).
      try {
        const reply = await withIdempotency(deps.db, req, callerId(principal), tenant, async (db) => {
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
  { limits }: Pick<GraphQLHttpDeps, 'limits'>,
  tenant: Tenant,
  principal: Principal,
  more: number,
): Promise<Record<string, string> | undefined> {
  let last: Record<string, string> | undefined;
  for (let i = 0; i < more; i++) {
    try {
      last = await countRequest(limits, { tenant, principal });
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
