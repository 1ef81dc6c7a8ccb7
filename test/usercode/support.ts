/**
 * The code services of a server, beside a test server on its database: contexts built as the
 * server builds them for hooks, endpoints and jobs (runtime/usercode codeContext), so that a test
 * drives the data API of user code directly and compares it with the same request over HTTP.
 */
import { Lifecycle } from '../../runtime/server/feature.ts';
import { startFeatures } from '../../runtime/server/features/index.ts';
import { openFoundation } from '../../runtime/server/foundation.ts';
import type { Services } from '../../runtime/server/index.ts';
import type { Database } from '../../runtime/db/index.ts';
import type { ApiKeyPrincipal, Principal } from '../../runtime/principal/index.ts';
import { codeContext, type CodeContext } from '../../runtime/usercode/index.ts';
import type { Service } from '../../examples/shop/generated/code.ts';
import type { TestServer } from '../support/server.ts';

export interface CodeHarness {
  readonly services: Services;
  /** The context of a request of `principal` (none: a job's, acting as the system; 'anonymous': a public endpoint's without credentials). */
  context(principal?: Principal | 'anonymous', where?: { environment?: string; db?: Database }): CodeContext<Service>;
  close(): Promise<unknown>;
}

export async function codeHarness(server: TestServer): Promise<CodeHarness> {
  const lifecycle = new Lifecycle(() => {});
  const foundation = await openFoundation(
    {
      projectDir: server.config.project.id === 'shop' ? `${import.meta.dirname}/../../examples/shop` : '',
      service: (await import('../../examples/shop/generated/index.ts')).service,
      config: server.config,
      databaseUrl: server.database.url,
      port: 0,
      host: '127.0.0.1',
      migrate: false,
      worker: false,
      log: () => {},
    },
    lifecycle,
  );
  const { services } = await startFeatures(foundation, lifecycle);
  let n = 0;
  return {
    services,
    context: (principal, where = {}) =>
      codeContext<Service>(services.codeServices, {
        environment: where.environment ?? 'master',
        db: where.db ?? services.db,
        requestId: `test-${++n}`,
        origin: 'test',
        ...(principal === 'anonymous'
          ? { anonymous: true }
          : principal
            ? { principal, access: services.policy.access(principal) }
            : {}),
      }),
    close: () => lifecycle.stop(),
  };
}

/** An API key's principal as authentication would make it (roles, context). */
export function keyPrincipal(keyId: string, roles: string[], context: Record<string, string> = {}): ApiKeyPrincipal {
  return { kind: 'apiKey', keyId, roles, context, environment: 'master' };
}
