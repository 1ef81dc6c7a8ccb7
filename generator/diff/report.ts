/** The lines `svcgen diff` prints, shared with `svcgen dev` so that both read the same. */
import type { ConfigChange } from './access.ts';
import type { GraphqlChange } from './diff-graphql.ts';
import type { ApiChange } from './diff-models.ts';

export type Change = ApiChange | ConfigChange;

/** A change of the model (REST), not of the permissions or settings. */
export function isModelChange(change: Change): change is ApiChange {
  return !('access' in change);
}

export function widensAccess(change: Change): boolean {
  return 'access' in change && change.access === 'widens';
}

/** `BREAKING`, `WIDENS ACCESS`, both, or blank. */
function marker(change: Change): string {
  return [change.breaking ? 'BREAKING' : '', widensAccess(change) ? 'WIDENS ACCESS' : ''].filter(Boolean).join(', ');
}

/** Breaking entries of both lists (the exit code's), and the changes that widen access. */
export function summarize(
  changes: readonly Change[],
  graphql: readonly GraphqlChange[] = [],
): { breaking: number; widens: number } {
  return {
    breaking: changes.filter((c) => c.breaking).length + graphql.filter((c) => c.breaking).length,
    widens: changes.filter(widensAccess).length,
  };
}

/**
 * One line per change, then the GraphQL schema's changes under `GraphQL:`, then a count; each
 * part's marker column is as wide as its widest marker.
 */
export function reportLines(changes: readonly Change[], graphql: readonly GraphqlChange[] = []): string[] {
  if (changes.length === 0 && graphql.length === 0) return ['no API changes'];
  const lines: string[] = [];
  if (changes.length) {
    const markerWidth = Math.max('BREAKING'.length, ...changes.map((c) => marker(c).length));
    const kindWidth = Math.max(...changes.map((c) => c.kind.length));
    for (const c of changes)
      lines.push(`${marker(c).padEnd(markerWidth)}  ${c.kind.padEnd(kindWidth)}  ${c.subject}  ${c.detail}`);
  }
  if (graphql.length) {
    lines.push('GraphQL:');
    const typeWidth = Math.max(...graphql.map((c) => c.type.length));
    for (const c of graphql)
      lines.push(
        `${(c.breaking ? 'BREAKING' : '').padEnd('BREAKING'.length)}  ${c.type.padEnd(typeWidth)}  ${c.description}`,
      );
  }
  const { breaking, widens } = summarize(changes, graphql);
  const total = changes.length + graphql.length;
  const inGraphql = graphql.length ? ` (${graphql.length} in the GraphQL schema)` : '';
  lines.push(`${total} change${total === 1 ? '' : 's'}${inGraphql}, ${breaking} breaking, ${widens} widening access`);
  return lines;
}
