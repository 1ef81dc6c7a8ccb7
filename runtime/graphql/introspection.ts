/**
 * Answers of introspection documents, kept per schema (docs/graphql.md "Limits"): GraphiQL and
 * code generators send the same standard introspection query again and again, and its answer only
 * changes with the schema, which is built once per set of roles (schemaCache). So an operation
 * whose root fields are all introspection (`__schema`, `__type`, `__typename`, no variables) is
 * executed once per schema and document text, and its JSON text is served from then on.
 *
 * The cache is small and bounded (MAX_ENTRIES answers, MAX_TOTAL_BYTES of text, least recently
 * used dropped first): a caller sending ever new introspection documents gets each executed once
 * (rules.ts holds each to one copy of the schema), counted as BUILT_ANSWER_COST requests; the
 * answer counts against graphql.maxAnswerBytes either way.
 */
import {
  execute,
  getOperationAST,
  Kind,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type FragmentDefinitionNode,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';
import { DataText } from './direct.ts';
import { AnswerTooLarge, answerTooLargeError, type DocumentBudget } from './document-budget.ts';
import { GRAPHQL_LIMITS } from './rules.ts';

const MAX_ENTRIES = 64;
const MAX_TOTAL_BYTES = 32 * 1024 * 1024;
/** Documents longer than this are executed each time (the document cache does not keep them either). */
const MAX_CACHED_TEXT = 10_000;

const META_FIELDS = new Set(['__schema', '__type', '__typename']);

/** Whether every root selection is a meta field (fragments at the root are left to graphql-js). */
function onlyIntrospection(operation: OperationDefinitionNode): boolean {
  return (
    operation.operation === 'query' &&
    (operation.variableDefinitions?.length ?? 0) === 0 &&
    operation.selectionSet.selections.every((s) => s.kind === Kind.FIELD && META_FIELDS.has(s.name.value))
  );
}

/** Whether the operation asks for `__schema` or `__type` at its root, fragments spread there included. */
function introspects(operation: OperationDefinitionNode, document: DocumentNode): boolean {
  const seen = new Set<string>();
  const inSet = (set: SelectionSetNode): boolean =>
    set.selections.some((s) => {
      if (s.kind === Kind.FIELD) return s.name.value === '__schema' || s.name.value === '__type';
      if (s.kind === Kind.INLINE_FRAGMENT) return inSet(s.selectionSet);
      if (seen.has(s.name.value)) return false;
      seen.add(s.name.value);
      const fragment = document.definitions.find(
        (d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION && d.name.value === s.name.value,
      );
      return fragment !== undefined && inSet(fragment.selectionSet);
    });
  return inSet(operation.selectionSet);
}

/**
 * What an introspection answer built for this document counts against the rate limit: as many
 * requests as a document may have root fields (it walks the whole schema, a kept answer is one read).
 */
const BUILT_ANSWER_COST = GRAPHQL_LIMITS.maxRootFields;

export interface IntrospectionAnswers {
  /**
   * The answer of an introspection-only operation (from the cache, or executed now and kept), or
   * undefined for any other operation. `document` is the request's budget: its answer bound, and
   * its rate-limit count, raised to BUILT_ANSWER_COST when introspection is executed for it (here,
   * or by graphql-js for an operation mixing introspection with data).
   */
  answer(args: ExecutionArgs, document: DocumentBudget): ExecutionResult | undefined;
}

/** For tests: how many introspection answers were executed (not served from a kept one), in this process. */
let executed = 0;
export function introspectionExecutions(): number {
  return executed;
}

export function introspectionAnswers(): IntrospectionAnswers {
  const schemaIds = new WeakMap<GraphQLSchema, number>();
  let nextSchemaId = 0;
  /** By schema id, operation name and document text; Map order is the least recently used first. */
  const answers = new Map<string, DataText>();
  let totalBytes = 0;
  const keep = (key: string, answer: DataText) => {
    if (answer.text.length > MAX_TOTAL_BYTES / 4) return;
    answers.set(key, answer);
    totalBytes += answer.text.length;
    while (answers.size > MAX_ENTRIES || totalBytes > MAX_TOTAL_BYTES) {
      const [oldest, dropped] = answers.entries().next().value!;
      answers.delete(oldest);
      totalBytes -= dropped.text.length;
    }
  };
  return {
    answer(args, document) {
      const operation = getOperationAST(args.document, args.operationName);
      if (!operation) return undefined;
      if (!onlyIntrospection(operation)) {
        if (introspects(operation, args.document))
          document.rootFields = Math.max(document.rootFields, BUILT_ANSWER_COST);
        return undefined;
      }
      const text = args.document.loc?.source.body;
      let key: string | undefined;
      if (text !== undefined && text.length <= MAX_CACHED_TEXT) {
        let id = schemaIds.get(args.schema);
        if (id === undefined) schemaIds.set(args.schema, (id = nextSchemaId++));
        key = `${id}\n${args.operationName ?? ''}\n${text}`;
      }
      let answer = key === undefined ? undefined : answers.get(key);
      if (answer !== undefined) {
        // Re-inserted: now the most recently used.
        answers.delete(key!);
        answers.set(key!, answer);
      } else {
        executed++;
        if (introspects(operation, args.document))
          document.rootFields = Math.max(document.rootFields, BUILT_ANSWER_COST);
        // Introspection's resolvers are graphql-js's own and synchronous: the result is not a promise.
        const result = execute(args) as ExecutionResult;
        if (result.errors?.length || !result.data) return result;
        answer = new DataText(JSON.stringify(result.data));
        if (key !== undefined) keep(key, answer);
      }
      try {
        document.take(answer.text.length);
      } catch (error) {
        if (error instanceof AnswerTooLarge) return { errors: [answerTooLargeError(error)] };
        throw error;
      }
      return { data: answer as never };
    },
  };
}
