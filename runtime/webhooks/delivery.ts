/**
 * Delivery attempts (docs/api.md §8.3, §8.4): claim the
 * deliveries with a lease so that one worker sends each, consult each endpoint's circuit, POST the
 * signed payloads with undici, then record the outcomes (a failure also queues its next attempt in
 * the same statement).
 */
import { createHmac } from 'node:crypto';
import { Agent, request } from 'undici';
import type { Config } from '../config/index.ts';
import type { Database } from '../db/index.ts';
import { metrics } from '../observability/index.ts';
import type { SecretBox } from '../secrets/index.ts';
import { enqueueSql, queueDeliveries } from './queue.ts';
import { checkedLookup, checkLiteralHost, TargetRefused } from './targets.ts';

type WebhookSettings = Config['webhooks'];

interface Claimed {
  id: string;
  attempts: number;
  webhook_id: string;
  url: string;
  endpoint: string;
  secret: string;
  secret_version: Date;
  select_fields: string[] | null;
  project_id: string;
  environment: string;
  table_name: string;
  event_id: string;
  operation: string;
  record: string;
  changed_fields: string[];
  event_at: Date;
  open_until: Date | null;
  now: Date;
}

/** Margin of the lease over the attempt's timeout: a lease that ran out means its worker died. */
export const LEASE_MARGIN_MS = 5_000;

/** How soon a delivery that found another attempt trying a cooled-down circuit looks again. */
const TRIAL_RECHECK_MS = 1_000;

export interface AttemptOutcome {
  ok: boolean;
  httpStatus: number | null;
  error: string | null;
}

/** The exact bytes a receiver gets: the payload of docs/api.md §8.2, `record` and `data` trimmed to `select`. */
export function eventBody(
  c: Pick<
    Claimed,
    | 'event_id'
    | 'event_at'
    | 'project_id'
    | 'environment'
    | 'table_name'
    | 'operation'
    | 'record'
    | 'changed_fields'
    | 'select_fields'
  >,
): string {
  let record = JSON.parse(c.record) as Record<string, unknown>;
  if (c.select_fields) {
    const keep = new Set(c.select_fields);
    record = Object.fromEntries(Object.entries(record).filter(([k]) => keep.has(k)));
  }
  return JSON.stringify({
    id: c.event_id,
    timestamp: c.event_at.toISOString(),
    project_id: c.project_id,
    environment: c.environment,
    table: c.table_name,
    event: c.operation,
    record,
    data: record,
    changed_fields: c.changed_fields,
  });
}

export function signature(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

const CLAIM = `
  WITH d AS (
    SELECT d.id FROM svcgen.webhook_deliveries d JOIN svcgen.webhooks w ON w.id = d.webhook_id
    WHERE d.id = ANY ($1::text[]) AND w.active AND d.status IN ('pending', 'retrying', 'deferred')
      AND (d.lease_until IS NULL OR d.lease_until < now())
    FOR UPDATE OF d SKIP LOCKED)
  UPDATE svcgen.webhook_deliveries x SET lease_until = now() + make_interval(secs => $2::float8 / 1000)
  FROM d, svcgen.webhooks w, svcgen.webhook_events e
  WHERE x.id = d.id AND w.id = x.webhook_id AND e.id = x.event_id
  RETURNING x.id, x.attempts, w.id AS webhook_id, w.url, w.endpoint, w.secret, w.updated_at AS secret_version, w.select_fields,
    w.project_id, w.environment, w.table_name, e.id AS event_id, e.operation, e.record::text AS record, e.changed_fields,
    e.created_at AS event_at,
    (SELECT open_until FROM svcgen.webhook_circuits c WHERE c.environment = w.environment AND c.endpoint = w.endpoint) AS open_until,
    now() AS now`;

/** While a circuit is open the delivery waits (`deferred`), spending no attempt, until `until`. */
const DEFER = `
  WITH d AS (UPDATE svcgen.webhook_deliveries SET status = 'deferred', lease_until = NULL, next_attempt_at = $2, updated_at = now()
    WHERE id = $1 RETURNING id)
  ${enqueueSql('ARRAY(SELECT id FROM d)', '$2::timestamptz')}`;

/** After an open circuit's cooldown, one attempt at a time is the trial that closes or reopens it. */
const CLAIM_TRIAL = `
  UPDATE svcgen.webhook_circuits SET trial_until = now() + make_interval(secs => $3::float8 / 1000)
  WHERE environment = $1 AND endpoint = $2 AND open_until <= now() AND (trial_until IS NULL OR trial_until < now())
  RETURNING 1`;

/** Successes of a batch in one statement: `$1` ids, `$2` statuses, `$3` environments, `$4` endpoints. */
const SUCCEEDED = `
  WITH done AS (SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[]) AS t(id, http_status, environment, endpoint)),
    d AS (UPDATE svcgen.webhook_deliveries x SET status = 'delivered', http_status = done.http_status, attempts = x.attempts + 1,
        last_error = NULL, lease_until = NULL, updated_at = now()
      FROM done WHERE x.id = done.id RETURNING x.id),
    closed AS (UPDATE svcgen.webhook_circuits c SET consecutive_failures = 0, open_until = NULL, trial_until = NULL
      FROM (SELECT c2.environment, c2.endpoint, c2.open_until FROM svcgen.webhook_circuits c2
          WHERE (c2.environment, c2.endpoint) IN (SELECT environment, endpoint FROM done)
            AND (c2.consecutive_failures > 0 OR c2.open_until IS NOT NULL)
          FOR UPDATE OF c2) was
      WHERE c.environment = was.environment AND c.endpoint = was.endpoint
      RETURNING was.environment, was.endpoint, was.open_until AS was_open_until),
    -- A circuit that closes wakes the deliveries that were waiting on it (these ones are done).
    -- (The EXISTS is a one-time test: when no circuit closed, as almost always, nothing is scanned.)
    woken AS (UPDATE svcgen.webhook_deliveries x SET next_attempt_at = now(), updated_at = now()
      FROM svcgen.webhooks w
      WHERE EXISTS (SELECT 1 FROM closed WHERE was_open_until IS NOT NULL)
        AND (w.environment, w.endpoint) IN (SELECT environment, endpoint FROM closed WHERE was_open_until IS NOT NULL)
        AND x.webhook_id = w.id AND x.status = 'deferred' AND x.id <> ALL ($1::text[])
      RETURNING x.id)
  ${enqueueSql('ARRAY(SELECT id FROM woken)')}`;

const FAILED = `
  WITH d AS (UPDATE svcgen.webhook_deliveries SET attempts = attempts + 1, http_status = $2, last_error = $3, lease_until = NULL,
      status = CASE WHEN attempts + 1 >= $4 THEN 'dead_letter' ELSE 'retrying' END,
      next_attempt_at = now() + make_interval(secs => $5::float8 / 1000), updated_at = now()
      WHERE id = $1 RETURNING id, status, next_attempt_at),
    circuit AS (INSERT INTO svcgen.webhook_circuits AS c (environment, endpoint, consecutive_failures, open_until)
      SELECT $6, $7, 1, CASE WHEN $8::int <= 1 THEN now() + make_interval(secs => $9::float8 / 1000) END WHERE $10::boolean
      ON CONFLICT (environment, endpoint) DO UPDATE SET
        consecutive_failures = c.consecutive_failures + 1,
        open_until = CASE WHEN c.trial_until IS NOT NULL OR c.consecutive_failures + 1 >= $8::int
          THEN now() + make_interval(secs => $9::float8 / 1000) ELSE c.open_until END,
        trial_until = NULL
      RETURNING 1),
    queued AS (${enqueueSql(`ARRAY(SELECT id FROM d WHERE status = 'retrying')`, `(SELECT next_attempt_at FROM d)`)})
  SELECT (SELECT status FROM d) AS status, (SELECT count(*) FROM circuit), (SELECT missed FROM queued) AS missed`;

export class DeliveryAgent {
  private readonly agent: Agent;
  private readonly secrets = new Map<string, { version: number; secret: string }>();

  constructor(
    private readonly db: Database,
    private readonly box: SecretBox,
    private readonly settings: WebhookSettings,
  ) {
    this.agent = new Agent({
      connect: settings.allowPrivateTargets ? {} : { lookup: checkedLookup as never },
      keepAliveTimeout: 4_000,
      connections: 64,
    });
  }

  private secretOf(c: Claimed): string {
    const cached = this.secrets.get(c.webhook_id);
    if (cached && cached.version === c.secret_version.getTime()) return cached.secret;
    const secret = this.box.unseal(c.secret);
    this.secrets.set(c.webhook_id, { version: c.secret_version.getTime(), secret });
    return secret;
  }

  /** The graphile-worker task body for one delivery id. */
  /**
   * The graphile-worker task body: attempts for the deliveries `ids` (a drained batch of first
   * attempts, or one delivery's next attempt), claimed in one statement, sent concurrently, their
   * successes recorded in one statement.
   */
  async deliver(ids: readonly string[]): Promise<void> {
    const leaseMs = this.settings.timeoutMs + LEASE_MARGIN_MS;
    // Deliveries already finished, paused, removed, or being sent by another worker are not claimed.
    const claimed = await this.db.query<Claimed>(CLAIM, [ids, leaseMs]);
    const attempted = await Promise.all(
      claimed.map(async (c) =>
        (await this.mayAttempt(c, leaseMs)) ? { c, outcome: await this.attempt(c) } : undefined,
      ),
    );
    const succeeded = attempted.filter((a): a is { c: Claimed; outcome: AttemptOutcome } => a?.outcome.ok === true);
    const failed = attempted.filter(
      (a): a is { c: Claimed; outcome: AttemptOutcome } => a !== undefined && !a.outcome.ok,
    );
    await Promise.all([
      succeeded.length
        ? queueDeliveries(this.db, SUCCEEDED, [
            succeeded.map((a) => a.c.id),
            succeeded.map((a) => a.outcome.httpStatus),
            succeeded.map((a) => a.c.environment),
            succeeded.map((a) => a.c.endpoint),
          ])
        : undefined,
      ...failed.map(({ c, outcome }) => this.recordFailure(c, outcome)),
    ]);
    metrics.webhookOutcome('delivered', succeeded.length);
  }

  /** Waits (`deferred`) until `until` without spending an attempt. */
  private async defer(c: Claimed, until: Date): Promise<void> {
    await queueDeliveries(this.db, DEFER, [c.id, until]);
    metrics.webhookOutcome('deferred');
  }

  /** Consults the endpoint's circuit: closed → attempt; open → defer; cooled down → one trial at a time. */
  private async mayAttempt(c: Claimed, leaseMs: number): Promise<boolean> {
    if (!c.open_until) return true;
    if (c.open_until > c.now) {
      await this.defer(c, c.open_until);
      return false;
    }
    if ((await this.db.query(CLAIM_TRIAL, [c.environment, c.endpoint, leaseMs])).length > 0) return true;
    // Another attempt is the trial: look again shortly (a success also wakes the waiting ones, but
    // this delivery may be between its claim and this deferral when that happens).
    await this.defer(c, new Date(c.now.getTime() + TRIAL_RECHECK_MS));
    return false;
  }

  private async recordFailure(c: Claimed, outcome: AttemptOutcome): Promise<void> {
    const delays = this.settings.retryDelaysMs;
    const nextDelay = delays[c.attempts + 1] ?? 0;
    // A target refused by the address policy says nothing about the endpoint's health.
    const countsForCircuit = outcome.error === null || !outcome.error.startsWith('target refused');
    const row = await queueDeliveries<{ status: string | null }>(this.db, FAILED, [
      c.id,
      outcome.httpStatus,
      outcome.error,
      delays.length,
      nextDelay,
      c.environment,
      c.endpoint,
      this.settings.circuit.failureThreshold,
      this.settings.circuit.cooldownMs,
      countsForCircuit,
    ]);
    if (row?.status === 'dead_letter' || row?.status === 'retrying') metrics.webhookOutcome(row.status);
  }

  private async attempt(c: Claimed): Promise<AttemptOutcome> {
    const body = eventBody(c);
    const hex = signature(this.secretOf(c), body);
    try {
      const url = new URL(c.url);
      checkLiteralHost(url, this.settings);
      const response = await request(url, {
        method: 'POST',
        dispatcher: this.agent,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'svcgen-webhooks',
          'x-service-event': c.operation,
          'x-service-delivery': c.event_id,
          'x-service-signature': `sha256=${hex}`,
          'x-webhook-signature': hex,
        },
        body,
        signal: AbortSignal.timeout(this.settings.timeoutMs),
        headersTimeout: this.settings.timeoutMs,
        bodyTimeout: this.settings.timeoutMs,
      });
      await response.body.dump({ limit: 65_536 }).catch(() => {});
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      return { ok, httpStatus: response.statusCode, error: ok ? null : `the receiver answered ${response.statusCode}` };
    } catch (error) {
      return { ok: false, httpStatus: null, error: describeFailure(error, this.settings.timeoutMs) };
    }
  }

  async close(): Promise<void> {
    await this.agent.close().catch(() => {});
  }
}

function describeFailure(error: unknown, timeoutMs: number): string {
  if (error instanceof TargetRefused) return error.message;
  const e = error as { name?: string; code?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e.cause instanceof TargetRefused) return e.cause.message;
  if (
    e.name === 'TimeoutError' ||
    e.name === 'AbortError' ||
    e.code === 'UND_ERR_HEADERS_TIMEOUT' ||
    e.code === 'UND_ERR_BODY_TIMEOUT'
  ) {
    return `no answer within ${timeoutMs} ms`;
  }
  if (e.code === 'ETARGETREFUSED') return e.message ?? 'target refused';
  return `connection failed: ${e.code ?? e.cause?.code ?? e.message ?? String(error)}`;
}
