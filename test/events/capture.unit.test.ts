/**
 * The capture CTE of runtime/events/capture.ts and the read-back of runtime/events/outbox.ts,
 * without a database: what a data statement's capture asks of PostgreSQL, built from the plain
 * values the write compiler hands it (docs/architecture.md "Layers": events imports nothing from
 * the query layer).
 */
import { describe, expect, it } from 'vitest';
import type { Queryable } from '../../runtime/db/index.ts';
import { captureEvents, CHANGED_COLUMN, eventsById, type CaptureSite } from '../../runtime/events/index.ts';
import { Params } from '../../runtime/query/index.ts';

const site = (over: Partial<CaptureSite> = {}): CaptureSite => ({
  params: new Params(),
  environment: 'master',
  table: 'Order',
  operation: 'INSERT',
  alias: 't7',
  record: 'RECORD_OF(t7)',
  rows: 'w',
  changed: false,
  ...over,
});

describe('captureEvents', () => {
  const cases: [
    string,
    { given: Partial<CaptureSite>; want: { starts: string; contains: string[]; absent: string[] } },
  ][] = [
    [
      'an insert: one outbox row from the records of `rows`, no changed fields',
      {
        given: {},
        want: {
          starts: 'capture AS (INSERT INTO svcgen.webhook_event_outbox (event_ids, webhook_ids)',
          contains: [
            'SELECT array_agg(RECORD_OF(t7)) AS records, NULL::json[] AS changes',
            'FROM (SELECT t7.*, EXISTS (SELECT 1 FROM svcgen.live_interest l',
            ') AS "svcgen:live" FROM w t7) t7',
            'LATERAL svcgen.capture_events($2, $3, $4, r.records, r.changes, r.live) c',
            'AND s.active AND $4 = ANY (s.events)',
          ],
          absent: [CHANGED_COLUMN],
        },
      },
    ],
    [
      'an update: the changed fields of each row, in row order',
      {
        given: { operation: 'UPDATE', changed: true, rows: 'changed_rows' },
        want: {
          starts: 'capture AS (',
          contains: [`array_agg(to_json(t7."${CHANGED_COLUMN}")) AS changes`, 'FROM changed_rows t7'],
          absent: ['NULL::json[]'],
        },
      },
    ],
    [
      'a second capture in one statement: its own name',
      {
        given: { operation: 'DELETE', name: 'capture_t3', table: '_files' },
        want: { starts: 'capture_t3 AS (', contains: ['svcgen.capture_events($2, $3, $4'], absent: [] },
      },
    ],
  ];
  it.each(cases)('%s', (_name, { given, want }) => {
    const params = new Params();
    params.add('earlier');
    const { ctes } = captureEvents(site({ ...given, params }));
    expect(ctes).toHaveLength(1);
    const sql = ctes[0]!;
    expect(sql.startsWith(want.starts)).toBe(true);
    for (const part of want.contains) expect(sql).toContain(part);
    for (const part of want.absent) expect(sql).not.toContain(part);
    // Values travel as parameters, after the statement's own, never as SQL text.
    expect(params.values).toEqual(['earlier', 'master', given.table ?? 'Order', given.operation ?? 'INSERT']);
  });
});

describe('eventsById', () => {
  it('reads the events by id, as readers receive them', async () => {
    const calls: unknown[][] = [];
    const db = {
      query: async (sql: string, values: unknown[]) => {
        calls.push([sql, values]);
        return [
          {
            id: 'evt_1',
            operation: 'UPDATE',
            record: { id: 1, total: 5 },
            changed_fields: ['total'],
            created_at: new Date('2026-01-02T03:04:05.006Z'),
          },
        ];
      },
    } as unknown as Queryable;
    const events = await eventsById(db, ['evt_1', 'evt_pruned']);
    expect(calls).toEqual([
      [
        'SELECT id, operation, record, changed_fields, created_at FROM svcgen.webhook_events WHERE id = ANY($1::text[])',
        [['evt_1', 'evt_pruned']],
      ],
    ]);
    expect([...events]).toEqual([
      [
        'evt_1',
        {
          id: 'evt_1',
          operation: 'UPDATE',
          record: { id: 1, total: 5 },
          changedFields: ['total'],
          timestamp: '2026-01-02T03:04:05.006Z',
        },
      ],
    ]);
  });
});
