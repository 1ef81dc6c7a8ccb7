/** A reverse proxy that mounts a server under a path prefix, for pages that must work behind one. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A reverse proxy serving `target` under `prefix`, as a gateway that strips the prefix would. */
export async function startPrefixProxy(
  prefix: string,
  target: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const proxy = http.createServer((req, res) => {
    if (!req.url?.startsWith(`${prefix}/`)) {
      res.writeHead(404).end(`outside ${prefix}/`);
      return;
    }
    const upstream = http.request(
      `${target}${req.url.slice(prefix.length)}`,
      { method: req.method, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode!, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const { port } = proxy.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        proxy.close((e) => (e ? reject(e) : resolve()));
        proxy.closeAllConnections();
      }),
  };
}
