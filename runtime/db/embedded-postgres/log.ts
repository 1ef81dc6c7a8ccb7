// postgres.log: our status lines, and reading back what PostgreSQL wrote there
import fs from 'node:fs';
import { LOG_ROTATE_BYTES } from './limits.ts';

export function makeLogger(logPath: string, log?: (line: string) => void): (line: string) => void {
  return (line) => {
    appendLog(logPath, line);
    log?.(line);
  };
}

export function appendLog(logPath: string, text: string): void {
  if (!text) return;
  const stamp = new Date().toISOString();
  const body = text
    .split('\n')
    .map((l) => `${stamp} [svcgen] ${l}`)
    .join('\n');
  try {
    fs.appendFileSync(logPath, `${body}\n`, { mode: 0o640 });
  } catch {
    /* logging must never break startup */
  }
}

export function rotateLogIfLarge(logPath: string): void {
  if (fileSize(logPath) > LOG_ROTATE_BYTES) {
    try {
      fs.renameSync(logPath, `${logPath}.1`);
    } catch {
      /* ignore */
    }
  }
}

export function fileSize(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}

export function readFrom(file: string, offset: number): string {
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      const buf = Buffer.alloc(Math.max(0, size - offset));
      fs.readSync(fd, buf, 0, buf.length, offset);
      return buf.toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return '';
  }
}

/** Hand the server's startup lines (already in postgres.log) to the caller's logger. */
export function forwardLog(logPath: string, offset: number, log: ((line: string) => void) | undefined): void {
  if (!log) return;
  for (const line of readFrom(logPath, offset).trimEnd().split('\n')) if (line) log(line);
}

export function logTail(logPath: string, lines = 15): string {
  const size = fileSize(logPath);
  const text = readFrom(logPath, Math.max(0, size - 8192))
    .trimEnd()
    .split('\n')
    .slice(-lines)
    .join('\n');
  return text ? `\nLast lines of ${logPath}:\n${text}` : '';
}
