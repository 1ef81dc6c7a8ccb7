// Errors raised by the Prisma toolkit, with messages meant for humans.
import { stripVTControlCharacters } from 'node:util';

/**
 * The Prisma schema is invalid. `message` is Prisma's own validation output
 * (file:line, the offending line, what is wrong) without colours, stack
 * frames or the CLI-version footer that @prisma/internals appends.
 */
export class PrismaSchemaError extends Error {
  override readonly name = 'PrismaSchemaError';
  /** Prisma error code, normally P1012 (schema validation). */
  readonly code: string;

  constructor(validationOutput: string, code = 'P1012') {
    super(`Prisma schema validation failed (${code})\n\n${validationOutput.trim()}`);
    this.code = code;
  }
}

/**
 * Anything else the schema engine reported (failed migration on the shadow
 * database, unknown connector, a panic, ...). `code` carries Prisma's error
 * code when the engine gave one (e.g. P3006).
 */
export class PrismaEngineError extends Error {
  override readonly name = 'PrismaEngineError';
  readonly code: string | undefined;

  constructor(message: string, code?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * Turns the message of @prisma/internals' GetDmmfError / GetConfigError into
 * the bare validation output. Those messages look like
 *   "Prisma schema validation - (get-dmmf wasm)\nError code: P1012\n<ANSI output>\n[Context: getDmmf]\n\nPrisma CLI Version : 7.10.0"
 * and only the middle part is useful to a svcgen user.
 */
export function schemaErrorFromInternals(error: unknown): PrismaSchemaError | undefined {
  if (!(error instanceof Error) || !/^Get(Dmmf|Config)Error$/.test(error.name)) return undefined;
  const plain = stripVTControlCharacters(error.message);
  const code = /^Error code: (P\d{4})$/m.exec(plain)?.[1];
  if (code === undefined) return undefined;
  const body = plain
    .replace(/\n\[Context: [^\]]*\][\s\S]*$/, '')
    .split('\n')
    .filter((line, index) => !(index === 0 && line.startsWith('Prisma schema validation')))
    .filter((line) => !line.startsWith('Error code: '))
    .join('\n');
  return new PrismaSchemaError(body, code);
}

/** Removes the Rust span trace ("   0: schema_engine_wasm::...") the engine appends to its messages. */
export function stripEngineTrace(message: string): string {
  return message.replace(/\n\s+0: [a-z_]+::[\s\S]*$/, '').trim();
}
