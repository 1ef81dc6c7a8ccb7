/**
 * The baseline of `npm run bench:storage` (./storage.ts): node:http streaming a request body to a
 * file and a file to the response with node:stream's pipeline and fs, nothing else (no
 * credentials, no hashing, no size limit, no metadata, no rename into place).
 *
 *   PUT /files/<name>     body → <dir>/<name>; 201 `{"size":n}`
 *   GET /files/<name>     <dir>/<name> → body, with Content-Length; 404 when missing
 *   DELETE /files/<name>  204
 *
 * <dir> is BENCH_STORAGE_DIR; names are [a-z0-9.-]. Started by ./storage.ts through
 * ./children.ts (reports its port over IPC, ./child-harness.ts).
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { runChild } from './child-harness.ts';

const dir = process.env.BENCH_STORAGE_DIR;
if (!dir) throw new Error('BENCH_STORAGE_DIR is not set');

function answer(res: ServerResponse, status: number, body = ''): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const match = /^\/files\/([a-z0-9.-]+)$/.exec(req.url ?? '');
  if (!match) return answer(res, 404, '{"status":404}');
  const file = path.join(dir!, match[1]!);
  if (req.method === 'PUT') {
    await pipeline(req, createWriteStream(file));
    return answer(res, 201, `{"size":${(await stat(file)).size}}`);
  }
  if (req.method === 'DELETE') {
    await rm(file, { force: true });
    res.writeHead(204).end();
    return;
  }
  const info = await stat(file).catch(() => undefined);
  if (!info) return answer(res, 404, '{"status":404}');
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': info.size });
  await pipeline(createReadStream(file), res);
}

await runChild(async () => {
  const server = createServer((req, res) => {
    handle(req, res).catch((error: NodeJS.ErrnoException) => {
      // a client that stops mid-download (autocannon at the end of its run) is no error of ours
      if (error.code === 'ERR_STREAM_PREMATURE_CLOSE') return;
      console.error('[storage-bare]', error);
      if (!res.headersSent) answer(res, 500, '{"status":500}');
      else res.destroy();
    });
  });
  server.requestTimeout = 0; // a 1 GB upload on a busy machine
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
});
