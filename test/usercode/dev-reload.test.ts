// svcgen dev reloads the project's own code on save (docs/own-code.md "Where the code lives"): the
// code entry and the files it imports are watched, a save regenerates generated/ in a process of
// its own (the endpoints are part of it) and restarts the server without migrating, and code that
// fails to load leaves generated/ alone and keeps the last good server answering.
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanupCli,
  copyExample,
  freshDatabase,
  runCli,
  show,
  startCli,
  type ProjectCopy,
  type RunningCli,
} from '../support/cli.ts';
import type { TestDatabase } from '../support/database.ts';

afterAll(cleanupCli);

const ENTRY = `import { defineCode } from './generated/code.ts';
import { limit } from './lib/rules.ts';

export default defineCode({
  hooks: { Order: { beforeCreate: ({ input }) => ({ ...input, total: Math.min(input.total, limit) }) } },
});
`;

/** A regex matching once `line` has appeared `n` times in the output; group 1 is the last one's first group. */
function nth(line: string, n: number): RegExp {
  return new RegExp(`(?:[\\s\\S]*?^${line}$){${n}}`, 'm');
}

describe('svcgen dev and your code', { timeout: 240_000 }, () => {
  let copy: ProjectCopy;
  let database: TestDatabase;
  let dev: RunningCli;
  let url: string;
  const rules = () => path.join(copy.dir, 'lib', 'rules.ts');

  beforeAll(async () => {
    copy = await copyExample('dev-code');
    await fs.mkdir(path.join(copy.dir, 'lib'));
    await fs.writeFile(rules(), 'export const limit = 100;\n');
    await fs.writeFile(path.join(copy.dir, 'svcgen.code.ts'), ENTRY);
    database = await freshDatabase();
    dev = startCli(['dev', '--port', '0', '--project', copy.dir, '--database-url', database.url]);
    // The stderr line, printed once the cycle (and the watch of the code files) is done.
    [, url] = await dev.waitFor(/^started: serving (http:\/\/127\.0\.0\.1:\d+) /m, { stream: 'stderr' });
  });

  it('a save of a file the entry imports restarts the server, without migrating', async () => {
    const from = dev.stderr.length;
    await fs.writeFile(rules(), 'export const limit = 50;\n');
    await dev.waitFor(nth(`restarted: serving ${url.replace(/\./g, '\\.')} [\\d.]+ s after the change`, 1), {
      stream: 'stderr',
      timeoutMs: 120_000,
    });
    const output = dev.stderr.slice(from);
    expect(output).toContain('change detected: lib/rules.ts\n');
    expect(output).not.toContain('migrate dev');
  });

  it('code that throws while loading keeps the last good server answering; the fix restarts it', async () => {
    const from = dev.stderr.length;
    await fs.writeFile(rules(), "throw new Error('no limit configured');\nexport const limit = 0;\n");
    await dev.waitFor(/keeping the last good server running \(\S+\)/, { stream: 'stderr', timeoutMs: 120_000 });
    const output = dev.stderr.slice(from);
    expect(output).toContain('change detected: lib/rules.ts\n');
    expect(output).toContain(
      `loading your code from ${path.join(copy.dir, 'svcgen.code.ts')} failed: no limit configured (at lib/rules.ts:1)`,
    );
    const answer = await fetch(`${url}/gw/api/rest/City`, { headers: { 'x-project-id': 'shop' } });
    expect(answer.status).toBe(401);

    await fs.writeFile(rules(), 'export const limit = 10;\n');
    await dev.waitFor(nth(`restarted: serving ${url.replace(/\./g, '\\.')} [\\d.]+ s after the change`, 2), {
      stream: 'stderr',
      timeoutMs: 120_000,
    });
  });

  it('an endpoint added by a save is in generated/ once the server restarts, and check passes', async () => {
    const openapi = path.join(copy.dir, 'generated', 'openapi.json');
    const withEndpoint = ENTRY.replace(
      "import { defineCode } from './generated/code.ts';",
      "import { z } from 'zod';\nimport { defineCode, defineEndpoint } from './generated/code.ts';",
    ).replace(
      '});\n',
      `  endpoints: [
    defineEndpoint({
      name: 'ping',
      method: 'GET',
      path: '/ping',
      access: 'public',
      input: z.object({}),
      output: z.object({ pong: z.boolean() }),
      async handler() {
        return { pong: true };
      },
    }),
  ],
});
`,
    );
    await fs.writeFile(path.join(copy.dir, 'svcgen.code.ts'), withEndpoint);
    const [, seconds] = await dev.waitFor(
      nth(`restarted: serving ${url.replace(/\./g, '\\.')} ([\\d.]+) s after the change`, 3),
      { stream: 'stderr', timeoutMs: 120_000 },
    );
    console.log(`svcgen dev: save of svcgen.code.ts with a new endpoint → restarted in ${seconds} s`);
    expect(JSON.parse(await fs.readFile(openapi, 'utf8')).paths['/gw/api/rest/ping']).toBeDefined();
    const ping = await fetch(`${url}/gw/api/rest/ping`, { headers: { 'x-project-id': 'shop' } });
    expect(await ping.json()).toEqual({ pong: true });
    const check = await runCli(['check', '--project', copy.dir], { timeoutMs: 120_000 });
    expect(check.code, show(check)).toBe(0);

    // Broken code leaves generated/ as it was.
    const before = await fs.readFile(openapi, 'utf8');
    await fs.writeFile(rules(), "throw new Error('broken again');\nexport const limit = 0;\n");
    await dev.waitFor(nth('keeping the last good server running \\(\\S+\\)', 2), {
      stream: 'stderr',
      timeoutMs: 120_000,
    });
    expect(await fs.readFile(openapi, 'utf8')).toBe(before);
  });
});
