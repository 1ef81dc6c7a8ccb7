/**
 * The project's own code (docs/own-code.md): the services its contexts act through. Hooks run in
 * the data layer's writes, endpoints are routes of their own, jobs run on the job runner.
 */
import type { CodeScope, CodeServices } from '../../usercode/index.ts';
import { inProcessDataApi } from '../code-data.ts';
import type { ServerFeature } from '../feature.ts';
import type { Services } from '../services.ts';

export const codeFeature: ServerFeature<{ codeServices: CodeServices }> = {
  name: 'code',
  start({ logger }) {
    // Every service exists once all features have started (routes()); contexts are built after that.
    let dataApi: ((scope: CodeScope, system: boolean) => object) | undefined;
    const codeServices: CodeServices = {
      logger,
      dataApi(scope, system) {
        if (!dataApi) throw new Error('user code ran before the server started');
        return dataApi(scope, system);
      },
      enqueue() {
        throw new Error('jobs of user code are not wired yet');
      },
    };
    return {
      services: { codeServices },
      routes(services: Services) {
        dataApi = inProcessDataApi(services);
        return [];
      },
    };
  },
};
