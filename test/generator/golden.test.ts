/**
 * Golden example (STYLE "Golden examples"): examples/shop/generated/ is exactly what the generator
 * writes today, byte for byte, and the whole repository, generated example included, type-checks.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { diffProject, renderProject } from '../../generator/generate.ts';
import { loadCodeOf } from '../../cli/project.ts';
import type { Config } from '../../runtime/config/index.ts';
import { REPO, SHOP } from '../support/server.ts';

describe('examples/shop golden output', () => {
  it('regenerating in memory gives the committed generated/ byte for byte', { timeout: 60_000 }, async () => {
    // Prisma's generator runs for real here, not the reuse of the committed client; the example's
    // own code is loaded as `svcgen generate` loads it (its endpoint is part of generated/).
    const code = (config: Config, tables: readonly string[]) => loadCodeOf(SHOP, config, tables);
    const diff = await diffProject(SHOP, await renderProject(SHOP, { reusePrismaClient: false, code }));
    expect(
      diff,
      `examples/shop/generated is stale; run \`svcgen generate --project examples/shop\`. Diff (committed → generator):\n${diff}`,
    ).toBe('');
  });

  it('tsc --noEmit -p tsconfig.json passes (includes examples/*/generated)', { timeout: 120_000 }, async () => {
    const tsc = path.join(REPO, 'node_modules', '.bin', 'tsc');
    const result = await new Promise<{ code: number | null; output: string }>((resolve, reject) => {
      const child = spawn(tsc, ['--noEmit', '-p', 'tsconfig.json'], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (d: Buffer) => (output += d.toString()));
      child.stderr.on('data', (d: Buffer) => (output += d.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, output }));
    });
    expect(result.code, `tsc --noEmit failed:\n${result.output}`).toBe(0);
  });
});
