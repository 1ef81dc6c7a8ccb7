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
import {
  buildGraphQLSchema,
  type CodeFieldMeta,
  type CodeFields,
  type SchemaVisibility,
  type WriteVisibility,
} from './schema.ts';

/**
 * The project's own code in the schemas (./schema-code.ts): a caller sees the fields it may call,
 * as it sees the tables it may read (docs/graphql.md "Your own code"). `byKind`: whether a field's
 * rule looks at the caller's kind (an endpoint for signed-in users), so schemas differ by it too.
 */
export interface CodeSchema {
  readonly fields: Omit<CodeFields, 'visible'>;
  readonly allows: (meta: CodeFieldMeta, caller: Pick<RolePrincipal, 'kind' | 'roles'>) => boolean;
  readonly byKind: boolean;
}

/** Role sets seen are bounded by the config's roles; the cap only guards against a surprise. */
const MAX_CACHED_SCHEMAS = 256;

/** The schema a set of roles sees: what the policy lets it read (fields by role, as Policy computes them). */
export function schemaCache(
  tables: readonly TableSpec[],
  policy: Pick<Policy, 'access'>,
  code?: CodeSchema,
): (principal: RolePrincipal) => GraphQLSchema {
  const schemas = new Map<string, GraphQLSchema>();
  return (principal) => {
    const roles = [...new Set(principal.roles)].sort();
    const kind = code?.byKind ? principal.kind : 'apiKey';
    const key = `${kind}\n${roles.join('\n')}`;
    let schema = schemas.get(key);
    if (!schema) {
      // A stand-in holding only the roles: the fields a grant lists do not depend on who holds it.
      const holder: RolePrincipal = {
        kind: 'apiKey',
        keyId: `graphql-schema:${roles.join('\n')}`,
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
        schema = buildGraphQLSchema(
          tables,
          visibility,
          undefined,
          writable,
          code && { ...code.fields, visible: (meta) => code.allows(meta, { kind, roles }) },
        );
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
