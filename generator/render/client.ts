/**
 * `generated/client.ts`: the tables' side of the typed client (per-table types and one small
 * schema object). The fixed part (generic types, requests, filter encoding, errors) is
 * templates/client-runtime.ts, a TypeScript file of this repository copied verbatim into
 * `generated/client-runtime.ts`; client.ts imports it and nothing else, so an app can copy the two
 * files or import them from the project. Members follow the model's order, like types.ts.
 */
import type Handlebars from 'handlebars';
import {
  aggregateMismatch,
  DATA_BASE_PATH,
  FILTER_GROUPS,
  fieldOperators,
  OPERATOR_DEFINITIONS,
  OPERATORS,
  RESERVED_PARAMETERS,
  TABLE_SUB_PATHS,
  type FieldSpec,
  type OperandShape,
  type Operator,
  type TableSpec,
} from '../../runtime/model/index.ts';
import { typeOf } from './json-schema-types.ts';
import { literal } from './literal.ts';
import type { EndpointSchemas } from './openapi-endpoints.ts';
import { recordScalar, renderRecordTypes } from './record-types.ts';
import { writableFields, zodExpression } from './zod-expressions.ts';

/**
 * Names that a top-level filter must write as `col.<name>` (docs/api.md §5.5 "Reserved names"):
 * the list's and the aggregate's reserved parameters and the groups.
 */
const RESERVED_NAMES = [
  ...new Set([...RESERVED_PARAMETERS.list, ...RESERVED_PARAMETERS.aggregate, ...FILTER_GROUPS]),
].sort();

const union = (names: readonly string[]) => (names.length ? names.map((n) => `'${n}'`).join(' | ') : 'never');

/** What a request body may carry for the field (the zod validators of generated/tables accept these). */
function inputScalar(field: FieldSpec): string {
  switch (field.type) {
    case 'BigInt':
    case 'Decimal':
      return 'number | string';
    case 'DateTime':
      return 'string | Date';
    default:
      return recordScalar(field);
  }
}

/** What a filter operand may be; the client writes it as text (Dates as ISO 8601). */
function filterScalar(field: FieldSpec): string {
  switch (field.type) {
    case 'BigInt':
      return 'number | string | bigint';
    case 'Json':
    case 'Bytes':
      return 'never';
    default:
      return inputScalar(field);
  }
}

function inputType(field: FieldSpec): string {
  const scalar = inputScalar(field);
  const t = !field.list ? scalar : scalar.includes('|') ? `readonly (${scalar})[]` : `readonly ${scalar}[]`;
  return field.nullable ? `${t} | null` : t;
}

/**
 * The operators the runtime accepts on the field (runtime/model/operators.ts is the source of
 * truth), grouped into named sets so that hovers read `TextOperator`, not a 14-member union.
 */
function operatorSet(field: FieldSpec): { name: string; operators: Operator[] } {
  const operators = fieldOperators(field);
  const has = (op: Operator) => operators.includes(op);
  const name = has('today')
    ? 'DateOperator'
    : has('starts_with')
      ? 'TextOperator'
      : has('gt')
        ? 'OrderedOperator'
        : has('contains')
          ? 'ListOperator'
          : has('equals')
            ? 'EqualityOperator'
            : 'PresenceOperator';
  return { name, operators };
}

/** The client's type of each operand shape (runtime/model/operators.ts), for field values `T`. */
const OPERAND_TYPES: Record<OperandShape['kind'], { type: string; doc?: string }> = {
  value: { type: 'T' },
  nullable: { type: 'T | Null' },
  list: { type: 'readonly T[]' },
  pair: { type: 'readonly [T, T]', doc: 'Both bounds included.' },
  flag: { type: 'boolean' },
  true: { type: 'true' },
  count: { type: 'number' },
};

// Which fields the aggregate functions take.
const groupable = (f: FieldSpec) => aggregateMismatch(f, 'count_distinct') === undefined;
const numeric = (f: FieldSpec) => aggregateMismatch(f, 'sum') === undefined;
const ordered = (f: FieldSpec) => aggregateMismatch(f, 'min') === undefined;

function article(name: string): string {
  return /^[AEIOU]/.test(name) ? 'An' : 'A';
}

function tableSection(table: TableSpec, sets: Map<string, string>): string {
  const { name } = table;
  const create = writableFields(table.fields, 'create').map((f) => {
    // Optional exactly when the create validator says so (nullable, list, defaulted).
    const optional = zodExpression(f, 'create').endsWith('.optional()');
    return `  ${f.name}${optional ? '?' : ''}: ${inputType(f)};`;
  });
  const update = writableFields(table.fields, 'update').map((f) => `  ${f.name}?: ${inputType(f)};`);
  const filter = [
    ...table.fields.map((f) => {
      const set = operatorSet(f);
      const known = sets.get(set.name);
      const text = union(set.operators);
      if (known !== undefined && known !== text) throw new Error(`client: two operator sets named ${set.name}`);
      sets.set(set.name, text);
      return `  ${f.name}?: FieldFilter<${filterScalar(f)}, ${set.name}${f.nullable ? ', true' : ''}>;`;
    }),
    ...table.relations.map((r) => `  ${r.name}?: ${r.target}Filter;`),
  ];
  const keyFields = table.primaryKey.map((k) => table.fields.find((f) => f.name === k)!);
  const key = `{ ${keyFields.map((f) => `${f.name}: ${recordScalar(f)}`).join('; ')} }`;
  const id = keyFields.length === 1 ? recordScalar(keyFields[0]!) : 'never';
  const names = (pick: (f: FieldSpec) => boolean) => union(table.fields.filter(pick).map((f) => f.name));
  return [
    `/** Body of POST /${name} (and of each bulk item): the fields it requires are required. */`,
    `export interface ${name}Create {`,
    ...create,
    '}',
    '',
    `/** Body of PATCH /${name} (JSON Merge Patch): every field optional; null clears a nullable field. */`,
    `export interface ${name}Update {`,
    ...update,
    '}',
    '',
    `/** Filters on ${name}: its fields by operator, and its relations (a to-many relation matches when some related record does). */`,
    `export interface ${name}Filter {`,
    ...filter,
    '}',
    '',
    `/** The types ${article(name).toLowerCase()} ${name} client is made of. */`,
    `export interface ${name}Table {`,
    `  record: ${name}Record;`,
    `  create: ${name}Create;`,
    `  update: ${name}Update;`,
    `  filter: ${name}Filter;`,
    `  field: ${names(() => true)};`,
    `  sort: ${names(groupable)};`,
    `  key: ${key};`,
    `  id: ${id};`,
    `  numeric: ${names(numeric)};`,
    `  ordered: ${names(ordered)};`,
    `  groupable: ${names(groupable)};`,
    '}',
  ].join('\n');
}

/** The client's part for the endpoints of the project's own code: types, methods, and how to call each. */
function endpointSection(endpoints: readonly EndpointSchemas[], tables: readonly TableSpec[]) {
  if (endpoints.length === 0) return false;
  if (tables.some((t) => t.name === 'endpoints'))
    throw new Error('client: a table named "endpoints" leaves no room for client.endpoints; rename the model');
  const capital = (name: string) => `${name[0]!.toUpperCase()}${name.slice(1)}`;
  const types: string[] = [];
  const methods = endpoints.map(({ endpoint, input, output }) => {
    const name = capital(endpoint.name);
    types.push(`/** The input of ${endpoint.method} ${endpoint.path} (${endpoint.name}). */`);
    types.push(`export type ${name}Input = ${typeOf(input)};`, '');
    types.push(`/** The answer of ${endpoint.method} ${endpoint.path} (${endpoint.name}). */`);
    types.push(`export type ${name}Output = ${typeOf(output)};`, '');
    return {
      name: endpoint.name,
      doc: `${endpoint.method} ${endpoint.path}${endpoint.summary ? `: ${endpoint.summary.replace(/\*\//g, '* /')}` : ''}`,
      input: `${name}Input`,
      output: `${name}Output`,
      optional: (input.required ?? []).length === 0 && (input.type === 'object' || input.properties !== undefined),
    };
  });
  const schema = Object.fromEntries(endpoints.map(({ endpoint: e }) => [e.name, { method: e.method, path: e.path }]));
  return { types: types.join('\n').trimEnd(), methods, schema: literal(schema, '') };
}

export function renderClient(
  tables: readonly TableSpec[],
  header: string,
  template: Handlebars.TemplateDelegate,
  endpoints: readonly EndpointSchemas[] = [],
  /** Whether client-functions.ts appends database functions (they need these imports too). */
  functions = false,
): string {
  const sets = new Map<string, string>();
  const sections = tables.map((t) => tableSection(t, sets));
  const records = renderRecordTypes(tables, '').trimEnd();
  const schema = {
    basePath: DATA_BASE_PATH,
    subPaths: { bulk: TABLE_SUB_PATHS.bulk, aggregate: TABLE_SUB_PATHS.aggregate },
    tables: Object.fromEntries(
      tables.map((t) => [
        t.name,
        { keyed: t.primaryKey.length === 1, relations: Object.fromEntries(t.relations.map((r) => [r.name, r.target])) },
      ]),
    ),
    reserved: RESERVED_NAMES,
  };
  const clients = tables.map((t) => (t.primaryKey.length === 1 ? 'KeyedTableClient' : 'TableClient'));
  // Only what client.ts uses: one or both kinds of table client.
  const imports = [
    'createTableClients',
    'type ClientOptions',
    'type ClientSchema',
    ...[...new Set(clients)].sort().map((c) => `type ${c}`),
    ...(endpoints.length > 0 ? ['createEndpointClient', 'type EndpointSchema'] : []),
    ...(functions ? ['createFunctionMethods', 'type DataResponse'] : []),
    ...(endpoints.length > 0 || functions ? ['type CallOptions'] : []),
  ];
  return template({
    header,
    imports: imports.join(', '),
    records,
    operators: union(OPERATORS),
    operands: OPERATORS.map((op) => ({ name: op, ...OPERAND_TYPES[OPERATOR_DEFINITIONS[op].operand.kind] })),
    operatorSets: [...sets].sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, members]) => ({ name, members })),
    sections: sections.join('\n\n'),
    schema: literal(schema, ''),
    clients: tables.map((t, i) => ({ name: t.name, type: `${clients[i]}<${t.name}Table>` })),
    endpoints: endpointSection(endpoints, tables),
  });
}
