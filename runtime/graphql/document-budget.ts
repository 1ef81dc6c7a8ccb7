/**
 * What one GraphQL document may take of the process while it runs (docs/graphql.md "Limits"), so
 * that one caller's documents cannot hold the event loop, the expensive-read budget or memory for
 * everyone else:
 *
 * - answer bytes: the JSON text its root fields read (records as PostgreSQL writes them, an
 *   introspection answer) is at most `graphql.maxAnswerBytes`; the read that would pass it is
 *   dropped before graphql-js walks it, and its root field answers ANSWER_TOO_LARGE;
 * - expensive reads (runtime/data/cost.ts) run one at a time: a document holds at most one slot of
 *   the process's expensive-read budget, as one REST request does, however many root fields ask,
 *   and that place counts against its caller's share of the budget as a REST read's does (the
 *   read's `budgeted` takes the caller's key from the document's context: runtime/data/context.ts);
 * - time: a read does not start once the document has run `database.statementTimeoutMs` (the
 *   bound of one statement, and of one REST read): its root field answers STATEMENT_TIMEOUT;
 * - rate limit: the document counts as many data requests as it has root fields (rootFields).
 */
import {
  GraphQLError,
  Kind,
  type GraphQLResolveInfo,
  type OperationDefinitionNode,
  responsePathAsArray,
} from 'graphql';
import { DATABASE_RETRY_AFTER_SECONDS, Problem } from '../http/index.ts';

/** A read that would take the document's answer past graphql.maxAnswerBytes. */
export class AnswerTooLarge extends Error {
  constructor(readonly maxBytes: number) {
    super(
      `the answer would pass ${maxBytes} bytes of JSON (graphql.maxAnswerBytes); this field's records were read and dropped: ask for fewer records (limit, first) or fields, or split the document`,
    );
    this.name = 'AnswerTooLarge';
  }
}

/** AnswerTooLarge as a GraphQL error (at a field when `info` is given, else a request error). */
export function answerTooLargeError(error: AnswerTooLarge, info?: GraphQLResolveInfo): GraphQLError {
  return new GraphQLError(error.message, {
    nodes: info?.fieldNodes,
    path: info ? responsePathAsArray(info.path) : undefined,
    extensions: { code: 'ANSWER_TOO_LARGE', type: '/errors/invalid-parameter', status: 400 },
  });
}

export class DocumentBudget {
  private bytes = 0;
  private readonly started = performance.now();
  /** The document's expensive read running now (or settled): the next one starts after it. */
  private expensive: Promise<unknown> = Promise.resolve();

  /**
   * `timeMs`: database.statementTimeoutMs (0: no bound).
   * `rootFields`: set when the document runs (countRootFields), for the rate limit.
   */
  constructor(
    readonly maxAnswerBytes: number,
    private readonly timeMs: number,
  ) {}

  rootFields = 1;

  /** Counts `bytes` of answer text; throws AnswerTooLarge (counting nothing) past the bound. */
  take(bytes: number): void {
    if (this.bytes + bytes > this.maxAnswerBytes) throw new AnswerTooLarge(this.maxAnswerBytes);
    this.bytes += bytes;
  }

  /** Throws the Problem of a read that would start after the document's time is up. */
  checkTime(): void {
    if (this.timeMs > 0 && performance.now() - this.started > this.timeMs)
      throw new Problem(
        'statement-timeout',
        `this document has run ${this.timeMs} ms (database.statementTimeoutMs, the time of one read), so this field's read was not started; split the document or make its reads cheaper`,
        [],
        { 'retry-after': String(DATABASE_RETRY_AFTER_SECONDS) },
      );
  }

  /**
   * Runs an expensive read once the document's earlier expensive reads have ended. `work` takes its
   * place in the budget itself (budgeted, with the caller's key), so a place is held, and counted
   * against the caller's share, only while the read waits for a slot or runs.
   */
  oneAtATime<T>(work: () => Promise<T>): Promise<T> {
    const run = this.expensive.then(() => {
      this.checkTime();
      return work();
    });
    this.expensive = run.catch(() => undefined);
    return run;
  }
}

/**
 * The root fields of an operation as the rate limit counts them: every field selected at the root
 * (aliases included, fragments expanded where spread), `__typename` left out, at least 1.
 */
export function countRootFields(
  operation: OperationDefinitionNode,
  fragments: (name: string) => { selectionSet: OperationDefinitionNode['selectionSet'] } | undefined,
): number {
  let count = 0;
  const seen = new Set<string>();
  const walk = (set: OperationDefinitionNode['selectionSet']) => {
    for (const s of set.selections) {
      if (s.kind === Kind.FIELD) {
        if (s.name.value !== '__typename') count++;
      } else if (s.kind === Kind.INLINE_FRAGMENT) walk(s.selectionSet);
      else if (!seen.has(s.name.value)) {
        // Spread once: GraphQL merges a fragment spread twice at one level (and validation refuses cycles).
        seen.add(s.name.value);
        const fragment = fragments(s.name.value);
        if (fragment) walk(fragment.selectionSet);
      }
    }
  };
  walk(operation.selectionSet);
  return Math.max(1, count);
}
