// Runs a TypeScript file through tsx's loader: `node bin/run-ts.js <file.ts> [args...]` (path relative to the cwd).
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { register } from 'tsx/esm/api';
register();
await import(pathToFileURL(path.resolve(process.cwd(), process.argv[2])).href);
