/**
 * The filter query parameters of GET /<table>, GET /<table>/_aggregate and PATCH /<table>
 * (docs/api.md §5.5): one string parameter per scalar field, so generated clients
 * type them and serialize them as plain `name=value` pairs.
 */
import type { ParameterObject } from 'openapi3-ts/oas31';
import {
  FILTER_GROUPS,
  RESERVED_PARAMETERS,
  fieldOperators,
  listed,
  OPERATOR_DEFINITIONS,
  OPERATORS,
  type FieldSpec,
  type OperandShape,
  type FilteringOperation,
  type TableSpec,
} from '../../runtime/model/index.ts';

export { MAX_AGGREGATE_ROWS } from '../../runtime/model/index.ts';

/** A value of the field's type for the parameter's example. */
function sampleValue(field: FieldSpec): string {
  switch (field.type) {
    case 'Int':
    case 'BigInt':
    case 'Float':
    case 'Decimal':
      return '10';
    case 'Boolean':
      return 'true';
    case 'DateTime':
      return '2024-01-31';
    case 'Enum':
      return field.enumValues?.[0] ?? 'x';
    case 'String':
      return field.nativeType?.[0] === 'Uuid' ? '00000000-0000-0000-0000-000000000000' : 'abc';
    default:
      return 'true';
  }
}

function example(field: FieldSpec, operators: readonly string[]): string {
  // A range or prefix shows the operator syntax best; a UUID is only ever matched whole.
  const order =
    field.nativeType?.[0] === 'Uuid'
      ? ['equals', 'contains', 'is_empty']
      : ['starts_with', 'gte', 'equals', 'contains', 'is_empty'];
  const preferred = order.find((op) => operators.includes(op))!;
  return `${preferred}.${preferred === 'is_empty' ? 'true' : sampleValue(field)}`;
}

/** The parameter name filtering `field` in `operation`: the field name, or `col.<name>` where the name is taken. */
export function filterParameterName(field: FieldSpec, operation: FilteringOperation): string {
  const taken: readonly string[] = [...RESERVED_PARAMETERS[operation], ...FILTER_GROUPS];
  return taken.includes(field.name) ? `col.${field.name}` : field.name;
}

export function fieldFilterParameters(table: TableSpec, operation: FilteringOperation): ParameterObject[] {
  return table.fields.map((field) => {
    const operators = fieldOperators(field);
    const name = filterParameterName(field, operation);
    const sample = example(field, operators);
    return {
      name,
      in: 'query',
      description: `Filter on ${field.name}: \`<operator>.<value>\`, e.g. \`${name}=${sample}\`. Operators: ${operators.join(', ')}.`,
      // The example stays in the description: as `example` it would prefill every filter of a
      // docs page's "Try it out" form, and the list would come back filtered.
      schema: { type: 'string', pattern: `^(${operators.join('|')})\\.` },
    };
  });
}

/** The or / and / not group parameters, one component each. */
export function groupParameters(): Record<string, ParameterObject> {
  return Object.fromEntries(
    FILTER_GROUPS.map((group) => [
      group,
      {
        name: group,
        in: 'query',
        description: `${group === 'not' ? 'Negated' : `${group.toUpperCase()}ed`} conditions: \`${group}=(<field>.<operator>.<value>,...)\`; groups nest, e.g. \`${group}=(a.equals.1,${group === 'or' ? 'and' : 'or'}(b.gt.2,c.is_empty.true))\`.`,
        schema: { type: 'string', pattern: '^\\(.*\\)$' },
      } satisfies ParameterObject,
    ]),
  );
}

export const groupParameterRefs = () => FILTER_GROUPS.map((group) => ({ $ref: `#/components/parameters/${group}` }));

const operatorsTaking = (...kinds: OperandShape['kind'][]) =>
  OPERATORS.filter((op) => kinds.includes(OPERATOR_DEFINITIONS[op].operand.kind));

/** `a and b take <what>` / `a takes <what>`. */
function taking(kinds: OperandShape['kind'][], what: string, verb = true): string {
  const ops = operatorsTaking(...kinds);
  return `${listed(ops)}${verb ? (ops.length === 1 ? ' takes' : ' take') : ''} ${what}`;
}

/** The operation description's part on filters that are not enumerated as parameters. */
export const FILTER_DESCRIPTION = [
  'Each field filter parameter is `<field>=<operator>.<value>`; several are ANDed, and a parameter may repeat.',
  `${[
    taking(['list'], `a list, \`${operatorsTaking('list')[0]}.(a,b)\``),
    taking(['pair'], `\`${operatorsTaking('pair')[0]}.<low>,<high>\``),
    taking(['flag', 'true'], '`true`'),
    taking(['count'], 'a whole number', false),
  ].join('; ')}.`,
  `What each operator matches: ${OPERATORS.map((op) => `\`${op}\`: ${OPERATOR_DEFINITIONS[op].description}`).join('; ')}.`,
  'Unquoted `null` matches SQL NULL with equals and not_equals; double-quote a value to mean the text null or to keep commas or parentheses in a list item.',
  'Related records filter with dot notation, `<relation>.<field>=<operator>.<value>` (up to 3 relations deep; a to-many relation matches when some related record does).',
  'A field named like a reserved parameter of the operation is filtered as `col.<field>`.',
].join(' ');
