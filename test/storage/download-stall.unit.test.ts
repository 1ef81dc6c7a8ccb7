/**
 * watchDownloadStall (runtime/storage/download-stall.ts; docs/storage.md "Downloading") on a bare
 * node:http server: which side a stall is blamed on, and a download that flows is never cut. The
 * whole download path on both backends is test/storage/download-stall.test.ts.
 */
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { watchDownloadStall, type StallSide } from '../../runtime/storage/download-stall.ts';

let server: Server;
afterEach(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** A server piping `source()` into each response under a 100 ms stall bound; what it reported, once the pipe settled. */
async function serve(source: () => Readable): Promise<{ port: number; settled: Promise<StallSide[]> }> {
  const stalls: StallSide[] = [];
  let done: (sides: StallSide[]) => void = () => {};
  const settled = new Promise<StallSide[]>((resolve) => (done = resolve));
  server = createServer((_req, res) => {
    const body = source();
    res.writeHead(200);
    const sent = pipeline(body, res).catch(() => {});
    const stop = watchDownloadStall(body, res, 100, (side) => stalls.push(side));
    void sent.finally(stop).then(() => done(stalls));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, settled };
}

describe('watchDownloadStall', () => {
  it('a store that sends nothing is cut and blamed on the store; the client sees its connection closed', async () => {
    const { port, settled } = await serve(() => new Readable({ read() {} }));
    const socket = connect(port, '127.0.0.1');
    socket.resume();
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((resolve) => socket.once('close', resolve));
    expect(await settled).toEqual(['store']);
  });

  it('a client that reads nothing of a large body is cut and blamed on the client', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const { port, settled } = await serve(() =>
      Readable.from(
        (function* () {
          for (let i = 0; i < 512; i++) yield chunk;
        })(),
      ),
    );
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => {});
    socket.pause();
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(await settled).toEqual(['client']);
    socket.destroy();
  });

  it('a body that flows to a reading client is never cut, however long it takes in all', async () => {
    let left = 20;
    // Each chunk comes well inside the bound (the next one when the last was taken), 20 in all.
    const { port, settled } = await serve(
      () =>
        new Readable({
          read() {
            setTimeout(() => this.push(left-- > 0 ? 'x'.repeat(1000) : null), 10);
          },
        }),
    );
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1').on('data', (d: string) => (text += d));
    socket.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    await new Promise((resolve) => socket.once('close', resolve));
    expect(await settled).toEqual([]);
    expect(text.endsWith(`${'x'.repeat(1000)}\r\n0\r\n\r\n`)).toBe(true);
  });
});
