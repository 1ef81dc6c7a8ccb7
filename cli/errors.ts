import { UsageError } from './usage-error.ts';

/**
 * What a person sees for an error, and the exit code: 2 for usage, 1 for everything else.
 * (Errors are told apart by name, so that this module loads none of the modules that throw them.)
 */
export function describeError(error: unknown): { message: string; code: number } {
  if (error instanceof UsageError) return { message: error.message, code: 2 };
  const system = error as NodeJS.ErrnoException & { address?: string; port?: number };
  if (system?.code === 'EADDRINUSE') {
    return {
      message: `port ${system.port} on ${system.address} is already in use: pick another with --port <n> (or stop what listens there)`,
      code: 1,
    };
  }
  if (error instanceof Error && error.name === 'PrismaSchemaError')
    return { message: `schema.prisma is invalid:\n${error.message}`, code: 1 };
  if (error instanceof Error) return { message: error.message, code: 1 };
  return { message: String(error), code: 1 };
}
