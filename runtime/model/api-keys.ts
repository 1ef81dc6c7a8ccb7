/**
 * An API key's prefix is the scheme word clients send it under (`Authorization: <prefix> <key>`,
 * docs/api.md §4): the server, the CLI and the OpenAPI document check it with this one pattern.
 */
export const KEY_PREFIX_PATTERN = '^[A-Za-z][A-Za-z0-9_-]{0,31}$';

export const KEY_PREFIX = new RegExp(KEY_PREFIX_PATTERN);

/** What a prefix must look like, said to whoever sent one that does not. */
export const KEY_PREFIX_RULE = 'a scheme word: a letter, then letters, digits, _ or -, at most 32 characters';
