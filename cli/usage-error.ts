/** A mistake in how the CLI was called: one line on stderr, exit code 2. */
export class UsageError extends Error {}
