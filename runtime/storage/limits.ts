/**
 * Upload limits (docs/storage.md "Limits and quotas"): bytes a caller stores a day, and each
 * bucket's quota of bytes and files. Both are checked before the body is read (nothing to do →
 * refused at once), cap the bytes read while the body streams (the upload is cut like the size
 * limit), and are settled in the transaction that inserts the metadata row, so that concurrent
 * uploads, in any number of processes, never pass them: the day's bytes with a conditional UPDATE
 * of the caller's row, the quota under a per-bucket advisory lock that serialises the
 * check-and-insert of the bucket's uploads (deletes need no lock: they only free room).
 */
import { createHash } from 'node:crypto';
import type { BucketConfig, Config } from '../config/index.ts';
import type { Queryable } from '../db/index.ts';
import { Problem } from '../http/index.ts';

/** The first key of the bucket-quota advisory locks ('svcq'); the second is a hash of environment and bucket. */
const QUOTA_LOCK_NAMESPACE = 0x73766371;

/** What an upload may still add: undefined where no limit applies. */
export interface Room {
  /** Bytes the caller may still store today. */
  readonly dailyBytes: number | undefined;
  /** Bytes left in the bucket's quota. */
  readonly quotaBytes: number | undefined;
}

/** Seconds until the next UTC midnight, when a day's bytes start again. */
export function secondsToMidnight(now = Date.now()): number {
  const day = 86_400_000;
  return Math.max(1, Math.ceil((day - (now % day)) / 1000));
}

/** 429 for the day's bytes: Retry-After and RateLimit-* say the budget (in bytes) and when it starts again. */
export function dailyBytesExceeded(limit: number, used: number, what: string): Problem {
  const reset = secondsToMidnight();
  return new Problem(
    'rate-limited',
    `each caller may store ${limit} bytes a day (UTC) and ${what}; ${Math.max(0, limit - used)} bytes are left today, the budget starts again in ${reset} s`,
    [],
    {
      'retry-after': String(reset),
      'ratelimit-limit': String(limit),
      'ratelimit-remaining': String(Math.max(0, limit - used)),
      'ratelimit-reset': String(reset),
    },
  );
}

function quotaExceeded(bucket: string, detail: string): Problem {
  return new Problem(
    'quota-exceeded',
    `bucket ${bucket} is full: ${detail}; delete files to make room, or raise the quota`,
  );
}

function quotaLockKey(environment: string, bucket: string): number {
  return createHash('sha256').update(`${environment}\u0000${bucket}`).digest().readInt32BE(0);
}

interface Usage {
  bytes: number;
  files: number;
}

async function bucketUsage(db: Queryable, environment: string, bucket: string): Promise<Usage> {
  const [row] = await db.query<Usage>(
    `SELECT coalesce(sum(size), 0)::float8 AS bytes, count(*)::int AS files
     FROM svcgen.files WHERE environment = $1 AND bucket = $2`,
    [environment, bucket],
  );
  return row!;
}

async function dailyUsed(db: Queryable, caller: string): Promise<number> {
  const [row] = await db.query<{ bytes: number }>(
    `SELECT bytes::float8 AS bytes FROM svcgen.file_usage WHERE caller = $1 AND day = (now() AT TIME ZONE 'UTC')::date`,
    [caller],
  );
  return row?.bytes ?? 0;
}

/** The name a caller's daily bytes are kept under: per project and environment, like the data API's limits. */
export function usageName(config: Config, environment: string, caller: string): string {
  return `${config.project.id}:${environment}:${caller}`;
}

/**
 * Before the body is read: the room the upload has, or the refusal when there is none (a full
 * day's budget → 429, a full bucket → 413). `declared` is the Content-Length of a raw body.
 */
export async function roomFor(
  db: Queryable,
  config: Config,
  settings: BucketConfig,
  at: { environment: string; bucket: string; caller: string },
  declared: number | undefined,
): Promise<Room> {
  const perDay = config.storage.limits.bytesPerDayPerCaller;
  let dailyBytes: number | undefined;
  if (perDay !== null) {
    const used = await dailyUsed(db, usageName(config, at.environment, at.caller));
    dailyBytes = perDay - used;
    if (dailyBytes <= 0 || (declared !== undefined && declared > dailyBytes))
      throw dailyBytesExceeded(perDay, used, 'this upload does not fit in what is left today');
  }
  let quotaBytes: number | undefined;
  if (settings.maxTotalBytes !== undefined || settings.maxFiles !== undefined) {
    const usage = await bucketUsage(db, at.environment, at.bucket);
    checkQuota(settings, at.bucket, usage, declared ?? 0);
    if (settings.maxTotalBytes !== undefined) quotaBytes = settings.maxTotalBytes - usage.bytes;
  }
  return { dailyBytes, quotaBytes };
}

function checkQuota(settings: BucketConfig, bucket: string, usage: Usage, size: number): void {
  if (settings.maxFiles !== undefined && usage.files + 1 > settings.maxFiles)
    throw quotaExceeded(bucket, `it holds ${usage.files} of its ${settings.maxFiles} files`);
  if (settings.maxTotalBytes !== undefined && usage.bytes + size > settings.maxTotalBytes)
    throw quotaExceeded(
      bucket,
      `${settings.maxTotalBytes - usage.bytes} of its ${settings.maxTotalBytes} bytes are free and the file has ${size > 0 ? size : 'more'}`,
    );
}

/** While the body streams: the Problem for passing `room`'s bytes at `size`, or undefined while it fits. */
export function overRoom(config: Config, bucket: string, room: Room, size: number): Problem | undefined {
  const perDay = config.storage.limits.bytesPerDayPerCaller;
  if (perDay !== null && room.dailyBytes !== undefined && size > room.dailyBytes)
    return dailyBytesExceeded(perDay, perDay - room.dailyBytes, 'this upload does not fit in what is left today');
  if (room.quotaBytes !== undefined && size > room.quotaBytes)
    return quotaExceeded(bucket, `${room.quotaBytes} bytes are free and the file has more`);
  return undefined;
}

/** Whether settle() has anything to do for an upload to this bucket (a quota or a daily budget is configured). */
export function settles(config: Config, settings: BucketConfig): boolean {
  return (
    settings.maxTotalBytes !== undefined ||
    settings.maxFiles !== undefined ||
    config.storage.limits.bytesPerDayPerCaller !== null
  );
}

/**
 * In the transaction that inserts the file's row: takes its bytes from the caller's day and checks
 * the bucket's quota with the bucket's other uploads held off until commit. Throws the refusal
 * (the transaction then rolls back: nothing is counted, nothing is kept).
 */
export async function settle(
  tx: Queryable,
  config: Config,
  settings: BucketConfig,
  at: { environment: string; bucket: string; caller: string },
  size: number,
): Promise<void> {
  if (settings.maxTotalBytes !== undefined || settings.maxFiles !== undefined) {
    await tx.query('SELECT pg_advisory_xact_lock($1, $2)', [
      QUOTA_LOCK_NAMESPACE,
      quotaLockKey(at.environment, at.bucket),
    ]);
    checkQuota(settings, at.bucket, await bucketUsage(tx, at.environment, at.bucket), size);
  }
  const perDay = config.storage.limits.bytesPerDayPerCaller;
  if (perDay === null) return;
  const name = usageName(config, at.environment, at.caller);
  if (size > perDay) throw dailyBytesExceeded(perDay, await dailyUsed(tx, name), 'this upload does not fit in it');
  const taken = await tx.query(
    `INSERT INTO svcgen.file_usage AS u (caller, day, bytes) VALUES ($1, (now() AT TIME ZONE 'UTC')::date, $2)
     ON CONFLICT (caller, day) DO UPDATE SET bytes = u.bytes + EXCLUDED.bytes WHERE u.bytes + EXCLUDED.bytes <= $3
     RETURNING 1`,
    [name, size, perDay],
  );
  if (taken.length === 0)
    throw dailyBytesExceeded(perDay, await dailyUsed(tx, name), 'this upload does not fit in what is left today');
}

/** Drops the days before yesterday (called now and then, off the request path). */
export async function pruneUsage(db: Queryable): Promise<void> {
  await db.query(`DELETE FROM svcgen.file_usage WHERE day < (now() AT TIME ZONE 'UTC')::date - 1`).catch(() => {});
}
