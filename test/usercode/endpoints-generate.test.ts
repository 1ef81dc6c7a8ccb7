/**
 * What `svcgen generate` makes of a project's endpoints (docs/own-code.md "Endpoints"): their
 * operations in openapi.json, typed methods of the client (compiled, then called against a server
 * running the same code), `svcgen check` failing when they change, and `svcgen diff` reporting a
 * breaking change of an input.
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, show } from '../support/cli.ts';
import { REPO, SHOP, startTestServer, type TestServer } from '../support/server.ts';

const DIR = path.join(REPO, 'test/.generated/endpoints-generate');
const git = promisify(execFile);

const CODE = (checkoutInput: string) => `import { z } from 'zod';
import { defineCode, defineEndpoint } from './generated/code.ts';

const checkout = defineEndpoint({
  name: 'checkout',
  method: 'POST',
  path: '/checkout',
  summary: 'Check a cart out',
  access: { roles: ['admin'] },
  input: z.object(${checkoutInput}),
  output: z.object({ orderId: z.number().int(), status: z.enum(['open', 'paid']), lines: z.array(z.object({ sku: z.string() })) }),
  status: 201,
  async handler(input) {
    return { orderId: input.qty * 10, status: 'open' as const, lines: [{ sku: input.sku }] };
  },
});

const lookup = defineEndpoint({
  name: 'lookup',
  method: 'GET',
  path: '/lookup/:code',
  access: 'public',
  input: z.object({ code: z.string(), verbose: z.enum(['yes', 'no']).optional() }),
  output: z.object({ code: z.string(), verbose: z.boolean(), note: z.string().nullable() }),
  async handler(input) {
    return { code: input.code, verbose: input.verbose === 'yes', note: null };
  },
});

export default defineCode({ endpoints: [checkout, lookup] });
`;
const FIRST = '{ sku: z.string(), qty: z.number().int().min(1), note: z.string().optional() }';

beforeAll(async () => {
  await rm(DIR, { recursive: true, force: true });
  await mkdir(DIR, { recursive: true });
  for (const file of ['schema.prisma', 'svcgen.config.json', 'package.json', 'migrations'])
    await cp(path.join(SHOP, file), path.join(DIR, file), { recursive: true });
  await writeFile(path.join(DIR, 'svcgen.code.ts'), CODE(FIRST));
});
afterAll(() => rm(DIR, { recursive: true, force: true }));

const openapi = async () => JSON.parse(await readFile(path.join(DIR, 'generated/openapi.json'), 'utf8'));

describe('svcgen generate', () => {
  it('a first generate (no generated/ yet) writes the model, then the endpoints', async () => {
    const r = await runCli(['generate', '--project', DIR]);
    expect(r.code, show(r)).toBe(0);
    const doc = await openapi();
    const post = doc.paths['/gw/api/rest/checkout'].post;
    expect(post.operationId).toBe('checkout');
    expect(post.summary).toBe('Check a cart out');
    expect(post.security).toEqual([
      { apiKey: [], projectId: [] },
      { bearerJwt: [], projectId: [] },
    ]);
    expect(post.requestBody.content['application/json'].schema).toEqual({
      type: 'object',
      properties: { sku: { type: 'string' }, qty: { type: 'integer', minimum: 1 }, note: { type: 'string' } },
      required: ['sku', 'qty'],
    });
    expect(post.responses['201'].content['application/json'].schema.required).toEqual(['orderId', 'status', 'lines']);
    for (const status of ['401', '403', '422', '429', '500']) expect(post.responses[status], status).toBeDefined();
    // Who may call it, without the role names (the document is public; grants of tables are not in it either)
    expect(post['x-svcgen-access']).toBe('roles');
    expect(JSON.stringify(post)).not.toContain('admin');

    const get = doc.paths['/gw/api/rest/lookup/{code}'].get;
    expect(get.operationId).toBe('lookup');
    expect(get.security).toEqual([{ projectId: [] }, { apiKey: [], projectId: [] }, { bearerJwt: [], projectId: [] }]);
    expect(get.parameters).toEqual([
      { name: 'code', in: 'path', required: true, schema: { type: 'string' } },
      { name: 'verbose', in: 'query', required: false, schema: { type: 'string', enum: ['yes', 'no'] } },
    ]);
    expect(get.requestBody).toBeUndefined();
  });

  it('svcgen check passes, then fails once an endpoint changed without generate', async () => {
    const fresh = await runCli(['check', '--project', DIR]);
    expect(fresh.code, show(fresh)).toBe(0);
    await writeFile(path.join(DIR, 'svcgen.code.ts'), CODE(`${FIRST.slice(0, -2)}, coupon: z.string() }`));
    const stale = await runCli(['check', '--project', DIR]);
    expect(stale.code, show(stale)).toBe(1);
    expect(stale.stdout).toContain('generated/openapi.json');
    expect(stale.stdout).toContain('coupon');
    await writeFile(path.join(DIR, 'svcgen.code.ts'), CODE(FIRST));
  });

  it('code that does not load: generate still writes the model, says why, and exits 1', async () => {
    await writeFile(path.join(DIR, 'svcgen.code.ts'), `${CODE(FIRST)}\nthrow new Error('code is broken here');\n`);
    const r = await runCli(['generate', '--project', DIR]);
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr).toContain('code is broken here');
    expect(r.stderr).toContain("none of your code's endpoints");
    expect((await openapi()).paths['/gw/api/rest/checkout']).toBeUndefined();
    await writeFile(path.join(DIR, 'svcgen.code.ts'), CODE(FIRST));
    const again = await runCli(['generate', '--project', DIR]);
    expect(again.code, show(again)).toBe(0);
    expect((await openapi()).paths['/gw/api/rest/checkout']).toBeDefined();
  });
});

describe('the typed client', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ project: DIR, code: 'entry' });
  });
  afterAll(() => t?.close());

  it('has a method per endpoint, typed from the schemas (compiled)', async () => {
    const file = path.join(DIR, 'use-client.ts');
    await writeFile(
      file,
      `import { createClient, type CheckoutOutput, type LookupInput } from './generated/client.ts';
const client = createClient({ baseUrl: 'http://localhost', projectId: 'shop', apiKey: 'k' });
export async function use(): Promise<number> {
  const out: CheckoutOutput = await client.endpoints.checkout({ sku: 'a', qty: 2 });
  const status: 'open' | 'paid' = out.status;
  const input: LookupInput = { code: 'x' };
  const found = await client.endpoints.lookup(input);
  const note: string | null = found.note;
  // @ts-expect-error qty is a number
  await client.endpoints.checkout({ sku: 'a', qty: 'two' });
  // @ts-expect-error sku is required
  await client.endpoints.checkout({ qty: 2 });
  return out.orderId + status.length + (note?.length ?? 0);
}
`,
    );
    const program = ts.createProgram([file], {
      allowImportingTsExtensions: true,
      strict: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
      types: [],
      skipLibCheck: true,
    });
    const messages = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(messages).toEqual([]);
  });

  it('calls the endpoints of a running server', async () => {
    const { createClient } = await import(path.join(DIR, 'generated/client.ts'));
    const client = createClient({ baseUrl: t.url, projectId: t.config.project.id, apiKey: t.adminKey });
    expect(await client.endpoints.checkout({ sku: 'a', qty: 2 })).toEqual({
      orderId: 20,
      status: 'open',
      lines: [{ sku: 'a' }],
    });
    const anonymous = createClient({ baseUrl: t.url, projectId: t.config.project.id });
    expect(await anonymous.endpoints.lookup({ code: 'a b/c', verbose: 'yes' })).toEqual({
      code: 'a b/c',
      verbose: true,
      note: null,
    });
    await expect(anonymous.endpoints.checkout({ sku: 'a', qty: 2 })).rejects.toMatchObject({
      name: 'ServiceError',
      status: 401,
    });
    await expect(client.endpoints.checkout({ sku: 'a', qty: 0 })).rejects.toMatchObject({
      status: 422,
      problem: { errors: [{ field: 'qty', rule: 'too_small' }] },
    });
  });
});

describe('svcgen diff', () => {
  it('reports a new required input field of an endpoint as breaking', async () => {
    // The earlier version: this project committed in a git repository of its own.
    const run = (...args: string[]) => git('git', args, { cwd: DIR });
    await run('init', '-q');
    await run('add', '-A');
    await run('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-qm', 'before');
    await writeFile(path.join(DIR, 'svcgen.code.ts'), CODE(`${FIRST.slice(0, -2)}, coupon: z.string() }`));
    const generated = await runCli(['generate', '--project', DIR]);
    expect(generated.code, show(generated)).toBe(0);
    const r = await runCli(['diff', '--project', DIR, '--from', 'HEAD']);
    expect(r.code, show(r)).toBe(1);
    expect(r.stdout).toMatch(/BREAKING\s+endpoint changed\s+checkout\s+input: coupon added, required/);
    // The same change to the GraphQL field (docs/graphql.md "Your own code"), from schema.graphql.
    expect(r.stdout).toMatch(/BREAKING.*A required arg coupon on Mutation\.checkout was added\./);
    expect(r.stdout).toContain('2 breaking');
  });
});
