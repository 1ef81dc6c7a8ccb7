/**
 * `svcgen worker` as an operator runs it (docs/own-code.md "Where jobs run"): it loads the
 * project's code entry and runs its jobs, also those queued while no process ran jobs.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../runtime/db/index.ts';
import { cleanupCli, copyExample, freshDatabase, startCli } from '../support/cli.ts';
import { REPO } from '../support/server.ts';
import { until } from '../support/until.ts';

afterAll(cleanupCli);

/** A code entry importing svcgen and zod from this checkout by path (no package install in the copy). */
const CODE = `import { z } from '${path.join(REPO, 'node_modules/zod/index.js')}';
import { defineCode, defineJob } from '${path.join(REPO, 'runtime/usercode/public.ts')}';

const note = defineJob({
  name: 'note',
  payload: z.object({ text: z.string() }),
  async run({ text }, ctx) {
    await ctx.sql\`INSERT INTO public.notes (text, environment) VALUES (\${text}, \${ctx.environment})\`;
  },
});

export default defineCode({ jobs: [note] });
`;

describe('svcgen worker', { timeout: 120_000 }, () => {
  it('runs the jobs of the code entry, queued while only serve --no-worker ran', async () => {
    const copy = await copyExample('jobs-worker');
    await fs.writeFile(path.join(copy.dir, 'svcgen.code.ts'), CODE);
    const database = await freshDatabase();
    const at = ['--project', copy.dir, '--database-url', database.url];
    const server = startCli(['serve', '--port', '0', '--no-worker', ...at]);
    await server.waitFor(/^listening on /m, { stream: 'stdout', timeoutMs: 60_000 });
    const db = openDatabase(database.url, { max: 1 });
    try {
      await db.query('CREATE TABLE public.notes (text text, environment text)');
      const [{ id }] = await db.query<{ id: string }>(
        `SELECT id::text FROM svcgen_worker.add_job('svcgen.code.note', $1::json)`,
        [JSON.stringify({ environment: 'master', payload: { text: 'hello' } })],
      );
      const worker = startCli(['worker', ...at]);
      await worker.waitFor(/^delivering webhooks and running jobs$/m, { stream: 'stdout', timeoutMs: 60_000 });
      const rows = await until(
        () => db.query<{ text: string; environment: string }>('SELECT text, environment FROM public.notes'),
        (r) => r.length === 1,
        15_000,
        'the worker ran the job',
      );
      expect(rows).toEqual([{ text: 'hello', environment: 'master' }]);
      const [line] = await worker.waitFor(/^\{.*"job succeeded".*\}$/m, { stream: 'stdout', timeoutMs: 10_000 });
      expect(JSON.parse(line)).toMatchObject({
        level: 'info',
        requestId: `job:${id}`,
        code: 'job note',
        job: 'note',
        jobId: id,
        attempt: 1,
        msg: 'job succeeded',
      });
    } finally {
      await db.close();
    }
  });
});
