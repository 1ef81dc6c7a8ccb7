// The request line writer (runtime/observability/logger.ts requestLineWriter) writes what pino's
// `logger.info(entry, 'request')` writes, byte for byte.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger, requestLineWriter } from '../../runtime/observability/index.ts';

function capture(level: 'info' | 'warn' = 'info') {
  const lines: string[] = [];
  const logger = createLogger({ format: 'json', level, destination: { write: (line: string) => lines.push(line) } });
  return { logger, lines };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('requestLineWriter', () => {
  const cases: Array<[string, Parameters<NonNullable<ReturnType<typeof requestLineWriter>>>]> = [
    ['a whole entry', ['req-1', 'GET', '/gw/api/rest/Order/42', 200, 1.3, 'key_abc', undefined]],
    [
      'no caller, aborted',
      ['3f0c2a5e-1b7d-4c1e-9a8b-2d3e4f5a6b7c', 'POST', '/gw/api/rest/Order', 201, 12, undefined, true],
    ],
    [
      'quotes, backslashes, control and non-ASCII characters',
      ['x', 'GET', '/a"b\\c\u0001d/é€', 404, 0.1, 'user:"q"', undefined],
    ],
    ['a long path', ['x', 'DELETE', `/${'p'.repeat(150)}"`, 204, 1000.5, 'user:u', undefined]],
    ['no id or method', [undefined, undefined, '/', 400, 0, undefined, undefined]],
  ];
  for (const [name, args] of cases) {
    it(`writes pino's line: ${name}`, () => {
      vi.useFakeTimers({ now: Date.UTC(2026, 10, 27, 1, 2, 3, 456) });
      const { logger, lines } = capture();
      const [reqId, method, path, status, durationMs, caller, aborted] = args;
      logger.info({ reqId, method, path, status, durationMs, caller, aborted }, 'request');
      requestLineWriter(logger)!(...args);
      expect(lines).toHaveLength(2);
      expect(lines[1]).toBe(lines[0]);
      expect(JSON.parse(lines[1]!)).toMatchObject({ level: 'info', msg: 'request', path });
    });
  }

  it('writes nothing once info is off, and exists only for JSON loggers made by createLogger', () => {
    const { logger, lines } = capture('warn');
    requestLineWriter(logger)!('x', 'GET', '/', 200, 1, undefined, undefined);
    expect(lines).toEqual([]);
    expect(requestLineWriter(createLogger({ format: 'pretty', level: 'info', destination: { write() {} } }))).toBe(
      undefined,
    );
    expect(requestLineWriter(logger.child({ a: 1 }))).toBe(undefined);
  });
});
