/** Webhooks (docs/api.md §8): event capture for watched tables, /_webhooks, and the delivery worker. */
import { DATA_BASE_PATH, SERVICE_PATHS } from '../../model/index.ts';
import { metrics } from '../../observability/index.ts';
import { WatchedTables } from '../../events/index.ts';
import { installDeliveryQueue, startDeliveryWorker, webhookHandlers, webhookQueueDepth } from '../../webhooks/index.ts';
import type { ServerFeature } from '../feature.ts';

export const webhooksFeature: ServerFeature<{ watchedTables: WatchedTables }> = {
  name: 'webhooks',
  async start({ options, config, db, channel, box, directUrl, metricsToken, log }, teardown) {
    await installDeliveryQueue(directUrl, log);
    const watchedTables = new WatchedTables(db, channel);
    teardown.add('watched tables', () => watchedTables.stop());
    if (metricsToken)
      teardown.add(
        'webhook queue metrics',
        metrics.watchWebhookQueue(() => webhookQueueDepth(db)),
      );
    if (options.worker !== false) {
      const worker = await startDeliveryWorker({
        databaseUrl: options.databaseUrl,
        directDatabaseUrl: directUrl,
        box,
        config,
        log,
      });
      // Its own connections: it need not wait for the server's pools to close, nor they for it.
      teardown.add('webhook worker', () => worker.stop(), { alongside: true });
    }
    return {
      services: { watchedTables },
      routes(services) {
        const h = webhookHandlers(services);
        const at = `${DATA_BASE_PATH}/${SERVICE_PATHS.webhooks}`;
        return [
          { method: 'post', path: at, handler: h.create },
          { method: 'get', path: at, handler: h.list },
          { method: 'get', path: `${at}/:id`, handler: h.get },
          { method: 'patch', path: `${at}/:id`, handler: h.update },
          { method: 'delete', path: `${at}/:id`, handler: h.remove },
          { method: 'post', path: `${at}/:id/deliveries/:deliveryId/redeliver`, handler: h.redeliver },
        ];
      },
    };
  },
};
