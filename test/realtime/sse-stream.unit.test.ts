// SseStream (runtime/realtime/sse.ts): how a Server-Sent Events subscription ends. A caller is
// admitted (and counted) before graphql-sse writes the stream's headers, so a close can arrive
// before the stream starts (roles changed, revocation, the server stopping); the client must still
// get the last event naming why, not a connection reset (docs/realtime.md "Lifecycle and limits").
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { SseStream } from '../../runtime/realtime/sse.ts';

let server: Server | undefined;
afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

/** Serves one request with `respond`, fetches it, and returns the status and the whole body. */
async function exchange(
  respond: (stream: SseStream, start: () => void) => void,
): Promise<{ status: number; body: string }> {
  server = createServer((_req, res) => {
    const stream = new SseStream(res);
    respond(stream, () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (!stream.started()) res.write(': started\n\n');
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  return { status: res.status, body: await res.text() };
}

const LAST_EVENT =
  'event: next\ndata: {"errors":[{"message":"your roles changed","extensions":{"code":"ROLES_CHANGED","closeCode":4403}}]}\n\nevent: complete\ndata:\n\n';

describe('SseStream', () => {
  it('a close before the stream starts is sent as its last event once it starts, then the stream ends', async () => {
    const { status, body } = await exchange((stream, start) => {
      stream.close(4403, 'your roles changed');
      setTimeout(start, 20);
    });
    expect(status).toBe(200);
    expect(body).toBe(LAST_EVENT);
  });

  it('a close after the start ends the stream with the same last event', async () => {
    const { body } = await exchange((stream, start) => {
      start();
      stream.close(4403, 'your roles changed');
    });
    expect(body).toBe(`: started\n\n${LAST_EVENT}`);
  });

  it('a second close changes nothing: the first reason is the one sent', async () => {
    const { body } = await exchange((stream, start) => {
      stream.close(4403, 'your roles changed');
      stream.close(1001, 'the server is stopping');
      start();
    });
    expect(body).toBe(LAST_EVENT);
  });
});
