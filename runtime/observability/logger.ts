/**
 * The one logger: pino, writing JSON lines to stdout. Lines are batched: they go out in one write
 * once LOG_BATCH_BYTES have gathered or, when traffic is low, at the next periodic flush (every
 * LOG_FLUSH_INTERVAL_MS; one that finds a write under way leaves the rest to the next). The lines
 * gather in an array (LineBatch) and reach sonic-boom, pino's writer, one batch at a time:
 * sonic-boom's own `minLength` appends each line to one growing string and measures that
 * string's UTF-8 length on every line, which copies the whole pending batch per request line
 * (bench/RESULTS.md "CPU per request").
 *
 * How a batch is written depends on what stdout is (stdoutWrites), as node does for
 * process.stdout: a pipe or a socket (a container runtime, journald) is written asynchronously, so
 * a reader that falls behind never holds up a request; a file, a terminal or /dev/null is written
 * at once. A write to a file is a copy into the page cache and never waits for a reader, where the
 * asynchronous write went through libuv's thread pool and cost a request some 10 µs of CPU at
 * saturation in thread hand-offs (docs/deployment.md "Observability").
 *
 * The flush timer is unref'd, so it keeps no process alive. Nothing logged is lost on the way out:
 * a server's close ends with flushLogger and flushLoggerSync, and on process exit lines still
 * gathered are written with sonic-boom's `flushSync()`. `pretty` turns each line into a short
 * readable one for a terminal; it costs a JSON.parse per line, which only matters under load,
 * where stdout is rarely a TTY.
 */
import fs from 'node:fs';
import pino from 'pino';
import type { RequestLineWriter } from '../http/index.ts';

export type { RequestLineWriter };

export type Logger = pino.Logger;
type DestinationStream = pino.DestinationStream;
export type LogFormat = 'json' | 'pretty';
export type LogLevel = 'debug' | 'info' | 'warn';

/** Bytes gathered before a write: some 35 request lines. */
export const LOG_BATCH_BYTES = 8192;
/** The longest a logged line waits for its batch (docs/deployment.md "Observability"). */
export const LOG_FLUSH_INTERVAL_MS = 1000;

export interface LoggerOptions {
  format: LogFormat;
  level: LogLevel;
  /** Where lines go (tests); stdout when absent. */
  destination?: DestinationStream;
}

/** JSON on a pipe or file (what collectors read), a readable line on a terminal. */
export function defaultLogFormat(stream: { isTTY?: boolean } = process.stdout): LogFormat {
  return stream.isTTY ? 'pretty' : 'json';
}

/**
 * pino's isoTime, formatted once per millisecond: under load many request lines share one, and
 * Date#toISOString is a sizeable part of a line's cost (docs/deployment.md "Observability").
 */
let lastMs = -1;
let lastTime = '';
function isoTimeOncePerMs(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    lastTime = `,"time":"${new Date(now).toISOString()}"`;
  }
  return lastTime;
}

interface Flushable {
  flush(cb: (error?: Error) => void): void;
  flushSync(): void;
  readonly destroyed?: boolean;
}

/**
 * Request lines gathered in an array, handed to sonic-boom (started with `minLength: 0`: it writes
 * what it is given at once, or after the write under way) as one string per LOG_BATCH_BYTES, or
 * at the periodic flush.
 */
class LineBatch implements DestinationStream, Flushable {
  private lines: string[] = [];
  private length = 0;
  /** Armed by the first line of a batch: no line waits longer than LOG_FLUSH_INTERVAL_MS. */
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly out: Flushable & { write(chunk: string): boolean }) {}

  get destroyed(): boolean {
    return this.out.destroyed === true;
  }

  write(line: string): boolean {
    if (this.lines.length === 0) {
      this.timer = setTimeout(() => this.handOver(), LOG_FLUSH_INTERVAL_MS);
      this.timer.unref();
      pendingBatches.add(this);
    }
    this.lines.push(line);
    this.length += line.length;
    if (this.length >= LOG_BATCH_BYTES) this.handOver();
    return true;
  }

  /** Gives the gathered lines to sonic-boom as one string. */
  handOver(): void {
    if (this.lines.length === 0) return;
    clearTimeout(this.timer);
    pendingBatches.delete(this);
    const text = this.lines.length === 1 ? this.lines[0]! : this.lines.join('');
    this.lines = [];
    this.length = 0;
    if (!this.out.destroyed) this.out.write(text);
  }

  flush(cb: (error?: Error) => void): void {
    this.handOver();
    this.out.flush(cb);
  }

  flushSync(): void {
    this.handOver();
    this.out.flushSync();
  }
}

// On exit, lines still gathered go to sonic-boom and are written at once (pino's own exit hook
// flushes sonic-boom, but may run before this one).
const pendingBatches = new Set<LineBatch>();
process.once('exit', () => {
  for (const batch of pendingBatches) {
    try {
      batch.flushSync();
    } catch {
      // stdout is gone: nothing more can reach it
    }
  }
});

/** The batching streams, by the logger writing to them. */
const batched = new WeakMap<Logger, Flushable>();

/**
 * `async` for a pipe or a socket, `sync` for anything else (a file, a terminal, /dev/null): how
 * node's process.stdout writes to each (docs/deployment.md "Observability").
 */
export function stdoutWrites(fd = 1): 'sync' | 'async' {
  try {
    const stat = fs.fstatSync(fd);
    return stat.isFIFO() || stat.isSocket() ? 'async' : 'sync';
  } catch {
    return 'async';
  }
}

const requestLineWriters = new WeakMap<Logger, RequestLineWriter>();

/**
 * The request line writer of a JSON logger made by createLogger, undefined for any other logger.
 * A request line is the one line every request writes, and pino's generic serializer (a loop over
 * the entry's keys, each key and value escaped and concatenated on its own) was the larger part of
 * what the request log cost a request: GET /Order/<id> at saturation ran at 87 % of `warn`'s
 * throughput with it, 95 % with this (A/B of one build, 8 alternating rounds). Its values are
 * strings that need no escaping but quotes, backslashes and control characters, where
 * JSON.stringify writes what pino writes (test/server/request-line.unit.test.ts holds it to
 * pino's bytes).
 */
export function requestLineWriter(logger: Logger): RequestLineWriter | undefined {
  return requestLineWriters.get(logger);
}

function jsonLineWriter(logger: Logger, out: DestinationStream): RequestLineWriter {
  const pid = `,"pid":${process.pid}`;
  const info = pino.levels.values.info!;
  return (reqId, method, path, status, durationMs, caller, aborted) => {
    if (logger.levelVal > info) return;
    out.write(
      `{"level":"info"${isoTimeOncePerMs()}${pid}${reqId === undefined ? '' : `,"reqId":${JSON.stringify(reqId)}`}` +
        `${method === undefined ? '' : `,"method":${JSON.stringify(method)}`},"path":${JSON.stringify(path)}` +
        `,"status":${status},"durationMs":${durationMs}${caller === undefined ? '' : `,"caller":${JSON.stringify(caller)}`}` +
        `${aborted ? ',"aborted":true' : ''},"msg":"request"}\n`,
    );
  };
}

export function createLogger(options: LoggerOptions): Logger {
  const stdout = options.destination
    ? undefined
    : new LineBatch(pino.destination({ dest: 1, sync: stdoutWrites() === 'sync', minLength: 0 }));
  const out = options.destination ?? stdout!;
  const logger = pino(
    {
      level: options.level,
      base: { pid: process.pid },
      timestamp: isoTimeOncePerMs,
      formatters: { level: (label) => ({ level: label }) },
    },
    options.format === 'pretty' ? prettyLines(out) : out,
  );
  if (stdout) batched.set(logger, stdout);
  if (options.format === 'json') requestLineWriters.set(logger, jsonLineWriter(logger, out));
  return logger;
}

/** The longest flushLogger waits for stdout to take the lines (a reader that stopped reading). */
const FLUSH_WAIT_MS = 1000;

/**
 * Writes the lines logged so far without waiting for a batch, in order behind a write under way
 * (sonic-boom's `flush` with a callback; without one, a flush asked while a write is under way does
 * nothing, and the lines wait for the next periodic flush).
 * Resolves once they are written, or after FLUSH_WAIT_MS.
 */
export function flushLogger(logger: Logger): Promise<void> {
  const stream = batched.get(logger);
  if (!stream || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, FLUSH_WAIT_MS);
    timer.unref();
    try {
      stream.flush(() => {
        clearTimeout(timer);
        resolve();
      });
    } catch {
      clearTimeout(timer);
      resolve();
    }
  });
}

/**
 * Writes every line logged so far, before returning (the last step of stopping a server, after
 * flushLogger, and what pino's exit hook does). A pipe whose reader has gone (EPIPE) is given up
 * on, as pino does.
 */
export function flushLoggerSync(logger: Logger): void {
  const stream = batched.get(logger);
  if (!stream || stream.destroyed) return;
  try {
    stream.flushSync();
  } catch {
    // Destroyed or closed underneath us: nothing more can reach stdout.
  }
}

/** A logger that drops everything (a server started without one). */
export const silentLogger: Logger = pino({ level: 'silent' });

function prettyLines(out: DestinationStream): DestinationStream {
  return {
    write(line: string) {
      out.write(`${pretty(JSON.parse(line) as Record<string, unknown>)}\n`);
    },
  };
}

const SHOWN = new Set(['time', 'level', 'pid', 'msg', 'reqId', 'method', 'path', 'status', 'durationMs', 'caller']);

/** `12:00:01.234 GET /path 200 1.3 ms caller #reqId`, or `12:00:01.234 WARN message {extra fields}`. */
export function pretty(entry: Record<string, unknown>): string {
  const time = typeof entry.time === 'string' ? entry.time.slice(11, 23) : '';
  if (entry.msg === 'request') {
    const caller = entry.caller ? ` ${String(entry.caller)}` : '';
    return `${time} ${String(entry.method)} ${String(entry.path)} ${String(entry.status)} ${Number(entry.durationMs).toFixed(1)} ms${caller} #${String(entry.reqId)}`;
  }
  const rest = Object.fromEntries(Object.entries(entry).filter(([k]) => !SHOWN.has(k)));
  const reqId = entry.reqId ? ` #${String(entry.reqId)}` : '';
  return `${time} ${String(entry.level).toUpperCase()} ${String(entry.msg ?? '')}${reqId}${Object.keys(rest).length ? ` ${JSON.stringify(rest)}` : ''}`;
}
