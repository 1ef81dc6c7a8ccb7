/**
 * Citations of the documentation and where they lead, for test/docs/references.unit.test.ts.
 *
 * Code cites a page as `docs/<page>.md`, `README` or `bench/RESULTS.md`, optionally followed by what
 * in it: headings in quotes (`docs/storage.md "Long uploads"`, `README "A project", "Command line"`),
 * section numbers of docs/api.md (`docs/api.md §7`, `§5.3–5.10`, `5.5`) or an anchor
 * (`docs/api.md#516-idempotency-keys`). A citation may wrap onto the comment's next line. Pages link
 * with markdown links (`[x](api.md#61-problem-details-data-key-and-webhook-routes)`), whose anchor is
 * GitHub's slug of a heading. A quote after a colon (`docs/api.md: "date-time with offset"`) quotes
 * the page's text, not a heading, and is not checked.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/** One broken reference, as `file:line: what — why`. */
export interface BrokenReference {
  file: string;
  line: number;
  cites: string;
  problem: string;
}

export function formatBroken(b: BrokenReference): string {
  return `${b.file}:${b.line}: cites ${b.cites} — ${b.problem}`;
}

/** The headings of a markdown page, outside code fences: their text, GitHub slugs and section numbers. */
export interface PageHeadings {
  texts: Set<string>;
  slugs: Set<string>;
  sections: Set<string>;
}

/** Markup a heading's text loses in comparisons: backticks, emphasis, link syntax. */
function plainText(markdown: string): string {
  return markdown
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*]/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}

function normalize(heading: string): string {
  return plainText(heading).toLowerCase();
}

/** GitHub's anchor of a heading: lower case, only letters, digits, spaces, `-` and `_`, spaces as `-`. */
export function githubSlug(heading: string): string {
  return plainText(heading)
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/ /g, '-');
}

/**
 * A run-in heading: the bold words a paragraph or list item starts with (`**Concurrent writes.** …`,
 * `- **Limits**: …`). The pages name their rules this way inside a section, and code cites them in
 * quotes like headings; they have no anchor.
 */
const RUN_IN = /^\s*(?:[-*]\s+)?\*\*(.+?)[.:]?\*\*/;

const NUMBERED = /^(\d+(?:\.\d+)*)\.?\s+(.*)$/;

export function pageHeadings(markdown: string): PageHeadings {
  const headings: PageHeadings = { texts: new Set(), slugs: new Set(), sections: new Set() };
  const seen = new Map<string, number>();
  let fence: string | undefined;
  for (const line of markdown.split('\n')) {
    const fenceMark = /^\s*(```|~~~)/.exec(line)?.[1];
    if (fenceMark !== undefined) {
      if (fence === undefined) fence = fenceMark;
      else if (fence === fenceMark) fence = undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const runIn = RUN_IN.exec(line)?.[1];
    if (runIn !== undefined) headings.texts.add(normalize(runIn));
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    headings.texts.add(normalize(heading));
    const numbered = NUMBERED.exec(plainText(heading));
    if (numbered) {
      headings.sections.add(numbered[1]!);
      // `docs/api.md "Idempotency keys"` names `### 5.16 Idempotency keys` without its number
      headings.texts.add(normalize(numbered[2]!));
    }
    // GitHub numbers repeated slugs: `usage`, `usage-1`, ...
    const slug = githubSlug(heading);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    headings.slugs.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return headings;
}

/** Reads pages once per check; `undefined` when the file does not exist. */
export class Pages {
  private readonly cache = new Map<string, PageHeadings | undefined>();
  constructor(readonly root: string) {}

  /** `path` relative to the repository root. */
  headings(path: string): PageHeadings | undefined {
    if (!this.cache.has(path)) {
      const full = join(this.root, path);
      this.cache.set(path, existsSync(full) ? pageHeadings(readFileSync(full, 'utf8')) : undefined);
    }
    return this.cache.get(path);
  }
}

// Between the page and what in it is cited: spaces, a comma, or the end of a comment line and the
// next line's comment marker (` * `, `// `, `# `).
const GAP = String.raw`(?:,?[ \t]+|,?[ \t]*\r?\n[ \t]*(?:\*(?!\/)|\/\/+|#)?[ \t]*)`;
// `§7`, `§5.16`, `§5.3–5.10`; without `§` only a dotted number (`5.5`), not any count that follows a page.
const SECTION = String.raw`(?:§\d+(?:\.\d+)*|\d+\.\d+)(?:[–-]\d+(?:\.\d+)*)?(?!\.?\w)`;
// A quoted heading may wrap onto the next comment line.
const QUOTED = String.raw`"[^"\n]+(?:\n[ \t]*(?:\*|\/\/+|#)?[ \t]*[^"\n]+)?"|'[^'\n]+'`;
const PAGE = String.raw`(?<![\w/.-])(docs\/[\w-]+\.md|README(?:\.md)?|bench\/RESULTS\.md)(?![\w/])`;
const CITATION = new RegExp(String.raw`${PAGE}(?:#([\w-]+))?((?:${GAP}(?:${QUOTED}|${SECTION}))*)`, 'g');
const ITEM = new RegExp(`${QUOTED}|${SECTION}`, 'g');

/** Spec files of the project's authors that are not part of this repository. */
const OUTSIDE =
  /(?<![\w/.-])(?:(?:\.\.\/)+shared\/[\w./-]*|(?:[\w.-]*\/)*(?:TOOLCHAIN|CONTRACT|STYLE|backend-service-interface)\.md)/g;

function lineOf(text: string, index: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < index; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

/** The broken citations of docs in one source file (`file` relative to the root, for messages). */
export function checkCitations(pages: Pages, file: string, text: string): BrokenReference[] {
  const broken: BrokenReference[] = [];
  for (const m of text.matchAll(CITATION)) {
    const line = lineOf(text, m.index);
    const page = m[1] === 'README' ? 'README.md' : m[1]!;
    const headings = pages.headings(page);
    if (headings === undefined) {
      broken.push({ file, line, cites: page, problem: 'no such file' });
      continue;
    }
    if (m[2] !== undefined && !headings.slugs.has(m[2])) {
      broken.push({ file, line, cites: `${page}#${m[2]}`, problem: 'no such heading' });
    }
    for (const item of (m[3] ?? '').matchAll(ITEM)) {
      const cited = item[0];
      if (cited.startsWith('"') || cited.startsWith("'")) {
        const heading = cited.slice(1, -1).replace(/\s*\n[ \t]*(?:\*|\/\/+|#)?[ \t]*/g, ' ');
        if (!headings.texts.has(normalize(heading))) {
          broken.push({ file, line, cites: `${page} "${heading}"`, problem: 'no such heading' });
        }
        continue;
      }
      for (const section of cited.replace('§', '').split(/[–-]/)) {
        if (!headings.sections.has(section)) {
          broken.push({ file, line, cites: `${page} §${section}`, problem: 'no such numbered heading' });
        }
      }
    }
  }
  for (const m of text.matchAll(OUTSIDE)) {
    broken.push({ file, line: lineOf(text, m.index), cites: m[0], problem: 'not a file of this repository' });
  }
  return broken;
}

/** The broken markdown links of one page (`file` relative to the root): missing files, anchors. */
export function checkLinks(pages: Pages, file: string, markdown: string): BrokenReference[] {
  const broken: BrokenReference[] = [];
  const own = pageHeadings(markdown);
  let fence: string | undefined;
  markdown.split('\n').forEach((text, i) => {
    const fenceMark = /^\s*(```|~~~)/.exec(text)?.[1];
    if (fenceMark !== undefined) {
      if (fence === undefined) fence = fenceMark;
      else if (fence === fenceMark) fence = undefined;
      return;
    }
    if (fence !== undefined) return;
    // Inline code may show link syntax without being a link.
    const prose = text.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z+.-]*:/i.test(target)) continue; // https:, mailto:
      const [path, anchor] = target.split('#', 2) as [string, string | undefined];
      const where = { file, line: i + 1, cites: target };
      if (path === '') {
        if (!own.slugs.has(anchor!)) broken.push({ ...where, problem: 'no such heading' });
        continue;
      }
      const full = resolve(pages.root, dirname(file), path);
      const inRepo = relative(pages.root, full);
      if (inRepo.startsWith('..')) {
        broken.push({ ...where, problem: 'not a file of this repository' });
      } else if (!existsSync(full)) {
        broken.push({ ...where, problem: 'no such file' });
      } else if (anchor !== undefined && inRepo.endsWith('.md') && !pages.headings(inRepo)!.slugs.has(anchor)) {
        broken.push({ ...where, problem: 'no such heading' });
      }
    }
  });
  return broken;
}
