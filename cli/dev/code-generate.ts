/**
 * generated/ of a project with its own code (docs/own-code.md "Where the code lives"): the code's
 * endpoints are part of openapi.json, client.ts and schema.graphql, and only loading the code says
 * what they are. dev's own process cannot load it again after an edit (an ES module stays cached,
 * a failed import stays failed), so it runs `svcgen generate` in a process of its own, as a user
 * would: generated/ then equals what `generate` writes, and `svcgen check` passes after dev.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { PACKAGE_ROOT } from '../../generator/package-root.ts';

const SVCGEN_BIN = path.join(PACKAGE_ROOT, 'bin', 'svcgen.js');

/**
 * Runs `svcgen generate` on `dir`, which leaves generated/ alone when the code does not load; its
 * error lines go to `say`. Resolves whether it succeeded.
 */
export function generateWithCode(dir: string, say: (line: string) => void): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SVCGEN_BIN, 'generate', '--project', dir, '--unchanged-if-code-fails'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: process.env,
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.on('error', (error) => {
      say(`svcgen: could not run generate for your code's endpoints: ${error.message}`);
      resolve(false);
    });
    child.on('close', (code) => {
      for (const line of stderr.split('\n')) if (line.trim() !== '') say(line);
      resolve(code === 0);
    });
  });
}
