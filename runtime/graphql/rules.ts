/**
 * Bounds on a GraphQL document, checked before anything runs (docs/graphql.md "Limits"): a small
 * document cannot ask for a huge answer. Each root field is one SQL statement, so root fields are
 * counted like requests; every selection visited (fields, fragment spreads, inline fragments) is
 * counted with fragments expanded where they are spread, so a fragment spread many times counts
 * many times and the walk stops as soon as the bound is passed.
 */
import {
  GraphQLError,
  Kind,
  parse,
  type ASTVisitor,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';

export const GRAPHQL_LIMITS = {
  /** Tokens of a document: bounds the parser's work and nesting before any rule runs. */
  maxTokens: 5000,
  /** Root fields of one operation, aliases included: each is one SQL statement. */
  maxRootFields: 10,
  /** Selections of one operation, fragments expanded. */
  maxSelections: 500,
  /** Nesting of selection sets (a page's nodes with 3 embeds is 5). */
  maxDepth: 8,
  /** Nesting of braces, brackets and parentheses in the document text (selections, arguments, lists), checked before parsing. */
  maxNesting: 64,
} as const;

/**
 * The deepest nesting of `{`, `[` and `(` outside strings and comments, in one linear pass: the
 * parser is recursive, and a few thousand levels (well inside the token bound) exhaust its stack.
 */
export function documentNesting(text: string): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x23) {
      while (i < text.length && text.charCodeAt(i) !== 0x0a && text.charCodeAt(i) !== 0x0d) i++;
    } else if (c === 0x22) {
      if (text.startsWith('"""', i)) {
        i += 3;
        while (i < text.length && !text.startsWith('"""', i)) i += text.startsWith('\\"""', i) ? 4 : 1;
        i += 2;
      } else {
        for (i++; i < text.length && text.charCodeAt(i) !== 0x22 && text.charCodeAt(i) !== 0x0a; i++)
          if (text.charCodeAt(i) === 0x5c) i++;
      }
    } else if (c === 0x7b || c === 0x5b || c === 0x28) {
      if (++depth > deepest) deepest = depth;
    } else if (c === 0x7d || c === 0x5d || c === 0x29) depth--;
  }
  return deepest;
}

/** The document, refused past maxNesting or maxTokens (a GraphQL error before any rule runs). */
export function parseBounded(source: string | { body: string }) {
  const text = typeof source === 'string' ? source : source.body;
  if (documentNesting(text) > GRAPHQL_LIMITS.maxNesting) {
    throw new GraphQLError(
      `the document nests braces, brackets and parentheses more than ${GRAPHQL_LIMITS.maxNesting} levels deep`,
      {
        extensions: { code: 'QUERY_TOO_COMPLEX', type: '/errors/invalid-parameter', status: 400 },
      },
    );
  }
  return parse(text, { maxTokens: GRAPHQL_LIMITS.maxTokens });
}

/**
 * Subscriptions are not served, and a caller whose roles may write nothing has no Mutation type
 * (docs/graphql.md); graphql-js 16 would only refuse either while executing.
 */
export const ServedOperationsRule: ValidationRule = (context) => ({
  OperationDefinition(operation) {
    const refusal =
      operation.operation === 'subscription'
        ? 'this API answers queries and mutations; subscriptions are not served (webhooks deliver changes)'
        : operation.operation === 'mutation' && !context.getSchema().getMutationType()
          ? 'your roles may write no table, so this API has no mutations for you'
          : undefined;
    if (refusal)
      context.reportError(
        new GraphQLError(refusal, {
          nodes: operation,
          extensions: { code: 'GRAPHQL_VALIDATION_FAILED', type: '/errors/invalid-parameter', status: 400 },
        }),
      );
  },
});

function tooComplex(message: string, context: ValidationContext, node: { loc?: unknown } & object): void {
  context.reportError(
    new GraphQLError(message, {
      nodes: node as never,
      extensions: { code: 'QUERY_TOO_COMPLEX', type: '/errors/invalid-parameter', status: 400 },
    }),
  );
}

export const CostRule: ValidationRule = (context) => ({
  OperationDefinition(operation) {
    let selections = 0;
    let roots = 0;
    let stop = false;
    const walk = (set: SelectionSetNode, depth: number, spreading: Set<string>) => {
      for (const s of set.selections) {
        if (stop) return;
        if (++selections > GRAPHQL_LIMITS.maxSelections) {
          tooComplex(
            `the operation selects more than ${GRAPHQL_LIMITS.maxSelections} fields (fragments counted where they are spread); split it`,
            context,
            operation,
          );
          stop = true;
          return;
        }
        if (s.kind === Kind.FIELD) {
          if (depth === 0 && ++roots > GRAPHQL_LIMITS.maxRootFields) {
            tooComplex(
              `at most ${GRAPHQL_LIMITS.maxRootFields} root fields (aliases included) per operation; each is one database statement`,
              context,
              s,
            );
            stop = true;
            return;
          }
          // Introspection is bounded by the schema's own size and graphql-js's MaxIntrospectionDepthRule;
          // tools' standard introspection query nests deeper than any data query needs.
          if (depth === 0 && (s.name.value === '__schema' || s.name.value === '__type')) continue;
          if (s.selectionSet) {
            if (depth + 1 >= GRAPHQL_LIMITS.maxDepth) {
              tooComplex(`selections nest at most ${GRAPHQL_LIMITS.maxDepth} levels`, context, s);
              stop = true;
              return;
            }
            walk(s.selectionSet, depth + 1, spreading);
          }
        } else if (s.kind === Kind.INLINE_FRAGMENT) {
          walk(s.selectionSet, depth, spreading);
        } else {
          const name = s.name.value;
          const fragment = context.getFragment(name);
          // A cycle is NoFragmentCyclesRule's to report; here it only must not loop.
          if (!fragment || spreading.has(name)) continue;
          spreading.add(name);
          walk(fragment.selectionSet, depth, spreading);
          spreading.delete(name);
        }
      }
    };
    walk(operation.selectionSet, 0, new Set());
  },
});

/** Refuses __schema and __type where introspection is off (graphql.introspection); __typename stays. */
export const NoIntrospectionRule: ValidationRule = (context): ASTVisitor => ({
  Field(node) {
    if (node.name.value === '__schema' || node.name.value === '__type') {
      context.reportError(
        new GraphQLError(
          `introspection is turned off in this environment (graphql.introspection); ${node.name.value} is not answered`,
          {
            nodes: node,
            extensions: { code: 'INTROSPECTION_DISABLED', type: '/errors/forbidden', status: 403 },
          },
        ),
      );
    }
  },
});
