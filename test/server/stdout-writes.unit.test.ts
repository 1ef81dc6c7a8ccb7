/**
 * How the request log writes to stdout, by what stdout is (runtime/observability/logger.ts,
 * docs/deployment.md "Observability"): asynchronously to a pipe or a socket, whose reader may fall
 * behind; at once to a file, a terminal or /dev/null.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stdoutWrites } from '../../runtime/observability/logger.ts';

const open: number[] = [];
afterEach(() => {
  for (const fd of open.splice(0)) fs.closeSync(fd);
});

describe('stdoutWrites', () => {
  it('a file and /dev/null are written at once', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcgen-stdout-'));
    try {
      const file = fs.openSync(path.join(dir, 'out.log'), 'w');
      open.push(file);
      expect(stdoutWrites(file)).toBe('sync');
      const devNull = fs.openSync('/dev/null', 'w');
      open.push(devNull);
      expect(stdoutWrites(devNull)).toBe('sync');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a pipe and a socket are written asynchronously', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcgen-stdout-'));
    try {
      const fifo = path.join(dir, 'fifo');
      execFileSync('mkfifo', [fifo]);
      // Read and write: opening a FIFO so does not wait for the other end (Linux).
      const pipe = fs.openSync(fifo, 'r+');
      open.push(pipe);
      expect(stdoutWrites(pipe)).toBe('async');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    try {
      expect(stdoutWrites((socket as unknown as { _handle: { fd: number } })._handle.fd)).toBe('async');
    } finally {
      socket.destroy();
      server.close();
    }
  });

  it('a closed descriptor is taken as a pipe: nothing waits on it', () => {
    expect(stdoutWrites(987_654)).toBe('async');
  });
});
