/** keys create|list|revoke, token create: the CLI side of API keys and management tokens (docs/api.md §4). */
import type { Command } from 'commander';
import type { Database } from '../../runtime/db/index.ts';
import { contextKeyProblem } from '../../runtime/keys/names.ts';
import { KEY_PREFIX, KEY_PREFIX_RULE } from '../../runtime/model/index.ts';
import { collect, projectDir, withProject } from '../options.ts';
import { UsageError } from '../usage-error.ts';

// Loaded when a command runs, so that --help does not pay for pg and the runtime.
const keysModule = () => import('../../runtime/keys/index.ts');
const loadConfig = async (dir: string) => (await import('../../runtime/config/index.ts')).loadConfig(dir);

async function withDatabase<T>(dir: string, url: string | undefined, work: (db: Database) => Promise<T>): Promise<T> {
  const { openProjectDatabase } = await import('../database.ts');
  const { ensureSystemSchema, openDatabase } = await import('../../runtime/db/index.ts');
  const database = await openProjectDatabase(dir, url);
  const db = openDatabase(database.url, { max: 2 });
  try {
    await ensureSystemSchema(db);
    return await work(db);
  } finally {
    await db.close();
    await database.release();
  }
}

/** `--context key=value` pairs; a bad key is a usage error, not a key dropped or a prototype set (docs/api.md §4). */
function parseContext(pairs: string[]): Record<string, string> {
  const context = new Map<string, string>();
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new UsageError(`--context takes key=value, not "${pair}"`);
    const key = pair.slice(0, eq);
    const problem = contextKeyProblem(key);
    if (problem) throw new UsageError(`--context ${JSON.stringify(key)}: ${problem}`);
    context.set(key, pair.slice(eq + 1));
  }
  return Object.fromEntries(context);
}

export function registerCredentialCommands(program: Command): void {
  const keys = program.command('keys').description('API keys of an environment');

  withProject(keys.command('create').description('create an API key and print its value once'))
    .requiredOption('--env <env>', 'environment the key works in')
    .requiredOption('--name <name>', 'a descriptive name')
    .requiredOption('--prefix <word>', 'scheme word of the Authorization header, e.g. ApiKey')
    .requiredOption('--role <role>', 'a role the key carries (repeat for more)', collect)
    .option('--context <key=value>', 'a context pair for role filters (repeatable)', collect, [])
    .option('--database-url <url>', 'PostgreSQL connection string')
    .option('--json', 'print { id, name, prefix, environment, roles, key } as JSON')
    .action(
      async (options: {
        project: string;
        env: string;
        name: string;
        prefix: string;
        role: string[];
        context: string[];
        databaseUrl?: string;
        json?: boolean;
      }) => {
        const dir = projectDir(options);
        const config = await loadConfig(dir);
        if (!config.environments.includes(options.env)) {
          throw new UsageError(`--env must be one of ${config.environments.join(', ')}`);
        }
        for (const role of options.role) {
          // Own roles only: `toString` or `__proto__` are "in" every object.
          if (!Object.hasOwn(config.roles, role))
            throw new UsageError(
              `no role "${role}" in svcgen.config.json (roles: ${Object.keys(config.roles).join(', ')})`,
            );
        }
        if (!KEY_PREFIX.test(options.prefix)) {
          throw new UsageError(`--prefix must be ${KEY_PREFIX_RULE}`);
        }
        const context = parseContext(options.context);
        const key = await withDatabase(dir, options.databaseUrl, async (db) =>
          (await keysModule()).createApiKey(db, {
            projectId: config.project.id,
            environment: options.env,
            name: options.name,
            prefix: options.prefix,
            roles: options.role,
            context,
          }),
        );
        if (options.json) {
          const { id, name, prefix, environment, roles } = key;
          console.log(JSON.stringify({ id, name, prefix, environment, roles, key: key.key }));
        } else {
          console.log(`created API key ${key.id} for environment ${key.environment} (roles: ${key.roles.join(', ')})`);
          console.log(`key (shown only now): ${key.key}`);
          console.log(`use it as: Authorization: ${key.prefix} ${key.key}`);
        }
      },
    );

  withProject(keys.command('list').description('list the API keys of an environment (no values)'))
    .requiredOption('--env <env>', 'environment')
    .option('--database-url <url>', 'PostgreSQL connection string')
    .option('--json', 'print JSON')
    .action(async (options: { project: string; env: string; databaseUrl?: string; json?: boolean }) => {
      const dir = projectDir(options);
      const config = await loadConfig(dir);
      const list = await withDatabase(dir, options.databaseUrl, async (db) =>
        (await keysModule()).listApiKeys(db, config.project.id, options.env),
      );
      if (options.json) console.log(JSON.stringify(list));
      else if (list.length === 0) console.log(`no API keys in ${options.env}`);
      else
        for (const k of list)
          console.log(
            `${k.id}\t${k.name}\t${k.prefix}\t${k.roles.join(',')}\tcreated ${k.createdAt}\tlast used ${k.lastUsedAt ?? 'never'}`,
          );
    });

  withProject(keys.command('revoke').description('revoke an API key').argument('<id>', 'the key id'))
    .option('--database-url <url>', 'PostgreSQL connection string')
    .action(async (id: string, options: { project: string; databaseUrl?: string }) => {
      const dir = projectDir(options);
      const config = await loadConfig(dir);
      const revoked = await withDatabase(dir, options.databaseUrl, async (db) =>
        (await keysModule()).revokeApiKey(db, config.project.id, id),
      );
      if (revoked === undefined) {
        console.error(`no active API key with id ${id}`);
        process.exitCode = 1;
      } else {
        console.log(`revoked ${id}`);
      }
    });

  const token = program.command('token').description('management tokens');
  withProject(token.command('create').description('create a management token and print it once'))
    .requiredOption('--name <name>', 'a descriptive name')
    .option('--database-url <url>', 'PostgreSQL connection string')
    .action(async (options: { project: string; name: string; databaseUrl?: string }) => {
      const dir = projectDir(options);
      await loadConfig(dir);
      const created = await withDatabase(dir, options.databaseUrl, async (db) =>
        (await keysModule()).createManagementToken(db, options.name),
      );
      console.log(`created management token ${created.id} (${created.name})`);
      console.log(`token (shown only now): ${created.token}`);
    });
}
