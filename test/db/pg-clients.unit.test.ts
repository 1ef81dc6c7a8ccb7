/**
 * Every PostgreSQL connection of the runtime and the CLI comes from runtime/db/client.ts, whose
 * clients always listen for 'error' (docs/deployment.md "What survives what"): a pg client made
 * anywhere else, or a pool checkout outside withConnection(), could end the process on a network cut.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from '../support/server.ts';

const ALLOWED = 'runtime/db/client.ts';
const FORBIDDEN = [/new\s+pg\.(Client|Pool)\b/, /\bpool\.connect\(/i, /new\s+(Client|Pool)\(/];

async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(path.join(REPO, dir), { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => path.relative(REPO, path.join(e.parentPath, e.name)));
}

describe('pg clients', () => {
  it('are made and checked out only in runtime/db/client.ts', async () => {
    const offending: string[] = [];
    for (const file of [...(await sources('runtime')), ...(await sources('cli'))]) {
      if (file === ALLOWED) continue;
      const lines = (await readFile(path.join(REPO, file), 'utf8')).split('\n');
      lines.forEach((line, i) => {
        if (/^(\/\*|\*|\/\/)/.test(line.trim())) return;
        if (FORBIDDEN.some((re) => re.test(line))) offending.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(offending).toEqual([]);
  });
});
