/**
 * The layers of docs/architecture.md "Layers", checked on the source: every static relative import
 * (`import`, `import type`, `export … from`) of runtime/ and generator/ is read with TypeScript's
 * parser, and the folders of runtime/ must form no cycle, the generator may reach into runtime/ only
 * for the model and the few modules listed below, and no front end imports another.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** One import: the importing file, the file it resolves to (both relative to ROOT), and the specifier as written. */
interface Import {
  readonly from: string;
  readonly to: string;
  readonly specifier: string;
}

function walk(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : walk(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The static relative imports and re-exports of `file` (dynamic `import()` is not a layer edge). */
function importsOf(file: string, text: string): Import[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: Import[] = [];
  for (const statement of source.statements) {
    const specifier =
      (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) &&
      statement.moduleSpecifier &&
      ts.isStringLiteral(statement.moduleSpecifier)
        ? statement.moduleSpecifier.text
        : undefined;
    if (specifier?.startsWith('.'))
      found.push({ from: file, to: posix.normalize(posix.join(dirname(file), specifier)), specifier });
  }
  return found;
}

function importsUnder(dir: string): Import[] {
  return walk(dir).flatMap((file) => importsOf(file, readFileSync(join(ROOT, file), 'utf8')));
}

/** The folder of runtime/ that holds `file` (`runtime/db/embedded-postgres/x.ts` → `db`); undefined for runtime/index.ts. */
function folderOf(file: string): string | undefined {
  const parts = relative('runtime', file).split('/');
  return parts.length > 1 && parts[0] !== '..' ? parts[0] : undefined;
}

/** Folder → folder → the first import (in file order) that makes the edge. */
type FolderGraph = Map<string, Map<string, Import>>;

function folderGraph(imports: readonly Import[]): FolderGraph {
  const graph: FolderGraph = new Map();
  for (const edge of [...imports].sort((a, b) => a.from.localeCompare(b.from))) {
    const from = folderOf(edge.from);
    const to = folderOf(edge.to);
    if (!from || !to || from === to) continue;
    let targets = graph.get(from);
    if (!targets) graph.set(from, (targets = new Map()));
    if (!targets.has(to)) targets.set(to, edge);
  }
  return graph;
}

/** The shortest path of folders from `start` to `goal` (both included), or undefined. */
function shortestPath(graph: FolderGraph, start: string, goal: string): string[] | undefined {
  const previous = new Map<string, string>([[start, start]]);
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    if (node === goal) {
      const path = [goal];
      while (path[0] !== start) path.unshift(previous.get(path[0]!)!);
      return path;
    }
    for (const next of [...(graph.get(node)?.keys() ?? [])].sort()) {
      if (previous.has(next)) continue;
      previous.set(next, node);
      queue.push(next);
    }
  }
  return undefined;
}

/**
 * Every cycle that some edge closes most directly (the edge, then the shortest way back), each once,
 * as `a → b → a` with the file and import of each edge beneath it; empty when the graph has none.
 */
function cycles(graph: FolderGraph): string[] {
  const seen = new Set<string>();
  const found: string[] = [];
  for (const from of [...graph.keys()].sort()) {
    for (const to of [...graph.get(from)!.keys()].sort()) {
      const back = shortestPath(graph, to, from);
      if (!back) continue;
      const ring = [from, ...back.slice(0, -1)];
      // The same cycle starts at each of its folders: name it from its least one.
      const least = ring.indexOf([...ring].sort()[0]!);
      const canonical = [...ring.slice(least), ...ring.slice(0, least)];
      const key = canonical.join(' ');
      if (seen.has(key)) continue;
      seen.add(key);
      const path = [...canonical, canonical[0]!];
      const edges = path.slice(1).map((next, i) => {
        const edge = graph.get(path[i]!)!.get(next)!;
        return `  ${path[i]} → ${next}: ${edge.from} imports '${edge.specifier}'`;
      });
      found.push([path.join(' → '), ...edges].join('\n'));
    }
  }
  return found;
}

/**
 * What the generator takes from runtime/ besides runtime/model/, each shared on purpose: the
 * generated code must agree with what the server does with the same input.
 */
const GENERATOR_SHARED: Record<string, string> = {
  // svcgen.config.json is read by one loader, so generate and serve never disagree on a config.
  'runtime/config/index.ts': 'the config file schema and loader',
  // The committed SDL is the schema the server builds, not a second rendering of it.
  'runtime/graphql/schema.ts': 'the GraphQL schema builder (render/graphql.ts, diff/diff-graphql.ts)',
  // The endpoints of a project's own code, whose zod schemas become openapi.json and the client.
  'runtime/usercode/index.ts': "the definitions of a project's own code (render/openapi-endpoints.ts)",
};

/** The front ends of runtime/: each parses requests into the core and formats answers out of it. */
const FRONT_ENDS = ['rest', 'graphql', 'realtime', 'storage'];

/**
 * Front end → front end imports that exist today, as `from → to`: subscriptions use GraphQL's
 * schema, translation and error shapes. Delete an entry when its last import goes (the test fails
 * on a stale entry).
 */
const KNOWN_FRONT_END_EDGES = ['realtime → graphql'];

describe('imports between runtime folders', () => {
  const runtime = importsUnder('runtime');
  const graph = folderGraph(runtime);

  it('reads the imports of every runtime file', () => {
    expect(runtime.length).toBeGreaterThan(500);
    expect(graph.get('webhooks')?.has('db')).toBe(true);
  });

  it('form no cycle between folders', () => {
    expect(cycles(graph).join('\n')).toBe('');
  });

  it('no front end imports another, beyond the known edges left to the data layer work', () => {
    const edges = FRONT_ENDS.flatMap((from) =>
      [...(graph.get(from)?.entries() ?? [])]
        .filter(([to]) => FRONT_ENDS.includes(to))
        .map(([to, edge]) => ({ name: `${from} → ${to}`, edge })),
    );
    const unknown = edges
      .filter(({ name }) => !KNOWN_FRONT_END_EDGES.includes(name))
      .map(({ name, edge }) => `${name}: ${edge.from} imports '${edge.specifier}'`);
    expect(unknown.join('\n')).toBe('');
    const stale = KNOWN_FRONT_END_EDGES.filter((name) => !edges.some((edge) => edge.name === name));
    expect(stale, 'no longer imported: delete from KNOWN_FRONT_END_EDGES').toEqual([]);
  });
});

describe('imports of the generator from runtime/', () => {
  it('reach only runtime/model/ and the modules shared on purpose', () => {
    const reached = importsUnder('generator').filter((edge) => edge.to.startsWith('runtime/'));
    expect(reached.some((edge) => edge.to.startsWith('runtime/model/'))).toBe(true);
    const refused = reached
      .filter((edge) => !edge.to.startsWith('runtime/model/') && !(edge.to in GENERATOR_SHARED))
      .map((edge) => `${edge.from} imports '${edge.specifier}'`);
    expect(refused.join('\n')).toBe('');
  });
});

// The checker itself, on imports written here.
const edge = (from: string, to: string): Import => ({ from, to, specifier: `./${to}` });

describe('the cycle finder', () => {
  const cases: [string, { given: Import[]; want: string[] }][] = [
    ['no edge', { given: [], want: [] }],
    [
      'a chain',
      { given: [edge('runtime/a/x.ts', 'runtime/b/y.ts'), edge('runtime/b/y.ts', 'runtime/c/z.ts')], want: [] },
    ],
    [
      'imports inside a folder and from runtime/index.ts',
      {
        given: [
          edge('runtime/a/x.ts', 'runtime/a/y.ts'),
          edge('runtime/index.ts', 'runtime/a/x.ts'),
          edge('runtime/a/x.ts', 'runtime/index.ts'),
        ],
        want: [],
      },
    ],
    [
      'two folders',
      {
        given: [edge('runtime/b/y.ts', 'runtime/a/x.ts'), edge('runtime/a/x.ts', 'runtime/b/deep/z.ts')],
        want: [
          "a → b → a\n  a → b: runtime/a/x.ts imports './runtime/b/deep/z.ts'\n  b → a: runtime/b/y.ts imports './runtime/a/x.ts'",
        ],
      },
    ],
    [
      'three folders, named once',
      {
        given: [
          edge('runtime/c/z.ts', 'runtime/a/x.ts'),
          edge('runtime/a/x.ts', 'runtime/b/y.ts'),
          edge('runtime/b/y.ts', 'runtime/c/z.ts'),
        ],
        want: [
          "a → b → c → a\n  a → b: runtime/a/x.ts imports './runtime/b/y.ts'\n  b → c: runtime/b/y.ts imports './runtime/c/z.ts'\n  c → a: runtime/c/z.ts imports './runtime/a/x.ts'",
        ],
      },
    ],
  ];
  it.each(cases)('%s', (_name, { given, want }) => {
    expect(cycles(folderGraph(given))).toEqual(want);
  });

  it('reads import, import type and export … from, and no bare or dynamic import', () => {
    const text = [
      "import { a } from '../a/index.ts';",
      "import type { B } from '../b/index.ts';",
      "export { c } from './c.ts';",
      "export * from '../d/index.ts';",
      "import { z } from 'zod';",
      "const e = await import('../e/index.ts');",
    ].join('\n');
    expect(importsOf('runtime/x/f.ts', text).map((i) => i.to)).toEqual([
      'runtime/a/index.ts',
      'runtime/b/index.ts',
      'runtime/x/c.ts',
      'runtime/d/index.ts',
    ]);
  });
});
