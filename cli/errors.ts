import { ConfigError } from '../runtime/config/index.ts';
import { MigrationError } from '../runtime/db/index.ts';
import { ModelError } from '../generator/model/describe-model.ts';
import { PrismaSchemaError } from '../generator/prisma/index.ts';
import { UsageError } from './project.ts';

/** What a person sees for an error, and the exit code: 2 for usage, 1 for everything else. */
export function describeError(error: unknown): { message: string; code: number } {
  if (error instanceof UsageError) return { message: error.message, code: 2 };
  const system = error as NodeJS.ErrnoException & { address?: string; port?: number };
  if (system?.code === 'EADDRINUSE') {
    return { message: `port ${system.port} on ${system.address} is already in use: pick another with --port <n> (or stop what listens there)`, code: 1 };
  }
  if (error instanceof ConfigError || error instanceof ModelError || error instanceof MigrationError) return { message: error.message, code: 1 };
  if (error instanceof PrismaSchemaError) return { message: `schema.prisma is invalid:\n${error.message}`, code: 1 };
  if (error instanceof Error) return { message: error.message, code: 1 };
  return { message: String(error), code: 1 };
}
