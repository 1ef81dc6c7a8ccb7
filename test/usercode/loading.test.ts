// Where the code lives (docs/own-code.md "Where the code lives"): the code entry is loaded with the
// service, and each way it can be wrong stops the start with a message naming the file and the fix.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCode, loadService, UsageError } from '../../cli/project.ts';
import type { Config } from '../../runtime/config/index.ts';
import type { ServiceModule } from '../../runtime/model/index.ts';
import { CodeRegistry } from '../../runtime/usercode/index.ts';
import { REPO, SHOP } from '../support/server.ts';

// Inside the repository, so that the code's imports (svcgen, zod) resolve as in a project.
const DIR = path.join(REPO, 'test/.generated/usercode-loading');
const TABLES = 'City, Customer, Order, OrderItem, Product';
let service: ServiceModule;
let config: Config;

beforeAll(async () => {
  await rm(DIR, { recursive: true, force: true });
  await mkdir(DIR, { recursive: true });
  ({ service, config } = await loadService(SHOP));
});
afterAll(() => rm(DIR, { recursive: true, force: true }));

/** Loads `source` as the code entry `name` (each test its own file: modules are cached per URL). */
async function load(name: string, source: string | undefined): Promise<CodeRegistry> {
  if (source !== undefined) await writeFile(path.join(DIR, name), source);
  return loadCode(DIR, { ...config, code: { ...config.code, entry: name } }, service);
}

async function refusal(name: string, source: string | undefined): Promise<string> {
  const error = await load(name, source).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UsageError);
  return (error as Error).message;
}

describe('loading the code entry', () => {
  it('loads a definition with its hooks, endpoints and jobs', async () => {
    const code = await load(
      'good.ts',
      `import { defineCode } from '../../../examples/shop/generated/code.ts';
       export default defineCode({ hooks: { Order: { beforeCreate: ({ input }) => input } } });`,
    );
    expect(code.hookedTables).toEqual(['Order']);
  });

  it('without svcgen.code.ts or code.entry there is no code: the empty registry', async () => {
    expect(await loadCode(DIR, config, service)).toBe(CodeRegistry.EMPTY);
  });

  it('a code.entry that does not exist', async () => {
    expect(await refusal('missing.ts', undefined)).toBe(
      `code.entry of svcgen.config.json names ${path.join(DIR, 'missing.ts')}, which does not exist`,
    );
  });

  it('a throw while loading names the message and the line of the project file', async () => {
    expect(
      await refusal('throws.ts', `const ready = false;\nif (!ready) throw new Error('STRIPE_KEY is not set');\n`),
    ).toBe(`loading your code from ${path.join(DIR, 'throws.ts')} failed: STRIPE_KEY is not set (at throws.ts:2)`);
  });

  it('a module without a default export', async () => {
    expect(await refusal('no-default.ts', 'export const hooks = {};\n')).toBe(
      `${path.join(DIR, 'no-default.ts')} has no default export: end it with \`export default defineCode({ hooks, endpoints, jobs, schedules, auth })\` (defineCode of generated/code.ts)`,
    );
  });

  it('a default export that is not a definition', async () => {
    expect(await refusal('function.ts', `import { defineCode } from 'svcgen';\nexport default defineCode;\n`)).toBe(
      `${path.join(DIR, 'function.ts')}: its default export is a function, not a definition: export \`export default defineCode({ hooks, endpoints, jobs, schedules, auth })\``,
    );
    expect(await refusal('tables.ts', 'export default { Order: { beforeCreate() {} } };\n')).toBe(
      `${path.join(DIR, 'tables.ts')}: its default export has "Order", which is no part of a definition (hooks, endpoints, jobs, schedules, auth); e.g. hooks of a table go under hooks: \`defineCode({ hooks: { Order: { ... } } })\``,
    );
  });

  it('hooks of a table the service does not have', async () => {
    expect(await refusal('unknown-table.ts', 'export default { hooks: { Ordr: {} } };\n')).toBe(
      `${path.join(DIR, 'unknown-table.ts')}: hooks of "Ordr": no such table (tables: ${TABLES})`,
    );
  });
});
