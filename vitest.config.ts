import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';

const UNIT = 'test/**/*.unit.test.ts';

export default defineConfig({
  // A project's generated code imports svcgen/model (its own code svcgen); in this repo that is the runtime's own source
  // (the CLI does the same through bin/resolve-fallback.js).
  resolve: {
    alias: [
      { find: /^svcgen$/, replacement: fileURLToPath(new URL('./runtime/usercode/public.ts', import.meta.url)) },
      { find: 'svcgen/model', replacement: fileURLToPath(new URL('./runtime/model/index.ts', import.meta.url)) },
      { find: 'svcgen/runtime', replacement: fileURLToPath(new URL('./runtime/index.ts', import.meta.url)) },
      { find: 'svcgen/testing', replacement: fileURLToPath(new URL('./cli/testing.ts', import.meta.url)) },
    ],
  },
  test: {
    // graphql-http and graphql-ws go through Vite like our code, so all load the same build of graphql (its
    // ESM one): two builds in one process make graphql-js refuse each other's schemas.
    server: { deps: { inline: ['graphql-http', 'graphql-ws'] } },
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Two projects so `vitest run --project unit` (npm run test:unit) needs no PostgreSQL at all;
    // `vitest run` (npm test) runs both, each file once.
    projects: [
      {
        extends: true,
        // threads start faster than forks; nothing here needs a process of its own
        test: { name: 'unit', include: [UNIT], pool: 'threads' },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, UNIT],
          // one PostgreSQL server per run (embedded, or SVCGEN_TEST_DATABASE_URL); see test/support/database.ts
          globalSetup: ['test/support/global-setup.ts'],
        },
      },
    ],
  },
});
