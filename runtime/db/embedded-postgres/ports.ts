// ports
import net from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen({ port: 0, host: '127.0.0.1', exclusive: true }, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => (port === 5432 ? freePort().then(resolve, reject) : resolve(port)));
    });
  });
}

export function isPortFree(port: number): Promise<boolean> {
  if (port === 5432) return Promise.resolve(false);
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', () => resolve(false));
    srv.listen({ port, host: '127.0.0.1', exclusive: true }, () => srv.close(() => resolve(true)));
  });
}
