/**
 * Storage rules between two `svcgen.config.json` (`svcgen diff`, docs/diff.md "Storage rule
 * changes"). A bucket's `public` flag and its role rules decide who may read, upload and delete
 * files (docs/storage.md "Permissions"), so they are access, classified as a table's grants are;
 * its other keys (sizes, media types, quotas) are settings and change no one's access.
 */
import type { BucketConfig, Config } from '../../runtime/config/index.ts';
import { canonical, change, compareRule, effectiveRule, type ConfigChange } from './access.ts';

const BUCKET_ACTIONS = ['read', 'create', 'delete'] as const;
type BucketAction = (typeof BUCKET_ACTIONS)[number];

const byName = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);

function actionsOf(rules: BucketConfig['roles'][string]): BucketAction[] {
  return BUCKET_ACTIONS.filter((a) => effectiveRule(rules[a]) !== null);
}

/** What each role may do with a bucket's files, in a line: `admin: read/create/delete; customer: read`. */
function describeBucketRoles(bucket: BucketConfig): string {
  return Object.keys(bucket.roles)
    .sort(byName)
    .map((role) => [role, actionsOf(bucket.roles[role])] as const)
    .filter(([, actions]) => actions.length > 0)
    .map(([role, actions]) => `${role}: ${actions.join('/')}`)
    .join('; ');
}

/** What one role may do with files, in a line: `files in avatars: read/create` (roles added and removed say it). */
export function describeRoleBuckets(config: Config, role: string): string[] {
  return Object.keys(config.storage.buckets)
    .sort(byName)
    .map((name) => {
      const rules = config.storage.buckets[name].roles;
      return [name, Object.hasOwn(rules, role) ? actionsOf(rules[role]) : []] as const;
    })
    .filter(([, actions]) => actions.length > 0)
    .map(([name, actions]) => `files in ${name}: ${actions.join('/')}`);
}

function grantsAnything(bucket: BucketConfig): boolean {
  return bucket.public || Object.values(bucket.roles).some((rules) => actionsOf(rules).length > 0);
}

function describeBucket(bucket: BucketConfig): string {
  const roles = describeBucketRoles(bucket);
  return `${bucket.public ? 'public' : 'not public'}; ${roles || 'no role may use it'}`;
}

/** A bucket's keys other than its rules: settings, listed as `storage.buckets.<name>.<key>`. */
function bucketSettings(bucket: BucketConfig): Map<string, unknown> {
  const { public: _public, roles: _roles, ...rest } = bucket;
  return new Map(Object.entries(rest));
}

function compareBucket(
  name: string,
  was: BucketConfig,
  now: BucketConfig,
  before: Config,
  after: Config,
  out: ConfigChange[],
): void {
  const subject = `bucket ${name}`;
  if (!was.public && now.public)
    out.push(
      change(
        'bucket made public',
        subject,
        "anyone may read a file's metadata and bytes by id, without credentials",
        'widens',
      ),
    );
  else if (was.public && !now.public)
    out.push(
      change('bucket made private', subject, 'reading a file by id now needs a role that may read it', 'narrows'),
    );
  // A role that came or went is one `role added` or `role removed` line, as for tables.
  const roles = [...new Set([...Object.keys(was.roles), ...Object.keys(now.roles)])]
    .filter((role) => Object.hasOwn(before.roles, role) && Object.hasOwn(after.roles, role))
    .sort(byName);
  for (const role of roles) {
    const [a, b] = [
      Object.hasOwn(was.roles, role) ? was.roles[role] : {},
      Object.hasOwn(now.roles, role) ? now.roles[role] : {},
    ];
    for (const action of BUCKET_ACTIONS)
      compareRule(
        `${role}: ${subject}.${action}`,
        action,
        effectiveRule(a[action]),
        effectiveRule(b[action]),
        undefined,
        out,
      );
  }
  const [sa, sb] = [bucketSettings(was), bucketSettings(now)];
  for (const key of [...new Set([...sa.keys(), ...sb.keys()])]) {
    const [x, y] = [sa.get(key), sb.get(key)];
    if (canonical(x) === canonical(y)) continue;
    const show = (value: unknown) => (value === undefined ? '(unset)' : JSON.stringify(value));
    out.push(change('setting changed', `storage.buckets.${name}.${key}`, `${show(x)} → ${show(y)}`, 'neutral'));
  }
}

/** Buckets by name: added, removed, made public or private, each role's rules, then the bucket's other keys. */
export function compareBuckets(before: Config, after: Config, out: ConfigChange[]): void {
  const [was, now] = [before.storage.buckets, after.storage.buckets];
  for (const name of [...new Set([...Object.keys(was), ...Object.keys(now)])].sort(byName)) {
    const [a, b] = [Object.hasOwn(was, name) ? was[name] : undefined, Object.hasOwn(now, name) ? now[name] : undefined];
    if (!a)
      out.push(change('bucket added', `bucket ${name}`, describeBucket(b!), grantsAnything(b!) ? 'widens' : 'neutral'));
    else if (!b)
      out.push(
        change(
          'bucket removed',
          `bucket ${name}`,
          `was ${describeBucket(a)}`,
          grantsAnything(a) ? 'narrows' : 'neutral',
        ),
      );
    else compareBucket(name, a, b, before, after, out);
  }
}
