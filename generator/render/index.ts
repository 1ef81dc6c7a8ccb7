/** Stage 3: table descriptions → the files of `generated/` (path → content), nothing written yet. */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Handlebars from 'handlebars';
import type { TableSpec } from '../../runtime/model/index.ts';
import { literal } from './literal.ts';
import { buildOpenApi } from './openapi.ts';
import { renderRecordTypes } from './record-types.ts';
import { routesFor } from './routes.ts';
import { writableFields, zodExpression } from './zod-expressions.ts';

const TEMPLATES = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../templates');

function template(name: string): Handlebars.TemplateDelegate {
  return Handlebars.create().compile(readFileSync(path.join(TEMPLATES, name), 'utf8'), { strict: true });
}

export interface RenderOptions {
  title: string;
  version: string;
}

export function renderFiles(tables: readonly TableSpec[], options: RenderOptions): Map<string, string> {
  const files = new Map<string, string>();
  const header = readFileSync(path.join(TEMPLATES, 'header.txt'), 'utf8');
  const table = template('table.ts.hbs');
  for (const spec of tables) {
    files.set(
      `tables/${spec.name}.ts`,
      table({
        header,
        name: spec.name,
        spec: literal(spec, '  '),
        create: writableFields(spec.fields, 'create').map((f) => ({ key: f.name, zod: zodExpression(f, 'create') })),
        update: writableFields(spec.fields, 'update').map((f) => ({ key: f.name, zod: zodExpression(f, 'update') })),
      }),
    );
  }
  const routes = routesFor(tables);
  files.set('routes.ts', template('routes.ts.hbs')({ header, routes }));
  files.set('index.ts', template('index.ts.hbs')({ header, tables: tables.map((t) => t.name) }));

  files.set('types.ts', renderRecordTypes(tables, header));
  files.set('openapi.json', `${JSON.stringify(buildOpenApi(tables, routes, options), null, 2)}\n`);
  return new Map([...files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
