/**
 * The served OpenAPI document works for a generated client as is (issue item 4): openapi-typescript
 * turns /gw/api/rest/_openapi into types, and a small openapi-fetch program, type-checked with
 * `tsc --noEmit --strict` and run against a real server, creates, lists with a filter, reads,
 * patches and deletes with no hand edits, no custom query serializer, and X-Project-Id and the key
 * set once on the client.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import openapiTS, { astToString } from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupCli, tempDir } from '../support/cli.ts';
import { REPO, startTestServer, type TestServer } from '../support/server.ts';

/**
 * The client program. Its `@ts-expect-error` lines fail the type check if the generated types go
 * loose. The server's address and credentials are written in, so it needs no @types/node.
 */
const program = (inputs: {
  baseUrl: string;
  projectId: string;
  key: string;
}) => `import createClient from 'openapi-fetch';
import type { paths } from './api.js';

const { baseUrl, projectId, key }: { baseUrl: string; projectId: string; key: string } = ${JSON.stringify(inputs)};
const client = createClient<paths>({ baseUrl, headers: { 'X-Project-Id': projectId, Authorization: \`Bearer \${key}\` } });

function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

const customer = await client.POST('/gw/api/rest/Customer', { body: { email: 'client@example.com', name: 'Client' } });
check(customer.response.status === 201 && customer.data !== undefined, \`create Customer: \${customer.response.status} \${JSON.stringify(customer.error)}\`);
const customerId: string = customer.data.data.id;

const big = await client.POST('/gw/api/rest/Order', { body: { customerId, total: 12.5, note: 'big' } });
check(big.data !== undefined, \`create Order: \${JSON.stringify(big.error)}\`);
const order = big.data.data;
// Required non-null fields come out non-optional, enums as unions.
const id: number = order.id;
const status: 'open' | 'paid' | 'shipped' | 'cancelled' = order.status;
const note: string | null | undefined = order.note;
check(status === 'open' && note === 'big', \`created \${JSON.stringify(order)}\`);
// @ts-expect-error a record has no field totl
check(order.totl === undefined, 'no totl');
const small = await client.POST('/gw/api/rest/Order', { body: { customerId, total: 3, note: 'small' } });
check(small.data !== undefined, 'create the small Order');

const listed = await client.GET('/gw/api/rest/Order', { params: { query: { total: 'gte.10', sort: '-id', limit: 10 } } });
check(listed.data !== undefined, \`list: \${JSON.stringify(listed.error)}\`);
check(listed.data.data.length === 1 && listed.data.data[0]!.id === id, \`list total=gte.10: \${JSON.stringify(listed.data)}\`);
const nextCursor: string | null | undefined = listed.data.meta.pagination.nextCursor;
check(listed.data.meta.pagination.hasNextPage === false && nextCursor == null, 'one page');

const either = await client.GET('/gw/api/rest/Order', { params: { query: { or: '(note.equals.small,total.gt.100)', customerId: \`equals.\${customerId}\` } } });
check(either.data?.data.length === 1 && either.data.data[0]!.note === 'small', \`list or=(...): \${JSON.stringify(either.data ?? either.error)}\`);

const one = await client.GET('/gw/api/rest/Order/{id}', { params: { path: { id } } });
check(one.data?.data.total === 12.5, \`get: \${JSON.stringify(one.data ?? one.error)}\`);

const patched = await client.PATCH('/gw/api/rest/Order/{id}', { params: { path: { id } }, body: { status: 'paid' } });
check(patched.data?.data.status === 'paid', \`patch: \${JSON.stringify(patched.data ?? patched.error)}\`);

const many = await client.PATCH('/gw/api/rest/Order', { params: { query: { status: 'equals.open' } }, body: { note: 'still open' } });
check(many.data?.data.count === 1, \`patch by filter: \${JSON.stringify(many.data ?? many.error)}\`);

const counted = await client.GET('/gw/api/rest/Order/_aggregate', { params: { query: { fn: 'count', status: 'equals.paid' } } });
check(JSON.stringify(counted.data?.data.aggregates) === '[{"count":1}]', \`aggregate: \${JSON.stringify(counted.data ?? counted.error)}\`);

const removed = await client.DELETE('/gw/api/rest/Order/{id}', { params: { path: { id } } });
check(removed.response.status === 204, \`delete: \${removed.response.status}\`);
const gone = await client.GET('/gw/api/rest/Order/{id}', { params: { path: { id } } });
check(gone.response.status === 404 && gone.error?.status === 404, \`get after delete: \${gone.response.status}\`);

// A misspelled filter field is no parameter of the list operation, and the server refuses it too.
// (openapi-fetch infers its init argument, so TypeScript's excess property check does not run there;
// the error comes from the query object sharing no property with the typed parameters.)
// @ts-expect-error totl is not a field of Order
const misspelled = await client.GET('/gw/api/rest/Order', { params: { query: { totl: 'gte.10' } } });
check(misspelled.response.status === 400 && misspelled.error?.detail === 'totl: Order has no field "totl"', \`misspelled: \${JSON.stringify(misspelled.error)}\`);
// @ts-expect-error total is a number, not text
await client.POST('/gw/api/rest/Order', { body: { customerId, total: '12' } });

console.log('client ok');
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    noEmit: true,
    // The generated api.d.ts is checked too, not skipped as a library file; TypeScript's own lib
    // files are taken as checked, which keeps the run short.
    skipLibCheck: false,
    skipDefaultLibCheck: true,
    types: [],
  },
  files: ['client.ts'],
};

/** Runs a command to its end; its exit code and everything it printed. */
function run(command: string, args: string[], cwd: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

let t: TestServer;
let dir: string;
let types: string;

beforeAll(async () => {
  t = await startTestServer();
  dir = await tempDir('openapi-client');
  // The program resolves openapi-fetch and tsx from the repository's node_modules.
  await fs.symlink(path.join(REPO, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  await fs.writeFile(path.join(dir, 'package.json'), '{ "type": "module", "private": true }\n');
  await fs.writeFile(path.join(dir, 'tsconfig.json'), `${JSON.stringify(TSCONFIG, null, 2)}\n`);
  await fs.writeFile(
    path.join(dir, 'client.ts'),
    program({ baseUrl: t.url, projectId: t.config.project.id, key: t.adminKey }),
  );
  const res = await fetch(`${t.url}/gw/api/rest/_openapi`);
  expect(res.status).toBe(200);
  types = astToString(await openapiTS(await res.json(), { silent: true }));
  await fs.writeFile(path.join(dir, 'api.d.ts'), types);
}, 60_000);

afterAll(async () => {
  await t?.close();
  await cleanupCli();
});

describe('a generated openapi-fetch client of the served document', () => {
  it('gets types from openapi-typescript that ask for no per-call X-Project-Id', () => {
    expect(types).toContain('"/gw/api/rest/Order/{id}"');
    // Only JWKS still declares the header, optional there.
    expect(types).toContain('"X-Project-Id"?: string;');
    expect(types).not.toMatch(/"X-Project-Id": /);
  });

  it('type-checks under tsc --noEmit --strict', { timeout: 120_000 }, async () => {
    const tsc = await run(
      path.join(REPO, 'node_modules/.bin/tsc'),
      ['--noEmit', '--strict', '-p', 'tsconfig.json'],
      dir,
    );
    expect(tsc.output).toBe('');
    expect(tsc.code).toBe(0);
  });

  it('fails the type check when the generated types do not know a field', { timeout: 120_000 }, async () => {
    const broken = path.join(dir, 'broken');
    await fs.mkdir(broken);
    await fs.symlink(path.join(REPO, 'node_modules'), path.join(broken, 'node_modules'), 'dir');
    await fs.copyFile(path.join(dir, 'package.json'), path.join(broken, 'package.json'));
    await fs.copyFile(path.join(dir, 'tsconfig.json'), path.join(broken, 'tsconfig.json'));
    // The same program against types whose Order has no `total`: the checks on it must fail.
    await fs.writeFile(path.join(broken, 'api.d.ts'), types.replaceAll(/\btotal\??: /g, 'grandTotal?: '));
    await fs.copyFile(path.join(dir, 'client.ts'), path.join(broken, 'client.ts'));
    const tsc = await run(
      path.join(REPO, 'node_modules/.bin/tsc'),
      ['--noEmit', '--strict', '-p', 'tsconfig.json'],
      broken,
    );
    expect(tsc.code).toBe(2);
    expect(tsc.output).toMatch(/client\.ts\(\d+,\d+\): error TS2339: Property 'total' does not exist on type/);
  });

  it('runs create, filtered list, get, patch, patch by filter, aggregate and delete against the server', {
    timeout: 60_000,
  }, async () => {
    const result = await run(process.execPath, ['--import', 'tsx', 'client.ts'], dir);
    expect(result.output.trim()).toBe('client ok');
    expect(result.code).toBe(0);
  });
});
