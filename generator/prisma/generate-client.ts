// Runs Prisma's `prisma-client` generator (the TypeScript one of Prisma 7)
// in-process and offline: `prisma generate` would first try to download a
// schema-engine binary, which fails without internet.
import path from 'node:path';
import { forceClientGenerator } from './forced-generator.ts';
import { loadGeneratorRegistry, loadInternals } from './prisma-packages.ts';

export interface GeneratePrismaClientOptions {
  schemaText: string;
  /** Absolute path; Prisma empties it first (it refuses if it holds something that is not a generated client). */
  outputDir: string;
}

/**
 * Writes the Prisma client for `schemaText` into `outputDir`. Any generator
 * block of the schema is replaced by svcgen's (see forced-generator.ts); the
 * datasource and models are untouched. Output is byte-identical across runs
 * and output directories and holds no absolute path of this machine.
 */
export async function generatePrismaClient(opts: GeneratePrismaClientOptions): Promise<void> {
  if (!path.isAbsolute(opts.outputDir)) {
    throw new Error(`generatePrismaClient: outputDir must be absolute, got "${opts.outputDir}"`);
  }
  const outputDir = path.normalize(opts.outputDir);
  const schemaText = await forceClientGenerator(opts.schemaText);

  const internals = loadInternals();
  // The schema is never written to disk: Prisma is told it lives at
  // <outputDir>/schema.prisma so that the forced `output = "."` resolves to
  // outputDir. (The generator deletes stale *.prisma files in outputDir, but
  // nothing is read from that path.)
  const virtualSchemaPath = path.join(outputDir, 'schema.prisma');
  const schemaContext = await internals.processSchemaResult({
    schemaResult: {
      schemaPath: virtualSchemaPath,
      schemaRootDir: outputDir,
      schemas: [[virtualSchemaPath, schemaText]],
    },
    printLoadMessage: false,
  });

  const generators = await internals.getGenerators({
    schemaContext,
    registry: loadGeneratorRegistry().defaultRegistry.toInternal(),
    // prisma-client needs no engine binary; skipDownload keeps getGenerators off the network.
    skipDownload: true,
    printDownloadProgress: false,
    cliCommand: 'svcgen',
  });
  try {
    for (const generator of generators) {
      await generator.generate();
    }
  } finally {
    for (const generator of generators) generator.stop();
  }
}
