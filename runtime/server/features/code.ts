/**
 * The project's own code (docs/own-code.md): the services its contexts act through. Hooks run in
 * the data layer's writes, endpoints are routes of their own, jobs run on the job runner.
 */
import type { WriteHooks } from '../../data/index.ts';
import type { CodeServices } from '../../usercode/index.ts';
import { endpointRoutes } from '../endpoints.ts';
import type { ServerFeature } from '../feature.ts';
import type { Services } from '../services.ts';

export const codeFeature: ServerFeature<{ codeServices: CodeServices; writeHooks: WriteHooks }> = {
  name: 'code',
  start({ logger, code, config, db }) {
    // Every service exists once all features have started (routes()); contexts are built after that.
    let running: Services | undefined;
    const codeServices: CodeServices = {
      logger,
      dataApi() {
        if (!running) throw new Error('user code ran before the server started');
        throw new Error('the data API of user code is not wired yet');
      },
      enqueue() {
        throw new Error('jobs of user code are not wired yet');
      },
    };
    return {
      services: {
        codeServices,
        writeHooks: { registry: code, services: codeServices, timeoutMs: config.code.hookTimeoutMs, db },
      },
      routes(services) {
        running = services;
        return endpointRoutes(services);
      },
    };
  },
};
