/**
 * `svcgen check`'s second half (docs/own-code.md "Where the code lives"): the project's own code
 * type-checked against its generated types with TypeScript's compiler (the one ts-morph brings), so
 * that a hook returning the wrong type or a misspelt field fails in CI rather than at run time.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../runtime/config/index.ts';
import { codeEntry } from './project.ts';

export interface CodeCheck {
  /** The code entry checked; undefined when the project has no code. */
  readonly entry?: string;
  /** One line per error: `file:line:column - error TS<code>: message` (file relative to the project). */
  readonly errors: readonly string[];
}

/** Without a tsconfig.json in the project: what `svcgen init` would choose, strict. */
const DEFAULT_OPTIONS = {
  target: 'ES2022',
  module: 'NodeNext',
  moduleResolution: 'NodeNext',
  strict: true,
  noEmit: true,
  allowImportingTsExtensions: true,
  resolveJsonModule: true,
  esModuleInterop: true,
  skipLibCheck: true,
};

/**
 * This svcgen's source (a checkout run through tsx): its package root, else undefined (installed:
 * dist/ has the types). A checkout's dist/, when `npm pack` left one, is not what runs: the source is.
 */
function checkoutRoot(): string | undefined {
  if (!import.meta.url.endsWith('.ts')) return undefined;
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
}

export async function checkCode(projectDir: string): Promise<CodeCheck> {
  const config = await loadConfig(projectDir);
  const entry = await codeEntry(projectDir, config);
  if (entry === undefined) return { errors: [] };
  const { Project, ts } = await import('ts-morph');
  const tsconfig = path.join(projectDir, 'tsconfig.json');
  const hasTsconfig = existsSync(tsconfig);
  // ts-morph's Project: TypeScript with its lib files at hand (the bare compiler looks for them on disk).
  const project = new Project(
    hasTsconfig
      ? { tsConfigFilePath: tsconfig, skipAddingFilesFromTsConfig: true, compilerOptions: { noEmit: true } }
      : { compilerOptions: ts.convertCompilerOptionsFromJson(DEFAULT_OPTIONS, projectDir).options },
  );
  const options = project.compilerOptions.get();
  // A checkout's svcgen has no dist/ types: its package names resolve to its source, as in its own tsconfig.
  const root = checkoutRoot();
  if (root && !options.paths?.svcgen) {
    project.compilerOptions.set({
      paths: {
        ...options.paths,
        svcgen: [path.join(root, 'runtime/usercode/public.ts')],
        'svcgen/model': [path.join(root, 'runtime/model/index.ts')],
        'svcgen/runtime': [path.join(root, 'runtime/index.ts')],
        'svcgen/testing': [path.join(root, 'cli/testing.ts')],
      },
    });
  }
  project.addSourceFileAtPath(entry);
  project.resolveSourceFileDependencies();
  const diagnostics = project
    .getPreEmitDiagnostics()
    .map((d) => d.compilerObject)
    .filter((d) => d.category === ts.DiagnosticCategory.Error);
  return { entry, errors: diagnostics.map((d) => format(ts, projectDir, d)) };
}

function format(ts: typeof import('ts-morph').ts, projectDir: string, d: import('ts-morph').ts.Diagnostic): string {
  const message = ts.flattenDiagnosticMessageText(d.messageText, '\n  ');
  if (!d.file || d.start === undefined) return `error TS${d.code}: ${message}`;
  const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
  return `${path.relative(projectDir, d.file.fileName)}:${line + 1}:${character + 1} - error TS${d.code}: ${message}`;
}
