// Rewrites a caller's schema so that it holds exactly one generator: svcgen's
// `prisma-client` generator. Everything else (datasource, models, enums,
// comments) is left byte-for-byte untouched, and Prisma itself confirms it.
import { readDmmf, readSchemaConfig } from './dmmf.ts';
import { findTopLevelBlocks } from './schema-blocks.ts';

export const CLIENT_GENERATOR_NAME = 'client';

/**
 * The generator block svcgen forces.
 *
 * - `output = "."` is resolved by Prisma against the directory of the schema
 *   file; generate-client.ts presents the schema as living inside the output
 *   directory, so this means "the output directory" without writing this
 *   machine's absolute path into the schema, which the generated client embeds
 *   verbatim (`inlineSchema` in internal/class.ts).
 * - runtime/moduleFormat/file extensions are pinned because otherwise the
 *   generator infers them from whatever tsconfig.json / package.json happens to
 *   be above the output directory, so the same schema would give different
 *   code in different folders. "ts" imports match svcgen (ESM, run via tsx,
 *   `allowImportingTsExtensions`).
 * - previewFeatures of the caller's generators are kept: they change what
 *   Prisma accepts and what the client contains.
 */
export function clientGeneratorBlock(previewFeatures: readonly string[]): string {
  const lines = [
    `generator ${CLIENT_GENERATOR_NAME} {`,
    '  provider               = "prisma-client"',
    '  output                 = "."',
    '  runtime                = "nodejs"',
    '  moduleFormat           = "esm"',
    '  generatedFileExtension = "ts"',
    '  importFileExtension    = "ts"',
  ];
  if (previewFeatures.length > 0) {
    lines.push(`  previewFeatures        = [${previewFeatures.map((f) => JSON.stringify(f)).join(', ')}]`);
  }
  lines.push('}');
  return lines.join('\n');
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Returns `schemaText` with its generator blocks replaced by
 * clientGeneratorBlock() (inserted at the top when there was none).
 * Throws PrismaSchemaError for an invalid schema.
 */
export async function forceClientGenerator(schemaText: string): Promise<string> {
  // Validates the whole schema first, so an invalid one fails with Prisma's message.
  const originalDmmf = await readDmmf(schemaText);
  const originalConfig = await readSchemaConfig(schemaText);

  const blocks = findTopLevelBlocks(schemaText).filter((b) => b.keyword === 'generator');
  const located = blocks.map((b) => b.name).sort();
  const expected = originalConfig.generators.map((g) => g.name).sort();
  if (!sameJson(located, expected)) {
    throw new Error(
      `Could not locate the generator blocks of the schema: Prisma reports [${expected.join(', ')}], ` +
        `found [${located.join(', ')}]`,
    );
  }

  const previewFeatures = [...new Set(originalConfig.generators.flatMap((g) => g.previewFeatures))].sort();
  const replacement = clientGeneratorBlock(previewFeatures);

  let rewritten: string;
  if (blocks.length === 0) {
    rewritten = `${replacement}\n\n${schemaText}`;
  } else {
    const parts: string[] = [];
    let cursor = 0;
    blocks.forEach((block, index) => {
      parts.push(schemaText.slice(cursor, block.start));
      if (index === 0) {
        parts.push(replacement);
        cursor = block.end;
      } else {
        // Drop the removed block's own line break too, to avoid leaving blank lines behind.
        const lineBreak = /^\r?\n/.exec(schemaText.slice(block.end));
        cursor = block.end + (lineBreak ? lineBreak[0].length : 0);
      }
    });
    parts.push(schemaText.slice(cursor));
    rewritten = parts.join('');
  }

  // Prisma confirms the rewrite: one generator (ours), same datasources, same datamodel.
  const rewrittenConfig = await readSchemaConfig(rewritten);
  const rewrittenDmmf = await readDmmf(rewritten);
  const generators = rewrittenConfig.generators;
  if (
    generators.length !== 1 ||
    generators[0].name !== CLIENT_GENERATOR_NAME ||
    generators[0].provider.value !== 'prisma-client' ||
    !sameJson(rewrittenConfig.datasources, originalConfig.datasources) ||
    !sameJson(rewrittenDmmf.datamodel, originalDmmf.datamodel)
  ) {
    throw new Error('Internal error: forcing the prisma-client generator changed more than the generator blocks');
  }
  return rewritten;
}
