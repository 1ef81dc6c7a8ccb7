/**
 * The one logger: pino, writing JSON lines to stdout through an asynchronous buffer (the request
 * path never waits on the write). `pretty` turns each line into a short readable one for a
 * terminal; it costs a JSON.parse per line, which only matters under load, where stdout is rarely a TTY.
 */
import pino from 'pino';

export type Logger = pino.Logger;
type DestinationStream = pino.DestinationStream;
export type LogFormat = 'json' | 'pretty';
export type LogLevel = 'debug' | 'info' | 'warn';

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

export function createLogger(options: LoggerOptions): Logger {
  const out = options.destination ?? pino.destination({ dest: 1, sync: false });
  return pino(
    {
      level: options.level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    options.format === 'pretty' ? prettyLines(out) : out,
  );
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
