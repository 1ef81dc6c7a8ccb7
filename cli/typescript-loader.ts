/**
 * A project's generated/ is TypeScript. Installed svcgen is compiled JavaScript and registers tsx
 * only when a command loads generated code (it costs ~0.2 s that `--help` and `check` need not
 * pay); a checkout runs its own source under tsx already.
 */
let registered: Promise<void> | undefined;

export function ensureTypeScriptLoader(): Promise<void> {
  if (import.meta.url.endsWith('.ts')) return Promise.resolve();
  return (registered ??= import('tsx/esm/api').then(({ register }) => {
    register();
  }));
}
