/**
 * Real-time GraphQL subscriptions (docs/realtime.md): the hub that hears committed changes, and
 * the WebSocket server at the GraphQL endpoint. Revoked keys, ended sessions and logged-out
 * tokens close their sockets at once (heard on the shared channel, from any process); SIGTERM
 * closes every socket with 1001 before the HTTP drain.
 */
import { SESSION_TOPIC, TOKEN_TOPIC } from '../../auth/tokens/revocations.ts';
import { openDatabase } from '../../db/index.ts';
import { REVOKED_TOPIC } from '../../keys/store.ts';
import { metrics } from '../../observability/index.ts';
import { LiveHub } from '../../realtime/hub.ts';
import { ROLES_TOPIC } from '../../realtime/revocation.ts';
import { RealtimeServer } from '../../realtime/server.ts';
import { sseHandler } from '../../realtime/sse.ts';
import { fileAccess } from '../file-access.ts';
import { errorReply, methodNotAllowed, nodeRequest, send } from '../../http/index.ts';
import { GRAPHQL_PATH } from '../../model/index.ts';
import { schemaCache } from '../../graphql/index.ts';
import type { ServerFeature } from '../feature.ts';
import { dataLimits } from '../../data/index.ts';

export const realtimeFeature: ServerFeature<{ liveHub: LiveHub }> = {
  name: 'realtime',
  start({ db, channel, logger, options, config, directUrl }, teardown) {
    const log = (message: string, error?: unknown) => logger.error({ err: error }, message);
    // The hub reads committed events on a connection of its own (opened on the first read, closed
    // after 10 s idle): on the request pool they would queue behind the writes (docs/realtime.md).
    const reader = openDatabase(options.databaseUrl, {
      max: 1,
      statementTimeoutMs: config.database.statementTimeoutMs,
      transactionPooler: directUrl !== options.databaseUrl,
    });
    teardown.add('realtime reads', () => reader.close());
    const hub = new LiveHub(db, channel, log, reader);
    hub.start();
    teardown.add('realtime', () => hub.stop());
    let server: RealtimeServer | undefined;
    teardown.onDrain(() => void server?.close());
    const unsubscribe = [
      channel.subscribe(REVOKED_TOPIC, {
        onMessage: (digest) => server?.revoked(digest, 'the API key was revoked'),
        onGap: () => {},
      }),
      channel.subscribe(SESSION_TOPIC, {
        onMessage: (id) => server?.revoked(id, 'the session ended (logout or revocation)'),
        onGap: () => {},
      }),
      channel.subscribe(ROLES_TOPIC, {
        onMessage: (message) => server?.rolesChanged(message, config.auth.accessTokenTtl),
        onGap: () => {},
      }),
      channel.subscribe(TOKEN_TOPIC, {
        onMessage: (id) => server?.revoked(id, 'the access token was revoked (logout)'),
        onGap: () => {},
      }),
    ];
    teardown.add('realtime sockets', async () => {
      for (const off of unsubscribe) off();
      await server?.close();
    });
    return {
      services: { liveHub: hub },
      // Server-Sent Events (docs/realtime.md): the server is built with the upgrades, before any request.
      routes: (services) => {
        const logError = (error: unknown) => logger.error({ err: error }, 'realtime stream failed');
        let handle: ReturnType<typeof sseHandler> | undefined;
        return [
          {
            method: 'post',
            path: `${GRAPHQL_PATH}/stream`,
            express: (req, res) => {
              const apiReq = nodeRequest(req, res, req.originalUrl, {}, services.config.limits.bodyBytes);
              handle ??= sseHandler(server!);
              handle(req, res, apiReq).catch((error: unknown) => {
                if (res.headersSent) res.destroy();
                else send(res, errorReply(error, apiReq, logError));
              });
            },
          },
          // Distinct connections mode takes POST only (sse.ts): every other method is a 405 with Allow.
          {
            method: 'all',
            path: `${GRAPHQL_PATH}/stream`,
            handler: async (req) => {
              throw methodNotAllowed(req, 'POST');
            },
          },
        ];
      },
      upgrades(services) {
        const limits = dataLimits(services);
        const schemaFor = schemaCache(
          Object.values(services.service.tables).map((t) => t.spec),
          services.policy,
        );
        server = new RealtimeServer(
          {
            config: services.config,
            catalog: services.catalog,
            access: (principal) => services.policy.access(principal),
            schemaFor,
            authenticate: (req, tenant) => limits.authenticate(req, tenant),
            hub,
            files: (principal) => fileAccess(services.config, principal),
            buckets: Object.keys(services.config.storage.buckets),
            log,
            debug: (message, error) => logger.debug({ err: error }, message),
          },
          services.config.realtime,
        );
        const realtime = server;
        teardown.add('realtime metrics', metrics.watchRealtime(realtime));
        return (req, socket, head) => realtime.upgrade(req, socket, head);
      },
    };
  },
};
