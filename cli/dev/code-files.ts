/**
 * The project's own code as dev watches it (docs/own-code.md "Where the code lives"): the code
 * entry and every file it imports, transitively, by a relative path inside the project, except
 * generated/ (dev writes it) and node_modules/. Found by reading import specifiers, without
 * running the code; a save of any of them restarts the server, which loads the code afresh.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

const DEFAULT_ENTRY = 'svcgen.code.ts';
/** `from '…'`, `import '…'`, `import('…')`, `require('…')` of a relative specifier. */
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)(['"])(\.{1,2}\/[^'"\n]+)\1/g;
const EXTENSIONS = ['', '.ts', '.mts', '.tsx', '.js', '.mjs', '/index.ts', '/index.js'];

/** The code entry svcgen.config.json names (code.entry), else svcgen.code.ts; read as text, since the config may be mid-edit. */
async function entryOf(dir: string): Promise<string> {
  try {
    const raw = JSON.parse(await readFile(path.join(dir, 'svcgen.config.json'), 'utf8')) as {
      code?: { entry?: unknown };
    };
    if (typeof raw.code?.entry === 'string') return path.resolve(dir, raw.code.entry);
  } catch {
    // A broken config fails the cycle on its own; the conventional entry is watched meanwhile.
  }
  return path.join(dir, DEFAULT_ENTRY);
}

function watchable(dir: string, file: string): boolean {
  const relative = path.relative(dir, file);
  if (relative.startsWith('..') || path.isAbsolute(relative)) return false;
  const first = relative.split(path.sep)[0];
  return first !== 'generated' && first !== 'node_modules' && first !== '.svcgen';
}

function resolveImport(from: string, specifier: string): string | undefined {
  const base = path.resolve(path.dirname(from), specifier);
  for (const extension of EXTENSIONS) {
    const candidate = base + extension;
    if (existsSync(candidate) && !candidate.endsWith(path.sep)) return candidate;
  }
  return undefined;
}

/** Each code file (absolute path) with its text; the entry is listed even while it does not exist. */
export async function readCodeFiles(dir: string): Promise<Map<string, string | undefined>> {
  const files = new Map<string, string | undefined>();
  const queue = [await entryOf(dir)];
  while (queue.length > 0) {
    const file = queue.shift()!;
    if (files.has(file)) continue;
    const text = await readFile(file, 'utf8').catch(() => undefined);
    files.set(file, text);
    if (text === undefined) continue;
    for (const [, , specifier] of text.matchAll(IMPORT)) {
      const target = resolveImport(file, specifier!);
      if (target && watchable(dir, target) && !files.has(target)) queue.push(target);
    }
  }
  return files;
}

/** One hash of the code files' names and texts: equal when no code changed. */
export function codeFingerprint(files: ReadonlyMap<string, string | undefined>): string {
  const hash = createHash('sha256');
  for (const [file, text] of [...files].sort(([a], [b]) => (a < b ? -1 : 1)))
    hash.update(`${file}\0${text ?? '\0missing'}\0`);
  return hash.digest('hex');
}
