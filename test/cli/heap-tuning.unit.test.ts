/**
 * `svcgen serve` turns V8's allocation-site pretenuring off for its process (cli/heap-tuning.ts,
 * docs/deployment.md "Garbage collection"). Measured through V8's own trace of its pretenuring
 * decisions, in a child that allocates objects which outlive young collections.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tuneHeapForServing } from '../../cli/heap-tuning.ts';

const REPO = path.resolve(import.meta.dirname, '../..');

/** The sites V8 decided to pretenure in a child running the fixture, and what it printed. */
function pretenuredSites(nodeFlags: string[], args: string[]): { tenured: number; output: string } {
  const output = execFileSync(
    process.execPath,
    [...nodeFlags, '--trace-pretenuring-statistics', 'bin/run-ts.js', 'test/fixtures/heap-tuning/allocate.ts', ...args],
    { cwd: REPO, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  return { tenured: output.split('\n').filter((line) => /=> tenure\b/.test(line)).length, output };
}

describe('tuneHeapForServing', () => {
  it('without it, V8 pretenures the long-lived literal (the trace this test reads works)', () => {
    const { tenured, output } = pretenuredSites([], []);
    expect(output).toContain('kept ');
    expect(tenured).toBeGreaterThan(0);
  }, 60_000);

  it('turns pretenuring off: V8 pretenures nothing afterwards', () => {
    const { tenured, output } = pretenuredSites([], ['--tune']);
    expect(output).toContain('changed: true');
    expect(tenured).toBe(0);
  }, 60_000);

  it('leaves the flag alone when Node was started with it', () => {
    const { tenured, output } = pretenuredSites(['--allocation-site-pretenuring'], ['--tune']);
    expect(output).toContain('changed: false');
    expect(tenured).toBeGreaterThan(0);
  }, 60_000);

  it('knows the flag in each spelling Node and V8 take', () => {
    for (const given of [
      '--allocation-site-pretenuring',
      '--no-allocation-site-pretenuring',
      '--allocation_site_pretenuring=true',
      '--noallocation-site-pretenuring',
    ]) {
      expect(tuneHeapForServing([given]), given).toBe(false);
    }
  });
});
