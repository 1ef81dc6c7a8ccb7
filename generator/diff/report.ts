/** The lines `svcgen diff` prints, shared with `svcgen dev` so that both read the same. */
import type { ConfigChange } from './diff-config.ts';
import type { ApiChange } from './diff-models.ts';

export type Change = ApiChange | ConfigChange;

export function widensAccess(change: Change): boolean {
  return 'access' in change && change.access === 'widens';
}

/** `BREAKING`, `WIDENS ACCESS`, both, or blank. */
function marker(change: Change): string {
  return [change.breaking ? 'BREAKING' : '', widensAccess(change) ? 'WIDENS ACCESS' : ''].filter(Boolean).join(', ');
}

export function summarize(changes: readonly Change[]): { breaking: number; widens: number } {
  return { breaking: changes.filter((c) => c.breaking).length, widens: changes.filter(widensAccess).length };
}

/** One line per change, then a count; the marker column is as wide as its widest marker. */
export function reportLines(changes: readonly Change[]): string[] {
  if (changes.length === 0) return ['no API changes'];
  const markerWidth = Math.max('BREAKING'.length, ...changes.map((c) => marker(c).length));
  const kindWidth = Math.max(...changes.map((c) => c.kind.length));
  const lines = changes.map(
    (c) => `${marker(c).padEnd(markerWidth)}  ${c.kind.padEnd(kindWidth)}  ${c.subject}  ${c.detail}`,
  );
  const { breaking, widens } = summarize(changes);
  lines.push(
    `${changes.length} change${changes.length === 1 ? '' : 's'}, ${breaking} breaking, ${widens} widening access`,
  );
  return lines;
}
