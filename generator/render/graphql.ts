/**
 * generated/schema.graphql: the GraphQL API's full schema (what a role reading everything sees) in
 * SDL, from the same builder the server uses per role (runtime/graphql/schema.ts), types and
 * fields sorted so the file is byte-stable.
 */
import { lexicographicSortSchema, printSchema } from 'graphql';
import {
  buildGraphQLSchema,
  EVERYTHING_VISIBLE,
  EVERYTHING_WRITABLE,
  NO_CODE,
  type CodeFields,
} from '../../runtime/graphql/schema.ts';
import type { TableSpec } from '../../runtime/model/index.ts';
import { ModelError } from '../model/describe-model.ts';

/**
 * With `code`, the project's endpoints and database functions as root fields (docs/graphql.md
 * "Your own code"); `omit` hears each endpoint left out and why.
 */
export function renderGraphqlSchema(
  tables: readonly TableSpec[],
  header: string,
  code: CodeFields = NO_CODE,
  omit?: (name: string, reason: string) => void,
): string {
  const comment = header.replace(/^\/\/ ?/gm, '# ');
  let schema;
  try {
    schema = buildGraphQLSchema(tables, EVERYTHING_VISIBLE, undefined, EVERYTHING_WRITABLE, code, omit);
  } catch (error) {
    // A model or enum whose GraphQL names collide: said like every other model problem.
    throw new ModelError([(error as Error).message]);
  }
  return `${comment}# The GraphQL API at /gw/api/graphql (docs/graphql.md); each role sees the part of it that it may read.\n\n${printSchema(lexicographicSortSchema(schema))}\n`;
}
