/**
 * The schema each set of roles sees (docs/graphql.md "Permissions"): what the policy lets it read
 * and write, built once per distinct set of roles. The HTTP handler and the subscription server
 * each keep one.
 */
import type { GraphQLSchema } from 'graphql';
import { Problem } from '../http/index.ts';
import type { TableSpec } from '../model/index.ts';
import type { RolePrincipal } from '../principal/index.ts';
import type { Policy } from '../query/index.ts';
import { buildGraphQLSchema, type SchemaVisibility, type WriteVisibility } from './schema.ts';

/** Role sets seen are bounded by the config's roles; the cap only guards against a surprise. */
const MAX_CACHED_SCHEMAS = 256;

/** The schema a set of roles sees: what the policy lets it read (fields by role, as Policy computes them). */
export function schemaCache(
  tables: readonly TableSpec[],
  policy: Pick<Policy, 'access'>,
): (principal: RolePrincipal) => GraphQLSchema {
  const schemas = new Map<string, GraphQLSchema>();
  return (principal) => {
    const roles = [...new Set(principal.roles)].sort();
    const key = roles.join('\n');
    let schema = schemas.get(key);
    if (!schema) {
      // A stand-in holding only the roles: the fields a grant lists do not depend on who holds it.
      const holder: RolePrincipal = {
        kind: 'apiKey',
        keyId: `graphql-schema:${key}`,
        environment: '',
        roles,
        context: {},
      };
      const access = policy.access(holder);
      const visibility: SchemaVisibility = {
        table: (table) => access.grant(table, 'read') !== null,
        field: (table, field) => {
          const fields = access.grant(table, 'read')?.fields;
          return fields !== undefined && (fields === null || fields.has(field));
        },
      };
      // Writes as the REST pipeline allows them: an action's grant, its fields (compile-write checks them again).
      const writable: WriteVisibility = (table, action) => {
        const grant = access.grant(table, action);
        return grant === null ? undefined : grant.fields;
      };
      try {
        schema = buildGraphQLSchema(tables, visibility, undefined, writable);
      } catch (error) {
        // Names that collide, in a generated/ written before svcgen generate refused them.
        throw new Problem('not-found', `the GraphQL API cannot serve this model: ${(error as Error).message}`);
      }
      if (schemas.size >= MAX_CACHED_SCHEMAS) schemas.clear();
      schemas.set(key, schema);
    }
    return schema;
  };
}
