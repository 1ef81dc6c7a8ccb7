/** `svcgen diff`: the change list of two models (table-driven) and the command's exit codes. */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { diffModels, type ApiChange } from '../generator/diff/diff-models.ts';
import { describeModel } from '../generator/model/describe-model.ts';
import { readDmmf } from '../generator/prisma/index.ts';
import { REPO, SHOP } from './support/server.ts';

const run = promisify(execFile);

const BASE = `
datasource db {
  provider = "postgresql"
}
enum Status {
  open
  paid
}
model Order {
  id        Int      @id @default(autoincrement())
  status    Status   @default(open)
  total     Float
  note      String?
  tag       String   @default("x")
  items     Item[]
  createdAt DateTime @default(now())
  updatedAt DateTime @updatedAt
}
model Item {
  id        Int      @id @default(autoincrement())
  orderId   Int
  order     Order    @relation(fields: [orderId], references: [id])
  createdAt DateTime @default(now())
  updatedAt DateTime @updatedAt
}
`;

async function changes(after: string): Promise<Pick<ApiChange, 'kind' | 'subject' | 'breaking'>[]> {
  const model = async (text: string) => describeModel(await readDmmf(text));
  return diffModels(await model(BASE), await model(after)).map(({ kind, subject, breaking }) => ({ kind, subject, breaking }));
}

const edit = (from: string, to: string) => {
  if (!BASE.includes(from)) throw new Error(`the base schema has no "${from}"`);
  return BASE.replace(from, to);
};

const CASES: [string, { after: string; want: Pick<ApiChange, 'kind' | 'subject' | 'breaking'>[] }][] = [
  ['no change', { after: BASE, want: [] }],
  ['optional field added', { after: edit('  note      String?', '  note      String?\n  memo      String?'), want: [{ kind: 'field added', subject: 'Order.memo', breaking: false }] }],
  ['defaulted field added', { after: edit('  note      String?', '  note      String?\n  n Int @default(0)'), want: [{ kind: 'field added', subject: 'Order.n', breaking: false }] }],
  ['required field added', { after: edit('  note      String?', '  note      String?\n  code      String'), want: [{ kind: 'field added', subject: 'Order.code', breaking: true }] }],
  ['field removed', { after: edit('  note      String?\n', ''), want: [{ kind: 'field removed', subject: 'Order.note', breaking: true }] }],
  ['type changed', { after: edit('  total     Float', '  total     Int'), want: [{ kind: 'type changed', subject: 'Order.total', breaking: true }] }],
  ['nullable → required', { after: edit('  note      String?', '  note      String'), want: [{ kind: 'nullability changed', subject: 'Order.note', breaking: true }] }],
  ['required → nullable', { after: edit('  total     Float', '  total     Float?'), want: [{ kind: 'nullability changed', subject: 'Order.total', breaking: true }] }],
  ['default removed', { after: edit('  tag       String   @default("x")', '  tag       String'), want: [{ kind: 'nullability changed', subject: 'Order.tag', breaking: true }] }],
  ['enum value added', { after: edit('  paid\n', '  paid\n  shipped\n'), want: [{ kind: 'enum value added', subject: 'Order.status', breaking: false }] }],
  ['enum value removed', { after: edit('  paid\n', ''), want: [{ kind: 'enum value removed', subject: 'Order.status', breaking: true }] }],
  [
    'table added',
    {
      after: `${BASE}\nmodel Tag {\n  id Int @id\n  createdAt DateTime @default(now())\n  updatedAt DateTime @updatedAt\n}\n`,
      want: [{ kind: 'table added', subject: 'Tag', breaking: false }],
    },
  ],
  [
    'table removed (with its relation)',
    {
      after: edit('  items     Item[]\n', '').replace(/model Item \{[\s\S]*?\n\}\n/, ''),
      want: [
        { kind: 'table removed', subject: 'Item', breaking: true },
        { kind: 'relation removed', subject: 'Order.items', breaking: true },
      ],
    },
  ],
];

describe('diffModels', () => {
  it.each(CASES)('%s', async (_, { after, want }) => {
    expect(await changes(after)).toEqual(want);
  });
});

describe('svcgen diff', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  const cli = (args: string[]) =>
    run(process.execPath, [path.join(REPO, 'bin/svcgen.js'), ...args], { cwd: REPO }).then(
      (r) => ({ code: 0, ...r }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
    );

  it('compares with a schema file: 0 for additions, 1 for a breaking change, 0 with --allow-breaking', { timeout: 60_000 }, async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'svcgen-diff-'));
    dirs.push(dir);
    const { readFile } = await import('node:fs/promises');
    const current = await readFile(path.join(SHOP, 'schema.prisma'), 'utf8');
    await writeFile(path.join(dir, 'old.prisma'), current.replace('  note       String?\n', '').replace('  vip       Boolean  @default(false)\n', ''));
    const additions = await cli(['diff', '--project', SHOP, '--from', path.join(dir, 'old.prisma')]);
    expect(additions.code, additions.stderr).toBe(0);
    expect(additions.stdout).toMatch(/^\s+field added\s+Customer\.vip\s+Boolean$/m);
    expect(additions.stdout).toMatch(/^\s+field added\s+Order\.note\s+String\?$/m);
    expect(additions.stdout).toContain('2 changes, 0 breaking');

    await writeFile(path.join(dir, 'old.prisma'), current.replace('  note       String?\n', '  note       String?\n  memo       String?\n'));
    const removed = await cli(['diff', '--project', SHOP, '--from', path.join(dir, 'old.prisma'), '--json']);
    expect(removed.code).toBe(1);
    expect(JSON.parse(removed.stdout)).toEqual({ changes: [{ kind: 'field removed', subject: 'Order.memo', detail: 'String', breaking: true }], breaking: 1 });
    const allowed = await cli(['diff', '--project', SHOP, '--from', path.join(dir, 'old.prisma'), '--allow-breaking']);
    expect(allowed.code).toBe(0);
  });

  it('compares with a git ref (the project schema at HEAD)', { timeout: 60_000 }, async () => {
    const same = await cli(['diff', '--project', SHOP, '--from', 'HEAD']);
    expect(same.code, same.stderr).toBe(0);
    expect(same.stdout.trim()).toBe('no API changes');
    const bad = await cli(['diff', '--project', SHOP, '--from', 'no-such-ref-xyz']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^svcgen: --from "no-such-ref-xyz" is neither a file nor a git ref/);
  });
});
