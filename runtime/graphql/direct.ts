/**
 * The fast path of the GraphQL read API (docs/graphql.md "How queries are answered"): a query whose
 * root fields are all lists or records by key, over fields whose JSON text from PostgreSQL is
 * already what graphql-js would write, is answered by splicing that text into the answer, as REST
 * does, instead of parsing every record and having graphql-js complete and serialize it again.
 * The statements are the normal path's (recordsStatement, same access, cost and budget). Anything
 * else, and any failure, is left to graphql-js (with the outcomes of statements already run, so
 * nothing is read twice), so the answer is byte for byte the normal path's.
 */
import { randomBytes } from 'node:crypto';
import {
  getArgumentValues,
  getOperationAST,
  getVariableValues,
  Kind,
  visit,
  BREAK,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type FragmentDefinitionNode,
} from 'graphql';
import type { ScalarType } from '../model/index.ts';
import type { SelectItem } from '../query/index.ts';
import { recordsStatement, runStatement, type GraphQLContext, type RecordsStatement } from './execute.ts';
import type { RootFieldMeta } from './schema.ts';
import { collectFields } from './translate.ts';

/**
 * Types whose GraphQL serialize gives the JSON the SQL wrote: identity scalars over SQL-made
 * strings (DateTime, BigInt, Bytes), Decimal (its digits kept either way), enums by name, String,
 * Boolean, and Int (int4 text is JSON.stringify's; an oid may pass Int's range). Not Json (spaced
 * jsonb text, numbers as stored), nor list fields (an element may be null). Float is written as
 * JavaScript writes it but for the forms UNLIKE_JAVASCRIPT finds in the text.
 */
const VERBATIM: ReadonlySet<ScalarType> = new Set<ScalarType>([
  'String',
  'Int',
  'Float',
  'Boolean',
  'Enum',
  'DateTime',
  'BigInt',
  'Bytes',
  'Decimal',
]);
const INT_TYPES: ReadonlySet<string | undefined> = new Set([undefined, 'Integer', 'SmallInt']);

/**
 * float8 text JSON.stringify would write otherwise: an exponent (PostgreSQL from 1e15 and below
 * 1e-4, JavaScript from 1e21 and below 1e-6), `-0` (JavaScript: 0), NaN and infinities (strings
 * that GraphQL's Float refuses). A number is a whole token after `:`, `,` or `[` (a uuid's
 * `9e-4` is not); text inside a string that looks like one only sends a request to graphql-js.
 */
const UNLIKE_JAVASCRIPT = /[:,[](?:-?\d+(?:\.\d+)?[eE][-+]?\d+|-0|"(?:-?Infinity|NaN)")[,}\]]/;

// Per process, as exact-numbers.ts's marker: no data text can hold U+0000.
const MARK = `\u0000data:${randomBytes(9).toString('base64url')}`;
const MARKED = JSON.stringify(MARK);

/** An answer's `data`, already JSON text: serialized as a marker that spliceData replaces. */
export class DataText {
  constructor(readonly text: string) {}
  toJSON(): string {
    return MARK;
  }
}

/** The finished body with the marker of `data` (from the fast path) replaced by its text. */
export function spliceData(body: string, data: DataText | undefined): string {
  if (data === undefined) return body;
  const at = body.indexOf(MARKED);
  return at === -1 ? body : body.slice(0, at) + data.text + body.slice(at + MARKED.length);
}

/** For tests: answer every query through graphql-js, to compare both paths' answers. */
let enabled = true;
export function setFastPath(on: boolean): void {
  enabled = on;
}

/** For tests: how many answers the fast path has given. */
let served = 0;
export function fastPathAnswers(): number {
  return served;
}

const introspects = new WeakMap<DocumentNode, boolean>();

/** Whether the document names a meta field (`__typename`, `__schema`, `__type`) anywhere: graphql-js answers those. */
function namesMetaField(document: DocumentNode): boolean {
  let found = introspects.get(document);
  if (found === undefined) {
    found = false;
    visit(document, {
      Field(node) {
        if (node.name.value.startsWith('__')) {
          found = true;
          return BREAK;
        }
        return undefined;
      },
    });
    introspects.set(document, found);
  }
  return found;
}

/**
 * Whether every record of the selection comes out of PostgreSQL as graphql-js would write it:
 * undefined where not, else whether a Float field is selected (its text is checked row by row).
 */
function verbatim(statement: RecordsStatement, table: string, items: readonly SelectItem[]): boolean | undefined {
  const { catalog, access } = statement.ctx;
  const t = catalog.require(table);
  const grant = access.grant(table, 'read');
  if (!grant) return undefined;
  let floats = false;
  for (const item of items) {
    if (item.kind === 'embed') {
      const target = t.relations.get(item.relation)?.target;
      const inner = target === undefined ? undefined : verbatim(statement, target, item.items);
      if (inner === undefined) return undefined;
      floats ||= inner;
      continue;
    }
    const field = t.fields.get(item.field);
    if (
      field === undefined ||
      field.list ||
      !VERBATIM.has(field.type) ||
      (field.type === 'Int' && !INT_TYPES.has(field.nativeType?.[0])) ||
      // A field left out of the record (not readable, or hidden on some rows) is graphql-js's null.
      (grant.fields !== null && !grant.fields.has(item.field)) ||
      grant.fieldRows.has(item.field)
    )
      return undefined;
    floats ||= field.type === 'Float';
  }
  return floats;
}

/**
 * The answer of a query on the fast path, or undefined where graphql-js must answer it (after
 * refuseVariables and validation, as execute would run).
 */
export async function answerDirectly(args: ExecutionArgs): Promise<ExecutionResult | undefined> {
  if (!enabled) return undefined;
  const operation = getOperationAST(args.document, args.operationName);
  const queryType = args.schema.getQueryType();
  if (operation?.operation !== 'query' || !queryType || namesMetaField(args.document)) return undefined;
  const coerced = getVariableValues(
    args.schema,
    operation.variableDefinitions ?? [],
    (args.variableValues ?? {}) as Record<string, unknown>,
  );
  if (coerced.errors) return undefined;
  const fragments: Record<string, FragmentDefinitionNode> = {};
  for (const d of args.document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments[d.name.value] = d;
  const variableValues = coerced.coerced;
  const context = args.contextValue as GraphQLContext;
  const fields: { key: string; single: boolean; floats: boolean; statement: RecordsStatement }[] = [];
  try {
    for (const [key, fieldNodes] of collectFields(
      { fragments, variables: variableValues },
      queryType,
      operation.selectionSet,
    )) {
      const fieldName = fieldNodes[0]!.name.value;
      const def = queryType.getFields()[fieldName];
      const meta = def?.extensions.svcgen as RootFieldMeta | undefined;
      if (!def || (meta?.kind !== 'list' && meta?.kind !== 'byKey')) return undefined;
      const fieldArgs = getArgumentValues(def, fieldNodes[0]!, variableValues);
      const info = { fragments, variableValues, parentType: queryType, fieldName, fieldNodes };
      const statement = recordsStatement(meta as RootFieldMeta & { kind: 'list' | 'byKey' }, fieldArgs, context, info);
      const floats = verbatim(statement, statement.ctx.table.spec.name, statement.select);
      if (statement.jsonb || floats === undefined) return undefined;
      fields.push({ key, single: meta.kind === 'byKey', floats, statement });
    }
  } catch {
    // A translation error: graphql-js reports it on its field, in its place among the others.
    return undefined;
  }
  const settled = await Promise.allSettled(fields.map((f) => runStatement(f.statement)));
  // graphql-js answers from these outcomes (a failed read's error in its place), not reading again.
  const toGraphQL = () => {
    context.ran = new Map(settled.map((outcome, i) => [fields[i]!.key, outcome]));
    return undefined;
  };
  const members: string[] = [];
  for (const [i, outcome] of settled.entries()) {
    if (outcome.status === 'rejected') return toGraphQL();
    const texts = outcome.value.map((r) => r[0] as string);
    if (fields[i]!.floats && texts.some((text) => UNLIKE_JAVASCRIPT.test(text))) return toGraphQL();
    const value = fields[i]!.single ? (texts[0] ?? 'null') : `[${texts.join(',')}]`;
    members.push(`${JSON.stringify(fields[i]!.key)}:${value}`);
  }
  served++;
  return { data: new DataText(`{${members.join(',')}}`) as never };
}
