#!/usr/bin/env node
// An installed svcgen runs its compiled JavaScript (dist/, built by `npm pack`); a checkout runs
// its TypeScript source. Either way a project's generated/ is TypeScript, loaded through tsx.
import { existsSync } from 'node:fs';
import module, { register as registerHooks } from 'node:module';

// Node 22.1+ caches compiled code between runs (TypeScript's and Prisma's large bundles load faster).
module.enableCompileCache?.();

// `svcgen openapi | head` closes stdout early: that is not an error.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

const fromSource = existsSync(new URL('../cli/main.ts', import.meta.url));
if (fromSource) (await import('tsx/esm/api')).register();
registerHooks('./resolve-fallback.js', { parentURL: import.meta.url, data: { fromSource } });
const { main } = fromSource ? await import('../cli/main.ts') : await import('../dist/cli/main.js');
process.exitCode = await main(process.argv);
