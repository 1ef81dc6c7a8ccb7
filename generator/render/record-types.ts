/**
 * `generated/types.ts`: one TypeScript interface per record as the API returns it. Built as syntax
 * with ts-morph (its printer fixes the formatting), not as template text.
 */
import { Project, StructureKind, type InterfaceDeclarationStructure } from 'ts-morph';
import type { FieldSpec, TableSpec } from '../../runtime/model/index.ts';

/**
 * The TypeScript type of one value of the field as the API returns it in JSON (docs/api.md §5.2):
 * BigInt, DateTime and Bytes travel as strings, Decimal as a number. The client's body and filter
 * types widen this one.
 */
export function recordScalar(field: FieldSpec): string {
  switch (field.type) {
    case 'String':
    case 'BigInt':
    case 'DateTime':
    case 'Bytes':
      return 'string';
    case 'Int':
    case 'Float':
    case 'Decimal':
      return 'number';
    case 'Boolean':
      return 'boolean';
    case 'Json':
      return 'JsonValue';
    case 'Enum':
      return (field.enumValues ?? []).map((v) => `'${v}'`).join(' | ') || 'never';
  }
}

function tsType(field: FieldSpec): string {
  let t = recordScalar(field);
  if (field.list) t = t.includes('|') ? `(${t})[]` : `${t}[]`;
  return field.nullable ? `${t} | null` : t;
}

export function renderRecordTypes(tables: readonly TableSpec[], header: string): string {
  const project = new Project({ useInMemoryFileSystem: true });
  const file = project.createSourceFile('types.ts', '', { overwrite: true });
  file.addTypeAlias({
    name: 'JsonValue',
    isExported: true,
    type: 'string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue }',
  });
  file.addInterfaces(
    tables.map(
      (table): InterfaceDeclarationStructure => ({
        kind: StructureKind.Interface,
        name: `${table.name}Record`,
        isExported: true,
        docs: [
          `${/^[AEIOU]/.test(table.name) ? 'An' : 'A'} ${table.name} record as the API returns it (fields a role may not read are left out).`,
        ],
        properties: [
          ...table.fields.map((f) => ({ name: f.name, type: tsType(f) })),
          ...table.relations.map((r) => ({
            name: r.name,
            hasQuestionToken: true,
            type: r.kind === 'many' ? `${r.target}Record[]` : `${r.target}Record | null`,
          })),
        ],
      }),
    ),
  );
  file.formatText({ indentSize: 2, convertTabsToSpaces: true, semicolons: 'insert' as never });
  return `${header}${file.getFullText().replace(/"/g, "'")}`;
}
