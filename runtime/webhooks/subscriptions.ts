/**
 * Webhook subscriptions (docs/api.md §8.1): the checks against the model and the target policy
 * that follow the request schema (runtime/model/wire/webhooks.ts), and the rows in svcgen.webhooks. The
 * secret is sealed (it must be read back to sign) and never leaves through the API.
 */
import { randomBytes } from 'node:crypto';
import type { z } from 'zod';
import type { Config } from '../config/index.ts';
import type { Queryable } from '../db/index.ts';
import type { FieldError } from '../http/index.ts';
import type { FieldSpec } from '../model/index.ts';
import type { subscriptionFields, webhookDelivery, webhookSubscription } from '../model/wire/index.ts';
import { announceSubscriptionChange } from '../events/index.ts';
import { filesCatalog, type Catalog, type CatalogTable } from '../query/index.ts';
import type { SecretBox } from '../secrets/index.ts';
import { enqueueSql, queueDeliveries } from './queue.ts';
import { urlProblems } from './targets.ts';

export type SubscriptionInput = z.output<typeof subscriptionFields>;

/** What the API answers for a subscription (runtime/model/wire/webhooks.ts). */
export type Subscription = z.output<typeof webhookSubscription>;

interface SubscriptionRow {
  id: string;
  project_id: string;
  environment: string;
  table_name: string;
  events: Subscription['events'];
  url: string;
  active: boolean;
  filter: Subscription['filter'];
  select_fields: string[] | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS =
  'id, project_id, environment, table_name, events, url, active, filter, select_fields, created_at, updated_at';

function toSubscription(row: SubscriptionRow): Subscription {
  return {
    id: row.id,
    projectId: row.project_id,
    environment: row.environment,
    table: row.table_name,
    events: row.events,
    url: row.url,
    active: row.active,
    filter: row.filter,
    select: row.select_fields,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** zod issues → the field errors of a 422 Problem. */
export function schemaErrors(error: z.ZodError): FieldError[] {
  return error.issues.flatMap((issue) => {
    if (issue.code === 'unrecognized_keys')
      return issue.keys.map((k) => ({ field: k, rule: 'unknown_field', message: `unknown field "${k}"` }));
    const field =
      issue.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i ? '.' : ''}${String(p)}`)).join('') || 'body';
    if (issue.code === 'invalid_type' && /received undefined/.test(issue.message))
      return [{ field, rule: 'required', message: `${field} is required` }];
    const rule = issue.code === 'custom' ? (issue.params as { rule?: unknown } | undefined)?.rule : undefined;
    return [{ field, rule: typeof rule === 'string' ? rule : issue.code, message: `${field}: ${issue.message}` }];
  });
}

/** An ISO 8601 date, or date and time with a zone (a time without one would be read in the server's zone). */
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/;

/**
 * A filter value as the event record writes it, so `record @> filter` compares like with like:
 * timestamps as the API's ISO form, BigInt as a string. Undefined when it can never match.
 */
function filterOperand(
  field: FieldSpec,
  value: string | number | boolean | null,
): string | number | boolean | null | undefined {
  if (value === null) return field.nullable ? null : undefined;
  switch (field.type) {
    case 'String':
      return typeof value === 'string' ? value : undefined;
    case 'Enum':
      return typeof value === 'string' && (field.enumValues ?? []).includes(value) ? value : undefined;
    case 'Boolean':
      return typeof value === 'boolean' ? value : undefined;
    case 'Int':
      return Number.isSafeInteger(value) ? value : undefined;
    case 'Float':
    case 'Decimal':
      return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
    case 'BigInt':
      return (typeof value === 'number' && Number.isSafeInteger(value)) ||
        (typeof value === 'string' && /^-?\d{1,19}$/.test(value))
        ? String(value)
        : undefined;
    case 'DateTime': {
      if (typeof value !== 'string' || !ISO_DATE_TIME.test(value)) return undefined;
      const time = Date.parse(value);
      return Number.isNaN(time) ? undefined : new Date(time).toISOString();
    }
    default:
      return undefined;
  }
}

let filesTables: Catalog | undefined;

/** Checks what the schema cannot (the model, the project, the target) and normalises the filter. */
export async function checkSubscription(
  input: SubscriptionInput,
  context: { catalog: Catalog; config: Config; projectId: string; environment: string },
): Promise<FieldError[]> {
  const errors: FieldError[] = [];
  if (input.projectId !== context.projectId) {
    errors.push({
      field: 'projectId',
      rule: 'equals',
      message: `projectId must be "${context.projectId}", the X-Project-Id of this request`,
    });
  }
  // File metadata (`_files`) publishes events like a table when storage has buckets (docs/storage.md).
  const files = Object.keys(context.config.storage.buckets).length > 0 ? (filesTables ??= filesCatalog()) : undefined;
  const table: CatalogTable | undefined = context.catalog.get(input.table) ?? files?.get(input.table);
  if (!table) {
    errors.push({
      field: 'table',
      rule: 'exists',
      message: `no table "${input.table}"; tables: ${[...context.catalog.names(), ...(files?.names() ?? [])].join(', ')}`,
    });
  } else {
    for (const [name, value] of Object.entries(input.filter ?? {})) {
      const field = table.fields.get(name);
      if (!field)
        errors.push({ field: `filter.${name}`, rule: 'exists', message: `${input.table} has no field "${name}"` });
      else if (field.list || field.type === 'Json' || field.type === 'Bytes') {
        errors.push({
          field: `filter.${name}`,
          rule: 'type',
          message: `filter compares single values; ${name} is a ${field.list ? 'list' : field.type} field`,
        });
      } else {
        const operand = filterOperand(field, value);
        if (operand === undefined)
          errors.push({
            field: `filter.${name}`,
            rule: 'type',
            message: `${JSON.stringify(value)} is not a possible value of ${input.table}.${name} (${field.type})`,
          });
        else input.filter![name] = operand;
      }
    }
    (input.select ?? []).forEach((name, i) => {
      if (!table.fields.has(name))
        errors.push({ field: `select[${i}]`, rule: 'exists', message: `${input.table} has no field "${name}"` });
    });
  }
  for (const message of await urlProblems(input.url, context.config.webhooks))
    errors.push({ field: 'url', rule: 'target', message });
  return errors;
}

export function newSubscriptionId(): string {
  return `wh_${randomBytes(12).toString('hex')}`;
}

export async function insertSubscription(
  db: Queryable,
  box: SecretBox,
  input: SubscriptionInput,
): Promise<Subscription> {
  const rows = await db.query<SubscriptionRow>(
    `INSERT INTO svcgen.webhooks (id, project_id, environment, table_name, events, url, endpoint, secret, active, filter, select_fields)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING ${COLUMNS}`,
    [
      newSubscriptionId(),
      input.projectId,
      input.environment,
      input.table,
      input.events,
      input.url,
      new URL(input.url).origin,
      box.seal(input.secret),
      input.active,
      input.filter === null ? null : JSON.stringify(input.filter),
      input.select,
    ],
  );
  await announceSubscriptionChange(db);
  return toSubscription(rows[0]!);
}

export async function listSubscriptions(
  db: Queryable,
  projectId: string,
  environment: string,
): Promise<Subscription[]> {
  const rows = await db.query<SubscriptionRow>(
    `SELECT ${COLUMNS} FROM svcgen.webhooks WHERE project_id = $1 AND environment = $2 ORDER BY created_at, id`,
    [projectId, environment],
  );
  return rows.map(toSubscription);
}

export async function findSubscription(
  db: Queryable,
  projectId: string,
  environment: string,
  id: string,
  forUpdate = false,
): Promise<Subscription | undefined> {
  const rows = await db.query<SubscriptionRow>(
    `SELECT ${COLUMNS} FROM svcgen.webhooks WHERE id = $1 AND project_id = $2 AND environment = $3${forUpdate ? ' FOR UPDATE' : ''}`,
    [id, projectId, environment],
  );
  return rows[0] ? toSubscription(rows[0]) : undefined;
}

/** Writes the merged subscription; `secret` only when the patch replaced it. Resuming requeues what waited. */
export async function updateSubscription(
  db: Queryable,
  box: SecretBox,
  before: Subscription,
  after: SubscriptionInput,
  secretChanged: boolean,
): Promise<Subscription> {
  const rows = await db.query<SubscriptionRow>(
    `UPDATE svcgen.webhooks SET table_name = $2, events = $3, url = $4, endpoint = $5, active = $6, filter = $7, select_fields = $8,
       secret = coalesce($9, secret), updated_at = now()
     WHERE id = $1 RETURNING ${COLUMNS}`,
    [
      before.id,
      after.table,
      after.events,
      after.url,
      new URL(after.url).origin,
      after.active,
      after.filter === null ? null : JSON.stringify(after.filter),
      after.select,
      secretChanged ? box.seal(after.secret) : null,
    ],
  );
  await announceSubscriptionChange(db);
  if (!before.active && after.active) {
    // Deliveries that waited while paused go on now (docs/api.md §8.4 "Pausing").
    await queueDeliveries(
      db,
      `WITH waiting AS (UPDATE svcgen.webhook_deliveries SET next_attempt_at = now(), updated_at = now()
         WHERE webhook_id = $1 AND status IN ('pending', 'retrying', 'deferred') RETURNING id)
       ${enqueueSql('ARRAY(SELECT id FROM waiting)')}`,
      [before.id],
    );
  }
  return toSubscription(rows[0]!);
}

export async function deleteSubscription(
  db: Queryable,
  projectId: string,
  environment: string,
  id: string,
): Promise<boolean> {
  const rows = await db.query(
    'DELETE FROM svcgen.webhooks WHERE id = $1 AND project_id = $2 AND environment = $3 RETURNING 1',
    [id, projectId, environment],
  );
  if (rows.length === 0) return false;
  await db.query('DELETE FROM svcgen.webhook_deliveries WHERE webhook_id = $1', [id]);
  await announceSubscriptionChange(db);
  return true;
}

export type DeliveryRecord = z.output<typeof webhookDelivery>;

/** A subscription's deliveries, newest first: the newest `limit`, or the one with `id`. */
export async function deliveries(
  db: Queryable,
  webhookId: string,
  which: { limit: number } | { id: string },
): Promise<DeliveryRecord[]> {
  const rows = await db.query<{
    id: string;
    event_id: string;
    operation: DeliveryRecord['event'];
    status: DeliveryRecord['status'];
    http_status: number | null;
    attempts: number;
    last_error: string | null;
    next_attempt_at: Date;
    created_at: Date;
    updated_at: Date;
  }>(
    `SELECT d.id, d.event_id, e.operation, d.status, d.http_status, d.attempts, d.last_error, d.next_attempt_at, d.created_at, d.updated_at
     FROM svcgen.webhook_deliveries d JOIN svcgen.webhook_events e ON e.id = d.event_id
     WHERE d.webhook_id = $1 AND ($2::text IS NULL OR d.id = $2) ORDER BY d.created_at DESC, d.id DESC LIMIT $3`,
    [webhookId, 'id' in which ? which.id : null, 'id' in which ? 1 : which.limit],
  );
  return rows.map((r) => ({
    id: r.id,
    eventId: r.event_id,
    event: r.operation,
    status: r.status,
    httpStatus: r.http_status,
    attempts: r.attempts,
    lastError: r.last_error,
    nextAttemptAt: ['pending', 'retrying', 'deferred'].includes(r.status) ? r.next_attempt_at.toISOString() : null,
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
  }));
}

/** Queues a finished delivery again with a fresh schedule and the same event id; false when there is none. */
export async function redeliver(
  db: Queryable,
  webhookId: string,
  deliveryId: string,
): Promise<'queued' | 'missing' | 'busy'> {
  const rows = await db.query<{ status: string }>(
    'SELECT status FROM svcgen.webhook_deliveries WHERE id = $1 AND webhook_id = $2 FOR UPDATE',
    [deliveryId, webhookId],
  );
  if (!rows[0]) return 'missing';
  if (rows[0].status !== 'dead_letter' && rows[0].status !== 'delivered') return 'busy';
  await queueDeliveries(
    db,
    `WITH again AS (UPDATE svcgen.webhook_deliveries SET status = 'pending', attempts = 0, http_status = NULL, last_error = NULL,
       next_attempt_at = now(), lease_until = NULL, updated_at = now() WHERE id = $1 RETURNING id)
     ${enqueueSql('ARRAY(SELECT id FROM again)')}`,
    [deliveryId],
  );
  return 'queued';
}
