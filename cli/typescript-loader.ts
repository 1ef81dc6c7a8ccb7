/**
 * A project's generated/ is TypeScript. Installed svcgen is compiled JavaScript and registers tsx
 * only when a command loads generated code (it costs ~0.2 s that `--help` and `check` need not
 * pay); a checkout runs its own source under tsx already.
 */
let registered: Promise<void> | undefined;

export function ensureTypeScriptLoader(): Promise<void> {
  if (import.meta.url.endsWith('.ts')) return Promise.resolve();
  // Both hooks: a project's own code in a CommonJS package (no "type": "module") is CommonJS, which
  // the ESM hook alone leaves to Node's require, which cannot read TypeScript.
  return (registered ??= Promise.all([import('tsx/esm/api'), import('tsx/cjs/api')]).then(([esm, cjs]) => {
    esm.register();
    cjs.register();
  }));
}
