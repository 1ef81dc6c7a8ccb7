/**
 * Features only wire (runtime/server/feature.ts): what two features share lives in the subsystem
 * that owns it or in Services, never in one feature imported by another. Only the registry
 * (features/index.ts) imports the features.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const FEATURES = fileURLToPath(new URL('../../runtime/server/features', import.meta.url));

/** Every module specifier a file names: static imports and re-exports, side-effect imports, import(). */
function specifiers(text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)(['"])([^'"]+)\1/g)) found.push(match[2]!);
  return found;
}

/** The imports of `file` that lead to another file of the features folder, as `file → specifier`. */
function featureImports(file: string, text: string): string[] {
  return specifiers(text)
    .filter((s) => s.startsWith('./') || s === '.' || /^\.\.\/(?:server\/)?features(?:\/|$)/.test(s))
    .map((s) => `${file} → ${s}`);
}

describe('server features', () => {
  it('finds a feature imported by a feature, in each form an import takes', () => {
    const rows: [string, string[]][] = [
      ["import { schemaCache } from './graphql.ts';", ['x.ts → ./graphql.ts']],
      ["export { dataFeature } from './data.ts';", ['x.ts → ./data.ts']],
      ["import './storage.ts';", ['x.ts → ./storage.ts']],
      ["const m = await import('./keys.ts');", ['x.ts → ./keys.ts']],
      ["import { dataLimits } from '../pipeline.ts';", []],
      ["import { graphqlHandler } from '../../graphql/index.ts';", []],
    ];
    for (const [text, want] of rows) expect(featureImports('x.ts', text), text).toEqual(want);
  });

  it('import no other feature (only features/index.ts imports them)', () => {
    const files = readdirSync(FEATURES).filter((name) => name.endsWith('.ts') && name !== 'index.ts');
    expect(files.length).toBeGreaterThan(5);
    const found = files.flatMap((name) => featureImports(name, readFileSync(join(FEATURES, name), 'utf8')));
    expect(found).toEqual([]);
  });
});
