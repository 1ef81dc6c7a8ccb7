/**
 * The project's own code (docs/own-code.md): the services its contexts act through. Hooks run in
 * the data layer's writes, endpoints are routes of their own, jobs run on the job runner.
 */
import type { WriteHooks } from '../../data/index.ts';
import {
  codeCrontab,
  enqueueCodeJob,
  startCodeJobRunner,
  type CodeJobRunner,
  type CodeScope,
  type CodeServices,
} from '../../usercode/index.ts';
import { endpointRoutes } from '../endpoints.ts';
import { inProcessDataApi } from '../code-data.ts';
import type { ServerFeature } from '../feature.ts';
import type { Mailer } from '../../mail/index.ts';

export const codeFeature: ServerFeature<{ codeServices: CodeServices; writeHooks: WriteHooks }> = {
  name: 'code',
  start({ logger, code, config, options, db, directUrl, log }, teardown) {
    // Every service exists once all features have started (routes()); contexts are built after that.
    let dataApi: ((scope: CodeScope, system: boolean) => object) | undefined;
    let mailer: Mailer | undefined;
    const codeServices: CodeServices = {
      logger,
      // docs/own-code.md "The context and the data API": the generated client run in process (../code-data.ts).
      dataApi(scope, system) {
        if (!dataApi) throw new Error('user code ran before the server started');
        return dataApi(scope, system);
      },
      // docs/own-code.md "Jobs": on the context's connection or transaction, never one of its own.
      enqueue: (queryable, environment, name, payload, jobOptions) =>
        enqueueCodeJob(queryable, code, environment, name, payload, jobOptions),
      // docs/own-code.md "Mail": the auth feature's mailer, so that both share one transport and its retries.
      mail(message) {
        if (!mailer) throw new Error('user code ran before the server started');
        mailer.send(message);
      },
    };
    // A bad schedule stops the start naming it, also where no job runs (serve --no-worker).
    const crontab = code.schedules.length ? codeCrontab(code, config.environments) : [];
    // The job runner: in a process that runs workers (serve without --no-worker, `svcgen worker`) and
    // only when the code has jobs (docs/own-code.md "Cost"). It starts once every service exists
    // (the queue's schema is the webhooks feature's), so that no job runs before its data API does.
    const runJobs = options.worker !== false && code.jobs.size > 0;
    let runner: Promise<CodeJobRunner | undefined> | undefined;
    if (runJobs) teardown.add('code job runner', async () => (await runner)?.stop(), { alongside: true });
    return {
      services: {
        codeServices,
        writeHooks: { registry: code, services: codeServices, timeoutMs: config.code.hookTimeoutMs, db },
      },
      routes(services) {
        dataApi = inProcessDataApi(services);
        mailer = services.mailer;
        if (runJobs)
          runner = startCodeJobRunner({
            code,
            services: codeServices,
            db,
            directUrl,
            environments: config.environments,
            crontab,
            log,
          }).catch((error: unknown) => {
            log(`code job runner failed to start: ${error instanceof Error ? error.message : String(error)}`);
            return undefined;
          });
        return endpointRoutes(services);
      },
    };
  },
};
