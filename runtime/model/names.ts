/**
 * Names that end up as keys of plain JavaScript objects (API key context keys, role names): own
 * properties only, and never a name every object already has (docs/api.md §4).
 */

/** True for `constructor`, `toString`, `hasOwnProperty`, `__proto__`, `valueOf`, ...: names on Object.prototype. */
export function isObjectPrototypeName(name: string): boolean {
  return Object.hasOwn(Object.prototype, name);
}

/** A context key: a letter or _, then letters, digits or _; at most 64 characters. */
export const CONTEXT_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** Why `key` cannot be an API key context key (a reason, without the key's name), or undefined when it can. */
export function contextKeyProblem(key: string): string | undefined {
  if (!CONTEXT_KEY.test(key)) return 'a context key is a letter or _, then letters, digits or _, at most 64 characters';
  if (isObjectPrototypeName(key))
    return `"${key}" is the name of a property every JavaScript object has; choose another context key`;
  return undefined;
}
