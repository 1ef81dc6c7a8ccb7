// `svcgen check` type-checks the project's own code against its generated types (docs/own-code.md
// "Where the code lives"): run as a user runs it, on a copy of the example outside the repository.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupCli, copyExample, runCli, show } from '../support/cli.ts';

afterAll(cleanupCli);

const hook = (total: string) => `import { defineCode } from './generated/code.ts';

export default defineCode({
  hooks: {
    Order: {
      beforeCreate({ input }) {
        return { ...input, total: ${total} };
      },
    },
  },
});
`;

describe('svcgen check', () => {
  it('exits 1 naming file:line of a hook that returns the wrong type, and 0 once it is fixed', async () => {
    const copy = await copyExample('check');
    const entry = path.join(copy.dir, 'svcgen.code.ts');
    await writeFile(entry, hook(`'free'`));
    // The example's own code has endpoints this one has not: generated/ follows the code.
    const generated = await runCli(['generate', '--project', copy.dir], { timeoutMs: 120_000 });
    expect(generated.code, show(generated)).toBe(0);
    const wrong = await runCli(['check', '--project', copy.dir], { timeoutMs: 120_000 });
    expect(wrong.code, show(wrong)).toBe(1);
    expect(wrong.stdout).toBe('generated/ is up to date\n');
    const lines = wrong.stderr.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^svcgen\.code\.ts:6:7 - error TS2322: /);
    expect(wrong.stderr).toContain("Type 'string' is not assignable to type 'number'.");
    expect(lines.at(-1)).toBe('your code (svcgen.code.ts) has 1 type error: fix it and run check again');

    await writeFile(entry, hook('input.total * 2'));
    const right = await runCli(['check', '--project', copy.dir], { timeoutMs: 120_000 });
    expect(right.code, show(right)).toBe(0);
    expect(right.stdout).toMatch(
      /^generated\/ is up to date\nyour code \(svcgen\.code\.ts\) type-checks against generated\/ \(\d+ ms\)\n$/,
    );
  }, 300_000);
});
