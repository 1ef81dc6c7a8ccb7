/**
 * DELETE /_webhooks/{id} removes the subscription's deliveries while a delivery worker may be
 * recording a batch of them; the two lock the same rows in different orders, and PostgreSQL rolls
 * one of them back as a deadlock. When it picks the DELETE, the request runs again (it changed
 * nothing) instead of answering 500.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MANAGEMENT_TOKEN, startTestServer, type TestServer } from '../support/server.ts';
import { waitingForLock } from '../support/until.ts';

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({
    configPatch: (raw) => {
      raw.webhooks = { allowHttp: true, allowPrivateTargets: true };
    },
  });
});
afterAll(async () => {
  await t?.close();
});

describe('DELETE /_webhooks/{id} against a worker recording its deliveries', () => {
  it('is rolled back as the deadlock victim, runs again, and answers 204 with every delivery gone', async () => {
    const created = await t.request('POST', '/gw/api/rest/_webhooks', {
      body: {
        projectId: 'shop',
        environment: 'master',
        table: 'Order',
        events: ['INSERT'],
        url: 'http://127.0.0.1:9/hook',
        secret: 'deadlock-secret-0123456789',
      },
      environment: 'master',
      key: MANAGEMENT_TOKEN,
    });
    expect(created.status, created.text).toBe(201);
    const id: string = created.body.id;
    // Three finished deliveries (nothing for the worker to do): inserted in the order d2, d3, d1 and
    // created in the order d1, d2, d3, so that d1 comes last whether the DELETE reads the table in
    // its physical order or by the history index (newest first).
    for (const [d, age] of [
      ['d2', 2],
      ['d3', 1],
      ['d1', 3],
    ] as const) {
      await t.db.query(
        `INSERT INTO svcgen.webhook_deliveries (id, webhook_id, event_id, status, created_at)
         VALUES ($1, $2, 'evt_deadlock', 'delivered', now() - make_interval(mins => $3))`,
        [`del_deadlock_${d}`, id, age],
      );
    }
    // The "worker": a transaction that has updated d1 and will next update d2.
    const worker = new pg.Client({ connectionString: t.database.url });
    await worker.connect();
    try {
      await worker.query('BEGIN');
      await worker.query(`UPDATE svcgen.webhook_deliveries SET updated_at = now() WHERE id = 'del_deadlock_d1'`);
      const removing = t.request('DELETE', `/gw/api/rest/_webhooks/${id}`, {
        environment: 'master',
        key: MANAGEMENT_TOKEN,
      });
      // The DELETE has removed d2 and d3 and waits for d1.
      await waitingForLock(
        t.db,
        'DELETE FROM svcgen.webhook_deliveries',
        'the DELETE waiting for the row the worker holds',
      );
      // The worker now wants d2: a deadlock, and the DELETE (waiting longer) is the one rolled back.
      await worker.query(`UPDATE svcgen.webhook_deliveries SET updated_at = now() WHERE id = 'del_deadlock_d2'`);
      await worker.query('COMMIT');
      const res = await removing;
      expect(res.status, res.text).toBe(204);
    } finally {
      await worker.end();
    }
    expect(await t.db.query('SELECT id FROM svcgen.webhooks WHERE id = $1', [id])).toEqual([]);
    expect(await t.db.query('SELECT id FROM svcgen.webhook_deliveries WHERE webhook_id = $1', [id])).toEqual([]);
  });
});
