/**
 * A caller's access to files, for record fields that reference them (docs/storage.md "Records that
 * reference files"): the bucket rules of runtime/storage, built once per configuration.
 */
import type { Config } from '../config/index.ts';
import type { Principal } from '../principal/index.ts';
import type { FileAccess } from '../query/index.ts';
import { BucketAccess, REMOVE_MAX_ATTEMPTS, REMOVE_TASK } from '../storage/index.ts';
import { QUEUE_SCHEMA } from '../db/index.ts';

const built = new WeakMap<Config, { buckets: BucketAccess; byPrincipal: WeakMap<Principal, FileAccess> } | null>();

/** What `principal` may read of each bucket; undefined when no bucket is configured. */
export function fileAccess(config: Config, principal: Principal): FileAccess | undefined {
  let forConfig = built.get(config);
  if (forConfig === undefined) {
    forConfig =
      Object.keys(config.storage.buckets).length === 0
        ? null
        : { buckets: new BucketAccess(config), byPrincipal: new WeakMap() };
    built.set(config, forConfig);
  }
  if (forConfig === null) return undefined;
  // One per principal, as its grants are (runtime/query/policy.ts), not one per request.
  let files = forConfig.byPrincipal.get(principal);
  if (!files) {
    files = filesOf(config, forConfig.buckets, principal);
    forConfig.byPrincipal.set(principal, files);
  }
  return files;
}

function filesOf(config: Config, access: BucketAccess, principal: Principal): FileAccess {
  return {
    catalog: access.catalog,
    access: (bucket, environment) =>
      Object.hasOwn(config.storage.buckets, bucket) && config.environments.includes(environment)
        ? access.policy(bucket, environment).access(principal)
        : undefined,
    // The job queueRemoval queues (runtime/storage/jobs.ts), keyed as objectKey makes the key.
    removal: (alias, add) => {
      const key = `(${alias}."environment" || '/' || ${alias}."bucket" || '/' || ${alias}."id"::text)`;
      return `(${QUEUE_SCHEMA}.add_job(${add(REMOVE_TASK)}::text, json_build_object('key', ${key}), max_attempts => ${add(REMOVE_MAX_ATTEMPTS)}::int, job_key => ${key})).id`;
    },
  };
}
