import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // A project's generated code imports svcgen/model; in this repo that is the runtime's own source
  // (the CLI does the same through bin/resolve-fallback.js).
  resolve: {
    alias: {
      'svcgen/model': fileURLToPath(new URL('./runtime/model/index.ts', import.meta.url)),
      'svcgen/runtime': fileURLToPath(new URL('./runtime/index.ts', import.meta.url)),
    },
  },
  test: {
    include: ['test/**/*.test.ts'],
    // one PostgreSQL server per run (embedded, or SVCGEN_TEST_DATABASE_URL); see test/support/database.ts
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
  },
});
