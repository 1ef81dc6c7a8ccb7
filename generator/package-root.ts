/**
 * svcgen's own folder: the one holding package.json, templates/ and examples/. Code runs from
 * source (cli/, generator/) in a checkout and from dist/ once packed, at different depths.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

function findPackageRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json')) && existsSync(path.join(dir, 'templates'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`svcgen: cannot find its own package folder above ${from}`);
  }
}

export const PACKAGE_ROOT = findPackageRoot(path.dirname(fileURLToPath(import.meta.url)));

/** svcgen's own package.json: the one place its version is written. */
export const PACKAGE_MANIFEST = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as {
  version: string;
  dependencies: Record<string, string>;
};

export const SVCGEN_VERSION = PACKAGE_MANIFEST.version;
