/**
 * Bounds on a GraphQL document, checked before anything runs (docs/graphql.md "Limits"): a small
 * document cannot ask for a huge answer. Each root field is one SQL statement, so root fields are
 * counted like requests; every selection visited (fields, fragment spreads, inline fragments) is
 * counted with fragments expanded where they are spread, introspection's included, so a fragment
 * spread many times counts many times and the walk stops as soon as the bound is passed.
 * Introspection asks for one copy of the schema at most (see introspectionTwice).
 */
import {
  GraphQLError,
  getOperationAST,
  isInputObjectType,
  isInputType,
  isListType,
  isNonNullType,
  Kind,
  parse,
  typeFromAST,
  type ASTNode,
  type ExecutionArgs,
  type ExecutionResult,
  type ASTVisitor,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLInputType,
  type OperationDefinitionNode,
  type SelectionSetNode,
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
  /**
   * Nesting of selection sets under `__schema` / `__type`: the standard introspection query
   * (graphql-js getIntrospectionQuery, used by GraphiQL and code generators) nests 15 with its
   * 9 levels of `ofType`, and counts 230 to 240 selections of maxSelections.
   */
  maxIntrospectionDepth: 20,
  /** Nesting of braces, brackets and parentheses in the document text (selections, arguments, lists), checked before parsing. */
  maxNesting: 64,
} as const;

/**
 * The deepest nesting of `{`, `[` and `(` outside strings and comments, in one linear pass: the
 * parser is recursive, and a few thousand levels (well inside the token bound) exhaust its stack.
 * With `stopAbove`, the scan ends as soon as the nesting passes it.
 */
export function documentNesting(text: string, stopAbove = Number.POSITIVE_INFINITY): number {
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
      // Past the bound the rest of the text changes nothing: a megabyte of `{` stops at the first 65.
      if (deepest > stopAbove) return deepest;
    } else if (c === 0x7d || c === 0x5d || c === 0x29) depth--;
  }
  return deepest;
}

/**
 * The document, refused past maxNesting or maxTokens, or when an operation costs more than the
 * bounds of CostRule: checked here, before validation, because graphql-js's own rules are not all
 * linear (OverlappingFieldsCanBeMergedRule compares same-named fields pairwise: a document of a
 * thousand `cityList { id }` took 100 ms of validation), and a document past the bounds is refused
 * whatever else is wrong with it.
 */
export function parseBounded(source: string | { body: string }) {
  const text = typeof source === 'string' ? source : source.body;
  if (documentNesting(text, GRAPHQL_LIMITS.maxNesting) > GRAPHQL_LIMITS.maxNesting) {
    throw new GraphQLError(
      `the document nests braces, brackets and parentheses more than ${GRAPHQL_LIMITS.maxNesting} levels deep`,
      {
        extensions: { code: 'QUERY_TOO_COMPLEX', type: '/errors/invalid-parameter', status: 400 },
      },
    );
  }
  const document = parse(text, { maxTokens: GRAPHQL_LIMITS.maxTokens });
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  for (const d of document.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue;
    const problem = operationCost(d, (name) => fragments.get(name));
    if (problem) throw tooComplexError(problem.message, problem.node);
  }
  return document;
}

/**
 * Subscriptions are not served, and a caller whose roles may write nothing has no Mutation type
 * (docs/graphql.md); graphql-js 16 would only refuse either while executing.
 */
export const ServedOperationsRule: ValidationRule = (context) => ({
  OperationDefinition(operation) {
    const refusal =
      operation.operation === 'subscription'
        ? 'over HTTP this API answers queries and mutations; subscribe over WebSocket at the same path (graphql-transport-ws)'
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

function tooComplexError(message: string, node: ASTNode): GraphQLError {
  return new GraphQLError(message, {
    nodes: node,
    extensions: { code: 'QUERY_TOO_COMPLEX', type: '/errors/invalid-parameter', status: 400 },
  });
}

type CostProblem = { message: string; node: ASTNode };

/**
 * The response keys of the introspection fields of one selection set, by field name, each with
 * those of its own selection set: fields of one response key are merged by GraphQL (fragments
 * included), so this is one node of the answer's shape.
 */
type IntrospectionKeys = Map<string, { key: string; inner: IntrospectionKeys }>;

const INTROSPECTION_ROOTS = new Set(['__schema', '__type']);

/**
 * A field of introspection selected under a second response key in the same selection set
 * (docs/graphql.md "Limits"): `{ __schema { a: types {…} b: types {…} } }` asks for the schema
 * twice, and 700 aliases of `types` made a 12 kB document answer 51 MB. At the root only
 * `__schema` is held to one key (`__type` takes a name: several aliases ask for several types).
 * Returns the inner keys of the field otherwise, merged with those of the same key met before.
 */
function introspectionTwice(
  keys: IntrospectionKeys,
  field: FieldNode,
  root: boolean,
): { problem: CostProblem } | { inner: IntrospectionKeys } {
  const name = field.name.value;
  const key = field.alias?.value ?? name;
  const seen = keys.get(name);
  if (seen === undefined || (root && name === '__type')) {
    const inner: IntrospectionKeys = new Map();
    if (!(root && name === '__type')) keys.set(name, { key, inner });
    return { inner };
  }
  if (seen.key === key) return { inner: seen.inner };
  return {
    problem: {
      message: `introspection answers one copy of the schema: ${name} is selected as both "${seen.key}" and "${key}" in one selection set; select it once`,
      node: field,
    },
  };
}

/**
 * The first bound an operation passes (root fields, selections with fragments expanded, depth,
 * a second copy of introspection), or undefined. The walk stops at the first one, so it visits at
 * most maxSelections selections.
 */
function operationCost(
  operation: OperationDefinitionNode,
  fragment: (name: string) => FragmentDefinitionNode | undefined,
): CostProblem | undefined {
  let selections = 0;
  let roots = 0;
  const rootKeys: IntrospectionKeys = new Map();
  /** `keys`: the introspection keys of this selection set, undefined outside introspection (and at the root). */
  const walk = (
    set: SelectionSetNode,
    depth: number,
    spreading: Set<string>,
    keys: IntrospectionKeys | undefined,
  ): CostProblem | undefined => {
    for (const s of set.selections) {
      if (++selections > GRAPHQL_LIMITS.maxSelections)
        return {
          message: `the operation selects more than ${GRAPHQL_LIMITS.maxSelections} fields (fragments counted where they are spread, introspection included); split it`,
          node: operation,
        };
      let problem: CostProblem | undefined;
      if (s.kind === Kind.FIELD) {
        if (depth === 0 && ++roots > GRAPHQL_LIMITS.maxRootFields)
          return {
            message: `at most ${GRAPHQL_LIMITS.maxRootFields} root fields (aliases included) per operation; each is one database statement`,
            node: s,
          };
        let inner: IntrospectionKeys | undefined;
        const introspecting = keys !== undefined || (depth === 0 && INTROSPECTION_ROOTS.has(s.name.value));
        if (introspecting) {
          const once = introspectionTwice(keys ?? rootKeys, s, keys === undefined);
          if ('problem' in once) return once.problem;
          inner = once.inner;
        }
        if (s.selectionSet) {
          // The standard introspection query nests deeper than any data query needs.
          const bound = introspecting ? GRAPHQL_LIMITS.maxIntrospectionDepth : GRAPHQL_LIMITS.maxDepth;
          if (depth + 1 >= bound)
            return {
              message: introspecting
                ? `introspection selections nest at most ${bound} levels`
                : `selections nest at most ${bound} levels`,
              node: s,
            };
          problem = walk(s.selectionSet, depth + 1, spreading, inner);
        }
      } else if (s.kind === Kind.INLINE_FRAGMENT) {
        problem = walk(s.selectionSet, depth, spreading, keys);
      } else {
        const name = s.name.value;
        const definition = fragment(name);
        // A cycle is NoFragmentCyclesRule's to report; here it only must not loop.
        if (!definition || spreading.has(name)) continue;
        spreading.add(name);
        problem = walk(definition.selectionSet, depth, spreading, keys);
        spreading.delete(name);
      }
      if (problem) return problem;
    }
    return undefined;
  };
  return walk(operation.selectionSet, 0, new Set(), undefined);
}

/** The bounds of parseBounded as a validation rule, for a document that was parsed some other way. */
export const CostRule: ValidationRule = (context) => ({
  OperationDefinition(operation) {
    const problem = operationCost(operation, (name) => context.getFragment(name) ?? undefined);
    if (problem) context.reportError(tooComplexError(problem.message, problem.node));
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

/** The longest list a variable may hold: the most values any argument takes (`in`: MAX_IN_LIST). */
export const MAX_VARIABLE_LIST = 1000;

type Path = readonly (string | number)[];

/**
 * The first place where `value` cannot be of `type` for a reason whose graphql-js message would be
 * large or slow to build: a list longer than MAX_VARIABLE_LIST, or an input object member the type
 * does not have. Stops there; scalars, enums and missing members are left to graphql-js, whose
 * messages for them stay small. Json values are scalars: not walked.
 */
function shapeProblem(value: unknown, type: GraphQLInputType, path: Path): { message: string; path: Path } | undefined {
  if (value === null || value === undefined) return undefined;
  const inner = isNonNullType(type) ? type.ofType : type;
  if (isListType(inner)) {
    // graphql-js takes a single value where a list is expected.
    if (!Array.isArray(value)) return shapeProblem(value, inner.ofType, path);
    if (value.length > MAX_VARIABLE_LIST)
      return { message: `a list takes at most ${MAX_VARIABLE_LIST} values, this one has ${value.length}`, path };
    for (let i = 0; i < value.length; i++) {
      const problem = shapeProblem(value[i], inner.ofType, [...path, i]);
      if (problem) return problem;
    }
  } else if (isInputObjectType(inner) && typeof value === 'object' && !Array.isArray(value)) {
    const fields = inner.getFields();
    // for...in, not Object.entries: it stops at the first unknown member without listing them all.
    for (const key in value) {
      const field = Object.hasOwn(fields, key) ? fields[key] : undefined;
      if (!field) return { message: `Field "${key}" is not defined by type "${inner.name}".`, path: [...path, key] };
      const problem = shapeProblem((value as Record<string, unknown>)[key], field.type, [...path, key]);
      if (problem) return problem;
    }
  }
  return undefined;
}

/**
 * A request error for the first variable value that graphql-js would answer slowly, or undefined
 * (then graphql-js coerces the variables as usual). graphql-js reports up to 50 bad values, each
 * message printing the whole value it belongs to: an object with 60,000 unknown members (a 1 MB
 * body) made 50 messages of a megabyte each, seconds of work and a 50 MB answer; and it walks a list
 * of 100,000 values before the filter refuses more than 1000. Here the check stops at the first
 * problem, and the message names its place, not the value.
 */
export function refuseVariables(args: ExecutionArgs): ExecutionResult | undefined {
  const operation = getOperationAST(args.document, args.operationName);
  const values = args.variableValues;
  if (!operation || !values) return undefined;
  for (const definition of operation.variableDefinitions ?? []) {
    const name = definition.variable.name.value;
    if (!Object.hasOwn(values, name)) continue;
    const type = typeFromAST(args.schema, definition.type);
    // An unknown or output type is a validation error, reported before this runs.
    if (!type || !isInputType(type)) continue;
    const problem = shapeProblem(values[name], type, []);
    if (problem) {
      const at = problem.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('');
      const error = new GraphQLError(`Variable "$${name}" got invalid value at "${name}${at}"; ${problem.message}`, {
        nodes: definition,
        extensions: { code: 'BAD_USER_INPUT', type: '/errors/invalid-parameter', status: 400 },
      });
      return { errors: [error] };
    }
  }
  return undefined;
}
