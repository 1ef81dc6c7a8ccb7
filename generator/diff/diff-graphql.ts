/**
 * GraphQL API changes between two data models (`svcgen diff`, docs/diff.md): the schema each model
 * renders as generated/schema.graphql (generator/render/graphql.ts), compared by graphql-js's own
 * `findBreakingChanges` and `findDangerousChanges`, so that "breaking" means what GraphQL tooling
 * means by it (a field or type removed, an enum value removed, a type changed, ...).
 *
 * One break the SDL cannot show: every member of a create input is nullable in the schema, because
 * the REST validators check the values (and a role's presets fill some in); so a field that a
 * create must now send is listed here as well, as `REQUIRED_INPUT_FIELD_ADDED` (a new field) or
 * `INPUT_FIELD_NOW_REQUIRED` (a field that could be left out before).
 */
import {
  buildSchema,
  findBreakingChanges,
  findDangerousChanges,
  getNamedType,
  isInputObjectType,
  isObjectType,
  isScalarType,
  type GraphQLNamedType,
  type GraphQLSchema,
} from 'graphql';
import { mutationFieldNames, rootFieldNames, typeNames } from '../../runtime/graphql/schema.ts';
import type { TableSpec } from '../../runtime/model/index.ts';
import { renderGraphqlSchema } from '../render/graphql.ts';
import { optionalOnCreate } from './diff-models.ts';

export interface GraphqlChange {
  /** graphql-js's change type (`FIELD_REMOVED`, `VALUE_ADDED_TO_ENUM`, ...), or one of the two above. */
  readonly type: string;
  readonly description: string;
  /** true for graphql-js's breaking changes; its dangerous ones (a client may behave differently) are false. */
  readonly breaking: boolean;
}

/** Built once per model: `svcgen dev` compares each edit with the model of the last one. */
const published = new WeakMap<readonly TableSpec[], GraphQLSchema>();

/** The schema a client sees, from the SDL the generator writes: what is compared is what is published. */
function publishedSchema(tables: readonly TableSpec[]): GraphQLSchema {
  let schema = published.get(tables);
  if (!schema) published.set(tables, (schema = buildSchema(renderGraphqlSchema(tables, ''))));
  return schema;
}

/** Fields of a create input that a create must now send and could leave out (or did not know) before. */
function newlyRequiredOnCreate(
  before: readonly TableSpec[],
  after: readonly TableSpec[],
  schemaBefore: GraphQLSchema,
): { input: string; field: string; change: GraphqlChange }[] {
  const out: { input: string; field: string; change: GraphqlChange }[] = [];
  const was = new Map(before.map((t) => [t.name, t]));
  for (const table of after) {
    const old = was.get(table.name);
    const input = typeNames(table.name).createInput;
    // A table that had no create input has no client of it to break.
    if (!old || !schemaBefore.getType(input)) continue;
    for (const field of table.fields) {
      if (optionalOnCreate(field)) continue;
      const previous = old.fields.find((f) => f.name === field.name);
      const subject = `${input}.${field.name}`;
      if (!previous)
        out.push({
          input,
          field: field.name,
          change: {
            type: 'REQUIRED_INPUT_FIELD_ADDED',
            description: `A create must now send ${subject} (a create without it is refused).`,
            breaking: true,
          },
        });
      else if (optionalOnCreate(previous))
        out.push({
          input,
          field: field.name,
          change: {
            type: 'INPUT_FIELD_NOW_REQUIRED',
            description: `A create must now send ${subject}, which it could leave out before.`,
            breaking: true,
          },
        });
    }
  }
  return out;
}

// Code-unit order, not the locale's: the same bytes on every machine.
const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const byTypeThenDescription = (a: GraphqlChange, b: GraphqlChange) =>
  compare(a.type, b.type) || compare(a.description, b.description);

/** Breaking changes first, then dangerous ones, each sorted by type and description: the output is byte-stable. */
export function diffGraphql(before: readonly TableSpec[], after: readonly TableSpec[]): GraphqlChange[] {
  // The schema is rendered from the model alone: the same model, the same schema (a config edit in dev).
  if (before === after || JSON.stringify(before) === JSON.stringify(after)) return [];
  const [old, next] = [publishedSchema(before), publishedSchema(after)];
  const required = newlyRequiredOnCreate(before, after, old);
  const breaking: GraphqlChange[] = [
    ...findBreakingChanges(old, next).map(({ type, description }) => ({ type, description, breaking: true })),
    ...required.map(({ change }) => change),
  ];
  // graphql-js calls a new required field of a create input optional (the SDL says so): not said twice.
  const saidRequired = new Set(
    required.map(({ input, field }) => `An optional field ${field} on input type ${input} was added.`),
  );
  const dangerous: GraphqlChange[] = findDangerousChanges(old, next)
    .filter(({ description }) => !saidRequired.has(description))
    .map(({ type, description }) => ({ type, description, breaking: false }));
  return [...breaking.sort(byTypeThenDescription), ...dangerous.sort(byTypeThenDescription)];
}

/**
 * The changes of the fields of the project's own code (docs/graphql.md "Your own code"): its
 * endpoints and database functions come from the code, not the model, so they are compared in the
 * two versions' committed generated/schema.graphql, as endpoints are in openapi.json. A code field
 * is a Query or Mutation field no table of either model names; its types are those reachable from
 * it (named after the endpoint, so never a table's). Only changes that name one of them are kept:
 * the tables' are diffGraphql's.
 */
export function diffCodeFields(beforeSdl: string, afterSdl: string, tables: readonly TableSpec[]): GraphqlChange[] {
  let old: GraphQLSchema;
  let next: GraphQLSchema;
  try {
    [old, next] = [buildSchema(beforeSdl), buildSchema(afterSdl)];
  } catch {
    // A schema.graphql that does not parse (hand-edited, a merge conflict): nothing to compare.
    return [];
  }
  const tableFields = new Set(
    tables.flatMap((t) => [...Object.values(rootFieldNames(t.name)), ...Object.values(mutationFieldNames(t.name))]),
  );
  const fields = new Set<string>();
  const types = new Set<string>();
  for (const schema of [old, next])
    for (const root of [schema.getQueryType(), schema.getMutationType()]) {
      if (!root) continue;
      for (const field of Object.values(root.getFields())) {
        if (tableFields.has(field.name)) continue;
        fields.add(`${root.name}.${field.name}`);
        const seen = (type: GraphQLNamedType): void => {
          if (isScalarType(type) || types.has(type.name)) return;
          types.add(type.name);
          if (isObjectType(type) || isInputObjectType(type))
            for (const member of Object.values(type.getFields()))
              seen(getNamedType(member.type as GraphQLNamedType) as GraphQLNamedType);
        };
        seen(getNamedType(field.type));
        for (const arg of field.args) seen(getNamedType(arg.type));
      }
    }
  if (fields.size === 0) return [];
  const names = [...fields, ...types].map((n) => n.replace('.', '\\.'));
  const mentions = new RegExp(`(^|[^\\w.])(${names.join('|')})(?![\\w])`);
  const codeOnly = (change: { description: string }) => mentions.test(change.description);
  return [
    ...findBreakingChanges(old, next)
      .filter(codeOnly)
      .map(({ type, description }) => ({ type, description, breaking: true }))
      .sort(byTypeThenDescription),
    ...findDangerousChanges(old, next)
      .filter(codeOnly)
      .map(({ type, description }) => ({ type, description, breaking: false }))
      .sort(byTypeThenDescription),
  ];
}
