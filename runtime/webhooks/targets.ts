/**
 * Where deliveries may go (docs/api.md §8.5): https unless `webhooks.allowHttp`, and
 * only public unicast addresses unless `webhooks.allowPrivateTargets`. Checked when a subscription
 * is written and again on every connection a delivery opens: the address a name resolves to is
 * checked in the connection's own lookup, so a name cannot rebind between check and connect.
 */
import dns from 'node:dns';
import ipaddr from 'ipaddr.js';

export interface TargetPolicy {
  readonly allowHttp: boolean;
  readonly allowPrivateTargets: boolean;
}

export class TargetRefused extends Error {}

/** Why `address` may not receive deliveries, or undefined when it is a public unicast address. */
export function refusedAddress(address: string): string | undefined {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return `${address} is not an IP address`;
  }
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6;
    // IPv4-mapped (::ffff:a.b.c.d) and the deprecated IPv4-compatible (::a.b.c.d) forms are the IPv4 address they carry.
    if (v6.isIPv4MappedAddress() || (v6.range() === 'unicast' && v6.parts.slice(0, 6).every((p) => p === 0))) {
      parsed = ipaddr.fromByteArray(v6.toByteArray().slice(12));
    }
  }
  const range = parsed.range();
  if (range === 'unicast') return undefined;
  const named: Record<string, string> = {
    loopback: 'a loopback address',
    private: 'a private address',
    uniqueLocal: 'a private address',
    linkLocal: 'a link-local address (cloud metadata services live here)',
    carrierGradeNat: 'a shared (carrier-grade NAT) address',
    unspecified: 'the unspecified address',
  };
  return `${address} is ${named[range] ?? `a reserved address (${range})`}`;
}

function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/** Problems with a subscription URL (scheme, form, and where it resolves now); empty when fine. */
export async function urlProblems(raw: string, policy: TargetPolicy): Promise<string[]> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return ['url must be an absolute URL such as https://example.com/hooks'];
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && policy.allowHttp)) {
    return [policy.allowHttp ? 'url must use https or http' : 'url must use https (webhooks.allowHttp permits http)'];
  }
  if (url.username || url.password) return ['url must not carry credentials; sign deliveries with the secret instead'];
  if (policy.allowPrivateTargets) return [];
  const host = hostOf(url);
  let addresses: string[];
  if (ipaddr.isValid(host)) addresses = [host];
  else {
    try {
      addresses = (await dns.promises.lookup(host, { all: true, verbatim: true })).map((a) => a.address);
    } catch {
      return [`url host ${host} does not resolve`];
    }
  }
  const refused = addresses.map(refusedAddress).filter((r): r is string => r !== undefined);
  return refused.length
    ? [
        `url must reach a public address: ${host} resolves to ${refused.join('; ')} (webhooks.allowPrivateTargets permits it)`,
      ]
    : [];
}

/** Refuses a literal IP host before a delivery is attempted (names are checked in `checkedLookup`). */
export function checkLiteralHost(url: URL, policy: TargetPolicy): void {
  if (policy.allowPrivateTargets) return;
  const host = hostOf(url);
  if (!ipaddr.isValid(host)) return;
  const refused = refusedAddress(host);
  if (refused) throw new TargetRefused(`target refused: ${refused}`);
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | dns.LookupAddress[],
  family?: number,
) => void;

/** A `dns.lookup` for sockets that fails when any address of the name is not public. */
export function checkedLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, '');
    const refused = addresses.map((a) => refusedAddress(a.address)).find((r) => r !== undefined);
    if (refused)
      return callback(
        Object.assign(new TargetRefused(`target refused: ${hostname} resolves to ${refused}`), {
          code: 'ETARGETREFUSED',
        }),
        '',
      );
    if (options.all) return callback(null, addresses);
    return callback(null, addresses[0]!.address, addresses[0]!.family);
  });
}
