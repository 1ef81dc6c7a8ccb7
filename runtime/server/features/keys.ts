/** API keys and management tokens (docs/api.md §4): their credentials and /_apikeys. */
import { CredentialStore, keyHandlers } from '../../keys/index.ts';
import { DATA_BASE_PATH, SERVICE_PATHS } from '../../model/index.ts';
import type { ServerFeature } from '../feature.ts';

export const keysFeature: ServerFeature<{ credentials: CredentialStore }> = {
  name: 'keys',
  start({ db, channel, options }, teardown) {
    const credentials = new CredentialStore(db, channel, options.managementToken);
    credentials.start();
    teardown.add('keys', () => credentials.stop());
    return {
      services: { credentials },
      resolvers: [credentials],
      routes(services) {
        const h = keyHandlers(services);
        const at = `${DATA_BASE_PATH}/${SERVICE_PATHS.apiKeys}`;
        return [
          { method: 'post', path: at, handler: h.create },
          { method: 'get', path: at, handler: h.list },
          { method: 'delete', path: `${at}/:id`, handler: h.revoke },
        ];
      },
    };
  },
};
