/**
 * A table's object type: its fields the caller may read, and its relations (a to-many relation
 * takes a list's arguments). Every member is resolved by the server's `resolveField`.
 */
import { GraphQLInt, GraphQLList, GraphQLNonNull, GraphQLObjectType, type GraphQLFieldConfigMap } from 'graphql';
import { fileReferenceDescription, type TableSpec } from '../model/index.ts';
import type { SchemaContext } from './schema-context.ts';
import type { FilterInputs } from './schema-filters.ts';
import type { ObjectFieldMeta } from './schema-names.ts';

export class ObjectTypes {
  private readonly objects = new Map<string, GraphQLObjectType>();

  constructor(
    private readonly ctx: SchemaContext,
    private readonly inputs: FilterInputs,
  ) {}

  objectOf(t: TableSpec): GraphQLObjectType {
    let o = this.objects.get(t.name);
    if (!o) {
      o = new GraphQLObjectType({ name: t.name, fields: () => this.fieldsOf(t) });
      this.objects.set(t.name, o);
    }
    return o;
  }

  private fieldsOf(t: TableSpec): GraphQLFieldConfigMap<unknown, unknown> {
    const { resolveField } = this.ctx;
    const fields: GraphQLFieldConfigMap<unknown, unknown> = {};
    // Nullable: with several roles, a field may be hidden on some rows (docs/permissions.md).
    for (const f of this.ctx.fieldsOf(t))
      fields[f.name] = {
        type: this.ctx.valueType(t, f),
        ...(f.file ? { description: fileReferenceDescription(f.file) } : {}),
        resolve: resolveField,
        extensions: { svcgen: { field: f.name } satisfies ObjectFieldMeta },
      };
    for (const r of this.ctx.relationsOf(t)) {
      const target = this.ctx.byName.get(r.target)!;
      const meta = { svcgen: { relation: r.name } satisfies ObjectFieldMeta };
      fields[r.name] =
        r.kind === 'one'
          ? { type: this.objectOf(target), resolve: resolveField, extensions: meta }
          : {
              type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(this.objectOf(target)))),
              args: {
                ...this.inputs.listArgs(target, 'limit', 'At most 1000; every related record when left out'),
                offset: { type: GraphQLInt },
              },
              resolve: resolveField,
              extensions: meta,
            };
    }
    return fields;
  }
}
