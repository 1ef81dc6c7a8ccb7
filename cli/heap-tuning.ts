/**
 * The V8 setting `svcgen serve` changes for itself (docs/deployment.md, "Garbage collection").
 *
 * V8 "pretenures" an allocation site (a literal, an `new Array(n)`) once most of the objects it
 * made were still alive at a young-generation collection: from then on it allocates them straight
 * in the old generation. A server under load trips that rule with objects that live exactly one
 * request (while the young generation is still small at start-up, most requests in flight outlive
 * a collection), and the decision sticks: pg's result rows, among others, then live in the old
 * generation, every young string and array they point to is copied at each young collection, and
 * dead requests pile up until a full collection. Measured on a page of 20 records at saturation:
 * 40 µs per request of collector threads and 15-20 % fewer requests a second in the processes
 * where it happened, and it happened in most. Without pretenuring, such objects die young.
 */
import v8 from 'node:v8';

const FLAG = 'allocation-site-pretenuring';
/** The flag on Node's command line, set either way (`--no-…`, `=true`, underscores). */
const GIVEN = /^--(no-?)?allocation[-_]site[-_]pretenuring(=|$)/;

/**
 * Turns V8's allocation-site pretenuring off for this process, before it serves, unless the
 * operator set the flag on Node's command line either way (`node --allocation-site-pretenuring ...`
 * keeps it).
 * Returns whether it changed the setting. The runtime never calls it: a program that embeds
 * startServer owns its process's flags.
 */
export function tuneHeapForServing(execArgv: readonly string[] = process.execArgv): boolean {
  if (execArgv.some((arg) => GIVEN.test(arg))) return false;
  v8.setFlagsFromString(`--no-${FLAG}`);
  return true;
}
