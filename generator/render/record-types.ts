/**
 * `generated/types.ts`: one TypeScript interface per record as the API returns it. Built as syntax
 * with ts-morph (its printer fixes the formatting), not as template text.
 */
import { Project, StructureKind, type InterfaceDeclarationStructure } from 'ts-morph';
import type { FieldSpec, TableSpec } from '../../runtime/model/index.ts';

function tsType(field: FieldSpec): string {
  let t: string;
  switch (field.type) {
    case 'String':
    case 'BigInt':
    case 'DateTime':
    case 'Bytes':
      t = 'string';
      break;
    case 'Int':
    case 'Float':
    case 'Decimal':
      t = 'number';
      break;
    case 'Boolean':
      t = 'boolean';
      break;
    case 'Json':
      t = 'JsonValue';
      break;
    case 'Enum':
      t = (field.enumValues ?? []).map((v) => JSON.stringify(v)).join(' | ') || 'string';
      break;
  }
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
        docs: [`${/^[AEIOU]/.test(table.name) ? 'An' : 'A'} ${table.name} record as the API returns it (fields a role may not read are left out).`],
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
