/**
 * File storage (docs/storage.md): /_files/{bucket} on the configured backend, the job that removes
 * deleted files' bytes, and the orphan sweep (at start, then every ten minutes). Nothing starts
 * when no bucket is configured.
 */
import { callerDataLimit } from '../../config/index.ts';
import { clientAddress, Problem, type ApiRequest, type Handler, type Reply } from '../../http/index.ts';
import { RateLimitExceeded, type RateDecision } from '../../rate-limit/index.ts';
import { DATA_BASE_PATH, SERVICE_PATHS } from '../../model/index.ts';
import { serverSecret } from '../../secrets/index.ts';
import * as files from '../../storage/index.ts';
import { callerId, type Principal } from '../../principal/index.ts';
import type { Tenant } from '../../tenancy/index.ts';
import type { Route, ServerFeature } from '../feature.ts';
import { every } from '../housekeeping.ts';
import { dataLimits, rateLimitHeaders } from '../../data/index.ts';
import { OPERATIONS } from '../../rest/index.ts';
import type { Services } from '../services.ts';

const SWEEP_INTERVAL_MS = 10 * 60_000;

export const storageFeature: ServerFeature = {
  name: 'storage',
  async start({ options, config, db, directUrl, log }, teardown) {
    if (Object.keys(config.storage.buckets).length === 0) return {};
    const backend = files.openBackend(config.storage, options.projectDir, log);
    if (backend instanceof files.S3Backend) teardown.add('file store client', () => backend.close());
    const worker = await files.startRemovalWorker(directUrl, backend, log);
    teardown.add('storage worker', () => worker.stop(), { alongside: true });
    const sweep = () =>
      Promise.all([
        files.sweepOrphans(db, backend, config.storage.orphanGraceSeconds).catch((error: unknown) => {
          log(`file sweep failed: ${error instanceof Error ? error.message : String(error)}`);
        }),
        files.pruneUsage(db),
      ]);
    void sweep();
    teardown.add('file sweep', every(sweep, SWEEP_INTERVAL_MS));
    const signer = new files.UrlSigner(await serverSecret(db, 'file-url-signing'));
    return {
      routes(services) {
        const deps: files.StorageDeps = {
          config,
          db,
          backend,
          access: new files.BucketAccess(config),
          signer,
          basePath: services.basePath,
          expensiveReads: services.expensiveReads,
          cursors: services.cursors,
          watchedTables: services.watchedTables,
          limits: { ...dataLimits(services), anonymous: anonymousLimit(services), uploads: uploadLimit(services) },
          records: { list: OPERATIONS.list!.handle, read: OPERATIONS.read!.handle },
          rateLimitHeaders,
          inFlight: {
            uploads: new files.InFlight(
              config.storage.limits.concurrentUploadsPerCaller,
              'uploads',
              'storage.limits.concurrentUploadsPerCaller',
            ),
            downloads: new files.InFlight(
              config.storage.limits.concurrentDownloadsPerCaller,
              'downloads',
              'storage.limits.concurrentDownloadsPerCaller',
            ),
          },
          clientAddress: clientAddress(config.trustProxy),
          log,
        };
        const at = `${DATA_BASE_PATH}/${SERVICE_PATHS.files}/:bucket`;
        const handler =
          (h: (deps: files.StorageDeps, req: ApiRequest) => Promise<Reply>): Handler =>
          (req) =>
            h(deps, req);
        const routes: Route[] = [
          { method: 'post', path: at, stream: (req, raw) => files.upload(deps, req, raw) },
          { method: 'get', path: at, handler: handler(files.list) },
          { method: 'get', path: `${at}/:id`, handler: handler(files.metadata) },
          { method: 'delete', path: `${at}/:id`, handler: handler(files.remove) },
          { method: 'post', path: `${at}/:id/signed-url`, handler: handler(files.signedUrl) },
          { method: 'get', path: `${at}/:id/content`, stream: (req, _raw, res) => files.content(deps, req, res) },
        ];
        return routes;
      },
    };
  },
};

/** Requests without credentials, per client address: each address gets a caller's share of the data budget. */
function anonymousLimit(services: Services): (req: ApiRequest, environment: string) => Promise<RateDecision> {
  const clientIp = clientAddress(services.config.trustProxy);
  const limit = callerDataLimit(services.config);
  const project = services.config.project.id;
  return async (req, environment) => {
    try {
      return await services.rateLimiter.hit(`files-anonymous:${project}:${environment}:${clientIp(req)}`, limit);
    } catch (error) {
      if (!(error instanceof RateLimitExceeded)) throw error;
      const reset = error.retryAfterSeconds;
      throw new Problem(
        'rate-limited',
        `${limit} file requests a minute without credentials are answered from this address, and they are used up; retry in ${reset} s`,
        [],
        { 'retry-after': String(reset), ...rateLimitHeaders({ limit, remaining: 0, resetSeconds: reset }) },
      );
    }
  };
}

/** storage.limits.uploadsPerMinutePerCaller: uploads per caller (API key or user), project and environment. */
function uploadLimit(services: Services): (tenant: Tenant, principal: Principal) => Promise<void> {
  const limit = services.config.storage.limits.uploadsPerMinutePerCaller;
  return async (tenant, principal) => {
    if (limit === null) return;
    try {
      await services.rateLimiter.hit(
        `files-upload:${tenant.projectId}:${tenant.environment}:${callerId(principal)}`,
        limit,
      );
    } catch (error) {
      if (!(error instanceof RateLimitExceeded)) throw error;
      const reset = error.retryAfterSeconds;
      throw new Problem(
        'rate-limited',
        `each caller may upload ${limit} files a minute (storage.limits.uploadsPerMinutePerCaller), and yours are used up; retry in ${reset} s`,
        [],
        { 'retry-after': String(reset), ...rateLimitHeaders({ limit, remaining: 0, resetSeconds: reset }) },
      );
    }
  };
}
