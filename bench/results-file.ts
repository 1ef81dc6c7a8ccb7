/** bench/RESULTS.md is written by several scripts, each owning one `## ` section of it. */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { REPO } from './children.ts';
import { redact } from './database.ts';

/** Replaces the section that starts with `heading` in the results file, or appends it; the rest stays as it is. */
export function writeSection(file: string, heading: string, section: string): void {
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const lines = text.split('\n');
  const start = lines.findIndex((line) => line.trim() === heading);
  const body = section.replace(/\n+$/, '').split('\n');
  let next: string[];
  if (start === -1) {
    const kept = text.replace(/\n+$/, '');
    next = kept ? [...kept.split('\n'), '', ...body, ''] : [...body, ''];
  } else {
    let end = lines.findIndex((line, i) => i > start && /^## /.test(line));
    if (end === -1) end = lines.length;
    const after = lines.slice(end);
    next = [...lines.slice(0, start), ...body, ...(after.length ? ['', ...after] : [''])];
  }
  fs.writeFileSync(file, next.join('\n'));
}

/** The section that starts with `heading`, as the file holds it (empty when absent). */
export function readSection(file: string, heading: string): string {
  if (!fs.existsSync(file)) return '';
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const start = lines.findIndex((line) => line.trim() === heading);
  if (start === -1) return '';
  const end = lines.findIndex((line, i) => i > start && /^## /.test(line));
  return `\n${lines
    .slice(start, end === -1 ? undefined : end)
    .join('\n')
    .replace(/\n+$/, '')}\n`;
}

/** The commit measured, and whether runtime/ had uncommitted changes (read before the servers start). */
export function gitRevision(): string {
  try {
    const git = (...args: string[]) =>
      execFileSync('git', args, { cwd: REPO, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = git('status', '--porcelain', '--', 'runtime').length > 0;
    return `${git('rev-parse', '--short', 'HEAD')}${dirty ? ' with uncommitted changes in runtime/' : ''}`;
  } catch {
    return 'unknown (not a git checkout)';
  }
}

/** When a section was written, as its first line says it: `2026-11-23 16:21 UTC`. */
export function reportDate(): string {
  return `${new Date().toISOString().replace('T', ' ').slice(0, 16)} UTC`;
}

/** How this run was started: the BENCH_ variables set (the database URL without its password), and the script. */
export function commandLine(script: string): string {
  const quote = (v: string) => (/^[\w@%+=:,./-]*$/.test(v) ? v : `'${v.replaceAll("'", "'\\''")}'`);
  const vars = Object.entries(process.env)
    .filter(([name]) => name.startsWith('BENCH_') || name === 'SVCGEN_BENCH_DATABASE_URL')
    .map(([name, value]) => `${name}=${quote(name === 'SVCGEN_BENCH_DATABASE_URL' ? redact(value!) : value!)}`)
    .sort();
  const npmScript = process.env.npm_lifecycle_event;
  return [...vars, npmScript ? `npm run ${npmScript}` : `node bin/run-ts.js ${script}`].join(' ');
}
