// `node bin/run-ts.js <file.ts> [args...]`: runs a TypeScript file (path relative to the cwd) through tsx.
import { pathToFileURL } from 'node:url';
import { register } from 'tsx/esm/api';
register();
await import(pathToFileURL(process.argv[2]).href);
