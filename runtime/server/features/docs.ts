/** The OpenAPI document and the reference page (docs/api.md §9). */
import { jsonReply } from '../../http/index.ts';
import { DATA_BASE_PATH, SERVICE_PATHS } from '../../model/index.ts';
import { docsHandlers } from '../docs-page.ts';
import type { ServerFeature } from '../feature.ts';

export const docsFeature: ServerFeature = {
  name: 'docs',
  start({ service, config }) {
    return {
      routes() {
        const docs = docsHandlers({ basePath: DATA_BASE_PATH, openapi: service.openapi, projectId: config.project.id });
        const openapi = `${DATA_BASE_PATH}/${SERVICE_PATHS.openapi}`;
        const page = `${DATA_BASE_PATH}/${SERVICE_PATHS.docs}`;
        return [
          { method: 'get', path: openapi, handler: async () => jsonReply(200, service.openapi) },
          { method: 'get', path: page, express: docs.page },
          { method: 'get', path: `${page}/:file`, express: docs.asset },
        ];
      },
    };
  },
};
