#!/usr/bin/env node
// The CLI is written in TypeScript and loads the project's generated TypeScript at run time,
// so it runs through tsx's loader rather than a build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../cli/main.ts');
process.exitCode = await main(process.argv);
