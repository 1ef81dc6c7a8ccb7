/**
 * Every reference to the documentation leads somewhere (test/support/doc-references.ts says which
 * forms are read): a page cited from code exists, and so do the headings, section numbers and
 * anchors cited with it; every markdown link of docs/, README.md and bench/RESULTS.md leads to a file
 * of this repository and, with an anchor, to a heading of that page. Code cites only files of this
 * repository. The failure lists every broken reference as `file:line: cites … — why`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { checkCitations, checkLinks, formatBroken, githubSlug, Pages } from '../support/doc-references.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Where code lives (examples/*\/generated included: generated files cite docs too). */
const SOURCE_ROOTS = ['runtime', 'cli', 'generator', 'templates', 'bin', 'bench', 'test', 'examples'];
const SOURCE_FILES = ['.ci/run'];
const TEXT = /\.(?:ts|js|mjs|cjs|hbs|prisma|json|sql|toml|graphql|md)$/;
/** Installed packages, and what tests, benches and builds write (.gitignore). */
const SKIPPED = new Set(['node_modules', '.svcgen', '.generated', 'coverage', 'dist', 'test-artifacts']);

function walk(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return SKIPPED.has(entry.name) ? [] : walk(path);
    return TEXT.test(entry.name) ? [path] : [];
  });
}

const sources = [...SOURCE_ROOTS.flatMap(walk), ...SOURCE_FILES];
const pagesWithLinks = ['README.md', 'bench/RESULTS.md', ...walk('docs').filter((p) => p.endsWith('.md'))];

describe('references to the documentation', () => {
  it('every docs page, heading, section and anchor cited from code exists', () => {
    const pages = new Pages(ROOT);
    const broken = sources.flatMap((file) => checkCitations(pages, file, readFileSync(join(ROOT, file), 'utf8')));
    expect(sources.length).toBeGreaterThan(400);
    expect(broken.map(formatBroken).join('\n')).toBe('');
  });

  it('every markdown link of docs/, README.md and bench/RESULTS.md leads to a file and heading of the repository', () => {
    const pages = new Pages(ROOT);
    const broken = pagesWithLinks.flatMap((file) => checkLinks(pages, file, readFileSync(join(ROOT, file), 'utf8')));
    expect(pagesWithLinks).toContain('docs/api.md');
    expect(broken.map(formatBroken).join('\n')).toBe('');
  });
});

// The checker itself, on text written here: each broken form is reported, each sound one is not.
// Page names are assembled so that this file's own scan does not read these examples.
const API = ['docs', 'api.md'].join('/');
const STORAGE = ['docs', 'storage.md'].join('/');
const MISSING = ['docs', 'nope.md'].join('/');
const README = ['READ', 'ME'].join('');
const TOOLCHAIN = ['TOOLCHAIN', 'md'].join('.');
const PAGE = ['docs', 'x.md'].join('/');
const SHARED = ['..', '..', 'shared'].join('/');

describe('the checker', () => {
  const pages = new Pages(ROOT);
  const cases: [string, { given: string; want: string[] }][] = [
    ['a heading that exists', { given: `// (${API} "Order of checks")`, want: [] }],
    ['a numbered heading by its words', { given: `// ${API} "Idempotency keys"`, want: [] }],
    ['a run-in heading', { given: `// ${API} §6.2, "Concurrent writes"`, want: [] }],
    [
      'a heading that does not exist',
      { given: `x\n// (${API} "Order of things")`, want: [`f.ts:2: cites ${API} "Order of things" — no such heading`] },
    ],
    [
      'a heading in single quotes, after a comma',
      { given: `// ${STORAGE}, 'Long uplods'`, want: [`f.ts:1: cites ${STORAGE} "Long uplods" — no such heading`] },
    ],
    [
      'a heading on the comment line after the page',
      {
        given: ` * see ${STORAGE}\n * "Long\n * uploads", "Nope")`,
        want: [`f.ts:1: cites ${STORAGE} "Nope" — no such heading`],
      },
    ],
    ['sections that exist', { given: `// ${API} §7 "Limits", §5.3–5.10, 5.5.`, want: [] }],
    [
      'sections that do not',
      {
        given: `// ${API} §5.99, §5.3–5.40`,
        want: [
          `f.ts:1: cites ${API} §5.99 — no such numbered heading`,
          `f.ts:1: cites ${API} §5.40 — no such numbered heading`,
        ],
      },
    ],
    ['an anchor that exists', { given: `// ${API}#516-idempotency-keys`, want: [] }],
    [
      'an anchor that does not',
      { given: `// ${API}#516-idempotency`, want: [`f.ts:1: cites ${API}#516-idempotency — no such heading`] },
    ],
    ['a page that does not exist', { given: `// ${MISSING}`, want: [`f.ts:1: cites ${MISSING} — no such file`] }],
    [
      'a README heading',
      {
        given: `// ${README} "Decisions", "Your model"`,
        want: [`f.ts:1: cites ${README}.md "Your model" — no such heading`],
      },
    ],
    [
      'a spec outside this repository by path',
      {
        given: `// ${SHARED}/${TOOLCHAIN}`,
        want: [`f.ts:1: cites ${SHARED}/${TOOLCHAIN} — not a file of this repository`],
      },
    ],
    ['a quote after a colon is the page’s text', { given: `// ${API}: "date-time with offset"`, want: [] }],
    [
      'a spec outside this repository',
      {
        given: `# (${TOOLCHAIN} "Headless Chromium")`,
        want: [`f.ts:1: cites ${TOOLCHAIN} — not a file of this repository`],
      },
    ],
  ];
  it.each(cases)('%s', (_, { given, want }) => {
    expect(checkCitations(pages, 'f.ts', given).map(formatBroken)).toEqual(want);
  });

  it('reads markdown links: files, anchors, the page itself, nothing in code', () => {
    const page = [
      '[ok](api.md#61-problem-details-data-key-and-webhook-routes) [web](https://example.com/x#y)',
      `[bad anchor](api.md#61-problem) [no file](nope.md) [outside](${SHARED}/${['CONTRACT', 'md'].join('.')})`,
      '[here](#a-heading) [not here](#b) `[code](nope.md)`',
      '```',
      '[in a fence](nope.md)',
      '```',
      '## A heading',
    ].join('\n');
    expect(checkLinks(pages, PAGE, page).map(formatBroken)).toEqual([
      `${PAGE}:2: cites api.md#61-problem — no such heading`,
      `${PAGE}:2: cites nope.md — no such file`,
      `${PAGE}:2: cites ${SHARED}/${['CONTRACT', 'md'].join('.')} — not a file of this repository`,
      `${PAGE}:3: cites #b — no such heading`,
    ]);
  });

  it.each([
    ['6.1 Problem Details (data, key and webhook routes)', '61-problem-details-data-key-and-webhook-routes'],
    ['`svcgen.config.json`', 'svcgenconfigjson'],
    ['Rate limits of `/auth`', 'rate-limits-of-auth'],
    ['Stopping: SIGTERM and draining', 'stopping-sigterm-and-draining'],
  ])('GitHub slug of %s is %s', (heading, slug) => {
    expect(githubSlug(heading)).toBe(slug);
  });
});
