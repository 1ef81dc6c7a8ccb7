// Lazy, typed access to Prisma's CommonJS packages.
//
// @prisma/internals, the generator registry, @prisma/adapter-pg and
// @prisma/driver-adapter-utils are CommonJS bundles; loading them through
// createRequire avoids relying on Node's CJS named-export detection, and
// loading them lazily keeps callers that only need one piece (for example a
// migration diff) from paying the ~250 ms start-up cost of @prisma/internals.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export type Internals = typeof import('@prisma/internals');
export type GeneratorRegistryModule = typeof import('@prisma/client-generator-registry');
export type AdapterPgModule = typeof import('@prisma/adapter-pg');
export type DriverAdapterUtils = typeof import('@prisma/driver-adapter-utils');

export function loadInternals(): Internals {
  return require('@prisma/internals') as Internals;
}

export function loadGeneratorRegistry(): GeneratorRegistryModule {
  return require('@prisma/client-generator-registry') as GeneratorRegistryModule;
}

export function loadAdapterPg(): AdapterPgModule {
  return require('@prisma/adapter-pg') as AdapterPgModule;
}

export function loadDriverAdapterUtils(): DriverAdapterUtils {
  return require('@prisma/driver-adapter-utils') as DriverAdapterUtils;
}

/** Absolute path of a file shipped inside an installed package (respects its `exports`). */
export function resolvePackageFile(specifier: string): string {
  return require.resolve(specifier);
}
