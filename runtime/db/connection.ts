/**
 * A connection string as PostgreSQL clients read it. pg 8 reads `sslmode` its own way (`require`
 * verifies the certificate and host name, `prefer` requires TLS, with a deprecation warning);
 * managed PostgreSQL providers document libpq's meaning, so svcgen maps libpq's parameters to pg's
 * `ssl` options itself (README "PgBouncer and managed PostgreSQL").
 */
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import type pg from 'pg';

const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
type SslMode = (typeof SSL_MODES)[number];
const TLS_PARAMETERS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey'] as const;

export class ConnectionStringError extends Error {}

/**
 * pg's connection settings for `url`. Without libpq TLS parameters the string goes to pg as it is.
 * With them: `disable` and `allow` connect without TLS (pg cannot fall back between the two, and
 * `allow` starts without); `prefer` and `require` encrypt without verifying the server (no
 * fallback to plain for `prefer`: pg cannot retry); `require` with `sslrootcert` is `verify-ca`, as
 * in libpq; `verify-ca` checks the chain but not the host name; `verify-full` checks both.
 * `sslrootcert` is a CA file (`system`: Node's CA store, also the default); `sslcert`/`sslkey`
 * a client certificate.
 */
export function connectionConfig(url: string): pg.ClientConfig {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // Not a URL (a socket path, say): pg's own parser decides.
    return { connectionString: url };
  }
  const params = parsed.searchParams;
  if (!TLS_PARAMETERS.some((name) => params.has(name))) return { connectionString: url };
  const mode = params.get('sslmode') ?? 'require';
  if (!(SSL_MODES as readonly string[]).includes(mode)) {
    throw new ConnectionStringError(`the database URL's sslmode "${mode}" is not one of ${SSL_MODES.join(', ')}`);
  }
  const rootCert = params.get('sslrootcert');
  const clientCert = params.get('sslcert');
  const clientKey = params.get('sslkey');
  for (const name of TLS_PARAMETERS) params.delete(name);
  const connectionString = parsed.toString();
  if (mode === 'disable' || mode === 'allow') return { connectionString, ssl: false };

  const read = (name: string, file: string) => {
    try {
      return readFileSync(file, 'utf8');
    } catch (error) {
      throw new ConnectionStringError(
        `the database URL's ${name} ${file} cannot be read: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
      );
    }
  };
  const ssl: ConnectionOptions = {};
  if (rootCert && rootCert !== 'system') ssl.ca = read('sslrootcert', rootCert);
  if (clientCert) ssl.cert = read('sslcert', clientCert);
  if (clientKey) ssl.key = read('sslkey', clientKey);
  const effective: SslMode = (mode === 'require' || mode === 'prefer') && rootCert ? 'verify-ca' : (mode as SslMode);
  if (effective === 'prefer' || effective === 'require') ssl.rejectUnauthorized = false;
  // The chain is still verified; only the host name check is skipped.
  if (effective === 'verify-ca') ssl.checkServerIdentity = () => undefined;
  return { connectionString, ssl };
}
