/** keys create|list|revoke, token create: the CLI side of API keys and management tokens (docs/api.md §4). */
import type { Command } from 'commander';
import { contextKeyProblem, KEY_PREFIX, KEY_PREFIX_RULE } from '../../runtime/model/index.ts';
import { openOperator, withOperatorOptions } from '../operator.ts';
import { collect } from '../options.ts';
import { UsageError } from '../usage-error.ts';

// Loaded when a command runs, so that --help does not pay for pg and the runtime.
const keysModule = () => import('../../runtime/keys/index.ts');

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

  withOperatorOptions(
    keys.command('create').description('create an API key and print its value once'),
    (c) =>
      c
        .requiredOption('--name <name>', 'a descriptive name')
        .requiredOption('--prefix <word>', 'scheme word of the Authorization header, e.g. ApiKey')
        .requiredOption('--role <role>', 'a role the key carries (repeat for more)', collect)
        .option('--context <key=value>', 'a context pair for role filters (repeatable)', collect, []),
    { required: true, description: 'environment the key works in' },
  )
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
        const operator = await openOperator(options);
        const { config } = operator;
        operator.environment();
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
        const key = await operator.withDatabase(async (db) =>
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

  withOperatorOptions(keys.command('list').description('list the API keys of an environment (no values)'), undefined, {
    required: true,
    description: 'environment',
  })
    .option('--json', 'print JSON')
    .action(async (options: { project: string; env: string; databaseUrl?: string; json?: boolean }) => {
      const { config, withDatabase } = await openOperator(options);
      const list = await withDatabase(async (db) =>
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

  withOperatorOptions(keys.command('revoke').description('revoke an API key').argument('<id>', 'the key id')).action(
    async (id: string, options: { project: string; databaseUrl?: string }) => {
      const { config, withDatabase } = await openOperator(options);
      const revoked = await withDatabase(async (db) => (await keysModule()).revokeApiKey(db, config.project.id, id));
      if (revoked === undefined) {
        console.error(`no active API key with id ${id}`);
        process.exitCode = 1;
      } else {
        console.log(`revoked ${id}`);
      }
    },
  );

  const token = program.command('token').description('management tokens');
  withOperatorOptions(token.command('create').description('create a management token and print it once'), (c) =>
    c.requiredOption('--name <name>', 'a descriptive name'),
  ).action(async (options: { project: string; name: string; databaseUrl?: string }) => {
    const { withDatabase } = await openOperator(options);
    const created = await withDatabase(async (db) => (await keysModule()).createManagementToken(db, options.name));
    console.log(`created management token ${created.id} (${created.name})`);
    console.log(`token (shown only now): ${created.token}`);
  });
}
