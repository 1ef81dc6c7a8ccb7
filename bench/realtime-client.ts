/**
 * A load-generator process of `npm run bench:realtime` (./realtime.ts forks a few): holds many
 * WebSocket subscribers with `ws` speaking graphql-transport-ws by hand (no client library per
 * socket, to keep the generator light), and records when each change arrives. Driven over IPC:
 *
 *   open    { url, params, queries, count }  opens `count` sockets, each with one subscription
 *           (queries[i % queries.length]), 50 handshakes in flight, a refused one tried up to 3
 *           times; answers { opened, failed, retried, error? }
 *   reset   forgets the changes received so far
 *   collect answers { subscribers, received, duplicates, closed, receipts } where receipts is
 *           [orderId, receivedAtMs, ...] (receivedAtMs on the wall clock, sub-millisecond) for every
 *           change whose record has an id, and duplicates counts event ids a subscriber got twice
 *   close   closes every socket; answers { closed }
 */
import WebSocket from 'ws';

interface Subscriber {
  socket: WebSocket;
  seen: Set<string>;
  closedWith?: number;
}

const IN_FLIGHT = 50;
/** A handshake refused (a 408 when the loaded machine answers late) is tried again, as a client would reconnect. */
const ATTEMPTS = 3;
const subscribers: Subscriber[] = [];
let receipts: number[] = [];
let duplicates = 0;

const now = () => performance.timeOrigin + performance.now();
const reply = (message: unknown) => process.send!(message);

function openOne(url: string, params: Record<string, string>, query: string): Promise<Subscriber> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, 'graphql-transport-ws', { perMessageDeflate: false });
    const sub: Subscriber = { socket, seen: new Set() };
    let acked = false;
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: params })));
    socket.on('message', (data) => {
      const text = data.toString();
      const message = JSON.parse(text) as { type: string; id?: string; payload?: any };
      if (message.type === 'connection_ack') {
        acked = true;
        socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query } }));
        resolve(sub);
      } else if (message.type === 'next') {
        const at = now();
        const data = message.payload?.data;
        const change = data && (Object.values(data)[0] as { id?: string; record?: { id?: unknown } } | undefined);
        if (!change?.id) return;
        if (sub.seen.has(change.id)) duplicates++;
        else sub.seen.add(change.id);
        if (typeof change.record?.id === 'number') receipts.push(change.record.id, at);
      } else if (message.type === 'ping') socket.send(JSON.stringify({ type: 'pong' }));
      else if (message.type === 'error') console.error(`[realtime-client] subscription error: ${text.slice(0, 300)}`);
    });
    socket.on('close', (code, reason) => {
      sub.closedWith = code;
      if (!acked) reject(new Error(`closed ${code} before connection_ack: ${reason.toString()}`));
    });
    socket.on('error', (error) => {
      if (!acked) reject(error);
    });
  });
}

async function open(url: string, params: Record<string, string>, queries: string[], count: number) {
  let next = 0;
  let failed = 0;
  let retried = 0;
  let error: string | undefined;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      for (let attempt = 1; ; attempt++) {
        try {
          subscribers.push(await openOne(url, params, queries[i % queries.length]!));
          break;
        } catch (e) {
          if (attempt < ATTEMPTS) {
            retried++;
            continue;
          }
          failed++;
          error ??= (e as Error).message;
          break;
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, count) }, worker));
  return { opened: count - failed, failed, retried, error };
}

async function closeAll() {
  const closing = subscribers.splice(0).map(
    (sub) =>
      new Promise<void>((resolve) => {
        if (sub.socket.readyState === WebSocket.CLOSED) return resolve();
        sub.socket.once('close', () => resolve());
        sub.socket.close(1000);
      }),
  );
  await Promise.all(closing);
  return { closed: closing.length };
}

process.on('message', async (message: { type: string; [key: string]: any }) => {
  switch (message.type) {
    case 'open':
      reply({ type: 'opened', ...(await open(message.url, message.params, message.queries, message.count)) });
      break;
    case 'reset':
      receipts = [];
      duplicates = 0;
      for (const sub of subscribers) sub.seen.clear();
      reply({ type: 'reset' });
      break;
    case 'collect':
      reply({
        type: 'collected',
        subscribers: subscribers.length,
        received: subscribers.reduce((n, s) => n + s.seen.size, 0),
        perSubscriber: subscribers.map((s) => s.seen.size),
        duplicates,
        closed: subscribers.filter((s) => s.closedWith !== undefined).map((s) => s.closedWith),
        receipts,
      });
      break;
    case 'close':
      reply({ type: 'closed', ...(await closeAll()) });
      break;
    case 'exit':
      await closeAll();
      process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
reply({ type: 'ready' });
