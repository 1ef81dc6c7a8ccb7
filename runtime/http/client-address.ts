/**
 * The client address of a request, for per-IP rate limits. X-Forwarded-For is believed only from
 * proxies the config trusts (`trustProxy`), exactly as Express's `trust proxy` does it.
 */
import proxyAddr from 'proxy-addr';
import type { IncomingMessage } from 'node:http';
import type { ApiRequest } from './request.ts';

export function clientAddress(trustProxy: boolean | string[]): (req: ApiRequest) => string {
  if (trustProxy === false) return (req) => req.ip;
  const trust = trustProxy === true ? () => true : proxyAddr.compile(trustProxy);
  return (req) =>
    proxyAddr({ headers: req.headers, socket: { remoteAddress: req.ip } } as unknown as IncomingMessage, trust);
}
