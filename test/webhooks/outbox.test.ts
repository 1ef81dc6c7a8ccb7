// The outbox drain (runtime/events/outbox.ts, queueing the jobs of runtime/webhooks/queue.ts): a
// data statement writes one row listing its (event, subscription) pairs
// (svcgen.webhook_event_outbox); the drain takes whole rows, oldest first, records a delivery per
// pair and queues the deliveries in jobs of DRAIN_JOB_SIZE in outbox order. It still takes the rows of earlier releases (svcgen.webhook_outbox), which list deliveries
// already recorded (delivery_ids, or one delivery_id).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureSystemSchema, openDatabase, type Database } from '../../runtime/db/index.ts';
import { QUEUE_SCHEMA } from '../../runtime/db/index.ts';
import { DRAIN_JOB_SIZE } from '../../runtime/events/index.ts';
import { DRAIN_OUTBOX } from '../../runtime/webhooks/queue.ts';
import {
  installDeliveryQueue,
  nextDrainDelay,
  pruneDeliveryHistory,
  webhookQueueDepth,
} from '../../runtime/webhooks/worker.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let database: TestDatabase;
let db: Database;

beforeAll(async () => {
  database = await createTestDatabase();
  db = openDatabase(database.url);
  await ensureSystemSchema(db);
  await installDeliveryQueue(database.url, (message) => {
    throw new Error(message);
  });
});
afterEach(async () => {
  await db.query('DELETE FROM svcgen.webhook_outbox');
  await db.query('DELETE FROM svcgen.webhook_event_outbox');
  await db.query(`DELETE FROM ${QUEUE_SCHEMA}._private_jobs`);
  await db.query('DELETE FROM svcgen.webhook_deliveries');
  await db.query('DELETE FROM svcgen.webhook_events');
  await db.query('DELETE FROM svcgen.webhooks');
});
afterAll(async () => {
  await db?.close();
  await database?.drop();
});

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`);

/** Outbox rows in this order: a list is a statement's row, a string a row of the earlier form. */
async function fill(rows: (string[] | string)[]): Promise<void> {
  for (const row of rows) {
    if (typeof row === 'string') await db.query('INSERT INTO svcgen.webhook_outbox (delivery_id) VALUES ($1)', [row]);
    else await db.query('INSERT INTO svcgen.webhook_outbox (delivery_ids) VALUES ($1)', [row]);
  }
}

/** The drain's whole answer; `drain` leaves out `watched` (any webhook active). */
const drainRow = async (limit: number) =>
  (await db.query<{ drained: number; more: boolean; jobs: number; watched: boolean }>(DRAIN_OUTBOX, [limit]))[0]!;
const drain = async (limit: number) => {
  const { watched: _, ...row } = await drainRow(limit);
  return row;
};

/** The queued jobs' delivery lists, in the order they were queued. */
const jobs = async () =>
  (
    await db.query<{ ids: string[] }>(`SELECT payload->'ids' AS ids FROM ${QUEUE_SCHEMA}._private_jobs ORDER BY id`)
  ).map((j) => j.ids);

async function subscription(id: string): Promise<void> {
  await db.query(
    `INSERT INTO svcgen.webhooks (id, project_id, environment, table_name, events, url, endpoint, secret)
     VALUES ($1, 'shop', 'master', 'Customer', '{INSERT}', 'https://example.com/h', 'https://example.com:443', 'sealed')`,
    [id],
  );
}

async function events(ids: string[], createdAt = 'now()'): Promise<void> {
  await db.query(
    `INSERT INTO svcgen.webhook_events (id, environment, table_name, operation, record, changed_fields, created_at)
     SELECT id, 'master', 'Customer', 'INSERT', '{}', '{}', ${createdAt} FROM unnest($1::text[]) AS id`,
    [ids],
  );
}

describe('outbox drain', () => {
  it('says whether any webhook is active, and the worker looks every second only while none is', async () => {
    const quiet = await drainRow(10);
    expect(quiet).toMatchObject({ drained: 0, more: false, watched: false });
    expect(nextDrainDelay(quiet)).toBe(1_000);
    await subscription('wh_a');
    const watched = await drainRow(10);
    expect(watched).toMatchObject({ drained: 0, more: false, watched: true });
    expect(nextDrainDelay(watched)).toBe(50);
    await db.query("UPDATE svcgen.webhooks SET active = false WHERE id = 'wh_a'");
    expect(await drainRow(10)).toMatchObject({ watched: false });
    // Rows left by a write that committed after its subscription went: taken at once, then the next ones.
    await fill([['d1'], ['d2']]);
    const late = await drainRow(1);
    expect(late).toMatchObject({ drained: 1, more: true, watched: false });
    expect(nextDrainDelay(late)).toBe(0);
    // A drain that answered no row: look again at the usual interval.
    expect(nextDrainDelay(undefined)).toBe(50);
  });

  it("records a delivery per (event, subscription) pair of a statement's row, in order, none for a deleted subscription", async () => {
    await subscription('wh_a');
    await subscription('wh_b');
    await events(['e1', 'e2', 'e3']);
    // e1 to wh_a and wh_b, e2 to wh_gone (deleted since the write), e3 to wh_a
    await db.query('INSERT INTO svcgen.webhook_event_outbox (event_ids, webhook_ids) VALUES ($1, $2)', [
      ['e1', 'e1', 'e2', 'e3'],
      ['wh_a', 'wh_b', 'wh_gone', 'wh_a'],
    ]);
    expect(await webhookQueueDepth(db)).toEqual({ outbox: 4, waiting: 0 });
    expect(await drain(500)).toEqual({ drained: 3, more: false, jobs: 1 });
    expect(await webhookQueueDepth(db)).toEqual({ outbox: 0, waiting: 3 });
    const recorded = await db.query<{ id: string; webhook_id: string; event_id: string; status: string }>(
      'SELECT id, webhook_id, event_id, status FROM svcgen.webhook_deliveries',
    );
    const [job] = await jobs();
    const byId = new Map(recorded.map((d) => [d.id, d]));
    expect(job!.map((id) => byId.get(id))).toEqual([
      { id: expect.stringMatching(/^del_[0-9a-f]{32}$/), webhook_id: 'wh_a', event_id: 'e1', status: 'pending' },
      { id: expect.stringMatching(/^del_[0-9a-f]{32}$/), webhook_id: 'wh_b', event_id: 'e1', status: 'pending' },
      { id: expect.stringMatching(/^del_[0-9a-f]{32}$/), webhook_id: 'wh_a', event_id: 'e3', status: 'pending' },
    ]);
    expect(recorded).toHaveLength(3);
  });

  it("in one drain, rows of earlier releases go first, then the statements' pairs", async () => {
    await subscription('wh_a');
    await events(['e1']);
    await db.query('INSERT INTO svcgen.webhook_event_outbox (event_ids, webhook_ids) VALUES ($1, $2)', [
      ['e1'],
      ['wh_a'],
    ]);
    await fill(['old1', ['old2', 'old3']]);
    expect(await webhookQueueDepth(db)).toEqual({ outbox: 4, waiting: 0 });
    expect(await drain(500)).toEqual({ drained: 4, more: false, jobs: 1 });
    const [fresh] = await db.query<{ id: string }>(`SELECT id FROM svcgen.webhook_deliveries WHERE event_id = 'e1'`);
    expect(await jobs()).toEqual([['old1', 'old2', 'old3', fresh!.id]]);
  });

  it('pruning keeps an old event that an outbox row still names', async () => {
    await subscription('wh_a');
    await events(['old-waiting', 'old-unused'], "now() - interval '2 days'");
    await db.query('INSERT INTO svcgen.webhook_event_outbox (event_ids, webhook_ids) VALUES ($1, $2)', [
      ['old-waiting'],
      ['wh_a'],
    ]);
    await pruneDeliveryHistory(db, 3600);
    expect(await db.query('SELECT id FROM svcgen.webhook_events')).toEqual([{ id: 'old-waiting' }]);
  });

  it('moves statement rows and earlier single-delivery rows into jobs of DRAIN_JOB_SIZE, in outbox order', async () => {
    const first = ids('a', 25);
    const last = ids('c', 3);
    await fill([first, 'b1', last]);
    expect(await webhookQueueDepth(db)).toEqual({ outbox: 29, waiting: 0 });
    expect(await drain(500)).toEqual({ drained: 29, more: false, jobs: 3 });
    const all = [...first, 'b1', ...last];
    expect(await jobs()).toEqual([all.slice(0, 10), all.slice(10, 20), all.slice(20)]);
    expect(DRAIN_JOB_SIZE).toBe(10);
    expect(await webhookQueueDepth(db)).toEqual({ outbox: 0, waiting: 0 });
    expect(await drain(500)).toEqual({ drained: 0, more: false, jobs: 0 });
  });

  it("takes statements' rows whole up to about the limit of deliveries, and says when more wait", async () => {
    await subscription('wh_a');
    for (const prefix of ['a', 'b', 'c'])
      await db.query('INSERT INTO svcgen.webhook_event_outbox (event_ids, webhook_ids) VALUES ($1, $2)', [
        ids(prefix, 100),
        Array(100).fill('wh_a'),
      ]);
    // a and b start below 150 deliveries; c starts at 200
    expect(await drain(150)).toEqual({ drained: 200, more: true, jobs: 20 });
    expect(await webhookQueueDepth(db)).toEqual({ outbox: 100, waiting: 200 });
    expect(await drain(150)).toEqual({ drained: 100, more: false, jobs: 10 });
    const eventOf = new Map(
      (await db.query<{ id: string; event_id: string }>('SELECT id, event_id FROM svcgen.webhook_deliveries')).map(
        (d) => [d.id, d.event_id],
      ),
    );
    expect((await jobs()).flat().map((id) => eventOf.get(id))).toEqual([
      ...ids('a', 100),
      ...ids('b', 100),
      ...ids('c', 100),
    ]);
  });

  it('a row larger than the limit leaves whole; a full page of rows says more may wait', async () => {
    await fill([ids('a', 30)]);
    expect(await drain(5)).toEqual({ drained: 30, more: false, jobs: 3 });
    await fill(['b1', 'b2', 'b3']);
    expect(await drain(2)).toEqual({ drained: 2, more: true, jobs: 1 });
    expect(await drain(2)).toEqual({ drained: 1, more: false, jobs: 1 });
    expect((await jobs()).flat()).toEqual([...ids('a', 30), 'b1', 'b2', 'b3']);
  });
});
