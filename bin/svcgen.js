#!/usr/bin/env node
// The CLI is written in TypeScript and loads the project's generated TypeScript at run time,
// so it runs through tsx's loader rather than a build step.
import { register as registerHooks } from 'node:module';
import { register } from 'tsx/esm/api';

// `svcgen openapi | head` closes stdout early: that is not an error.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});
register();
registerHooks('./resolve-fallback.js', import.meta.url);
const { main } = await import('../cli/main.ts');
process.exitCode = await main(process.argv);
