/**
 * Summary of a V8 CPU profile (.cpuprofile, as written by --cpu-prof or the inspector): self time
 * by category (express, pg, JSON, svcgen runtime, ...) and the top functions by self time.
 *
 * Native frames without a script (builtins such as RegExp exec or Buffer ops) are charged to the
 * category of their nearest JavaScript caller, except JSON.parse / JSON.stringify and the socket
 * write system calls, which get categories of their own. `(program)` is V8 and libuv work outside
 * JavaScript, `(idle)` is the event loop waiting.
 *
 * The profiler samples the main thread's wall time, not its CPU time: a sample that lands while
 * the thread is inside a write system call counts there even when the thread is not running —
 * on loopback the kernel delivers the data to the receiver within the call and the wakeup can
 * hand the CPU to the receiver (PostgreSQL, the load generator). On a saturated machine that
 * category is mostly waiting for a CPU; compare the busy total with the process's CPU time.
 */
import fs from 'node:fs';
import path from 'node:path';
import { REPO } from './children.ts';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  /** wall time covered by the profile, ms */
  wallMs: number;
  /** CPU time on the main thread (everything but idle), ms */
  busyMs: number;
  categories: { name: string; ms: number }[];
  top: { name: string; location: string; category: string; ms: number }[];
}

export const IDLE = 'idle';
/** node's stream_base bindings: each one is a write(v) system call on a socket */
const SOCKET_WRITES = new Set([
  'writev',
  'writeBuffer',
  'writeUtf8String',
  'writeLatin1String',
  'writeAsciiString',
  'writeUcs2String',
]);
export const SOCKET_WRITE_CATEGORY = 'socket write syscalls (wall time, see note)';

const EXPRESS_PACKAGES = new Set([
  'express',
  'router',
  'path-to-regexp',
  'finalhandler',
  'on-finished',
  'parseurl',
  'encodeurl',
  'escape-html',
  'depd',
  'merge-descriptors',
  'utils-merge',
  'vary',
  'accepts',
  'negotiator',
  'type-is',
  'content-type',
  'mime-types',
  'mime-db',
  'send',
  'serve-static',
  'body-parser',
  'qs',
  'debug',
  'ms',
  'statuses',
  'http-errors',
  'setprototypeof',
  'inherits',
  'is-promise',
  'fresh',
  'range-parser',
  'etag',
  'cookie',
  'cookie-signature',
  'proxy-addr',
  'forwarded',
  'ipaddr.js',
  'content-disposition',
  'once',
  'wrappy',
  'ee-first',
  'unpipe',
  'methods',
  'media-typer',
  'raw-body',
  'iconv-lite',
  'bytes',
  'toidentifier',
  'safe-buffer',
  'safer-buffer',
  'destroy',
  'call-bind-apply-helpers',
  'function-bind',
]);

function packageOf(url: string): string | undefined {
  const i = url.lastIndexOf('/node_modules/');
  if (i === -1) return undefined;
  const rest = url.slice(i + '/node_modules/'.length).split('/');
  return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
}

function categoryOf(frame: CallFrame): string | undefined {
  const { functionName: name, url } = frame;
  if (name === '(idle)') return IDLE;
  if (name === '(garbage collector)') return 'GC';
  if (name === '(program)') return 'V8/libuv outside JS (program)';
  if (name === '(root)') return 'V8/libuv outside JS (program)';
  if (!url) {
    if (/^(JSON\.)?(parse|stringify)$/.test(name)) return 'JSON.parse / JSON.stringify';
    if (SOCKET_WRITES.has(name)) return SOCKET_WRITE_CATEGORY;
    return undefined;
  }
  if (url.startsWith('node:')) return 'node core (http, net, streams)';
  const pkg = packageOf(url);
  if (pkg !== undefined) {
    if (EXPRESS_PACKAGES.has(pkg)) return 'express + router';
    if (pkg === 'pg' || pkg.startsWith('pg-') || pkg.startsWith('postgres-') || pkg === 'pgpass' || pkg === 'split2')
      return 'pg driver';
    if (pkg === 'zod') return 'zod';
    if (pkg === 'tsx' || pkg === 'esbuild' || pkg === 'get-tsconfig') return 'tsx loader';
    return `other packages (${pkg})`;
  }
  const file = url.startsWith('file://') ? new URL(url).pathname : url;
  // the compiled runtime (dist/runtime/...) counts as its source
  const rel = path.relative(REPO, file).replace(/^dist\//, '');
  if (rel.startsWith('runtime/')) return `svcgen ${rel.split('/').slice(0, 2).join('/')}`;
  if (rel.startsWith('examples/')) return 'svcgen generated code';
  if (rel.startsWith('bench/')) return 'benchmark server code';
  return 'other';
}

function location(frame: CallFrame): string {
  if (!frame.url) return '(native)';
  let file = frame.url.startsWith('file://') ? new URL(frame.url).pathname : frame.url;
  const nm = file.lastIndexOf('/node_modules/');
  if (nm !== -1) file = file.slice(nm + '/node_modules/'.length);
  else if (file.startsWith(REPO)) file = path.relative(REPO, file);
  return `${file}:${frame.lineNumber + 1}`;
}

export function summarizeProfile(file: string, topCount = 15): ProfileSummary {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  // category of each node: its own, or its nearest JS caller's for native frames
  const categoryCache = new Map<number, string>();
  const categoryOfNode = (id: number): string => {
    const cached = categoryCache.get(id);
    if (cached) return cached;
    const own = categoryOf(byId.get(id)!.callFrame);
    const p = parent.get(id);
    const c = own ?? (p === undefined ? 'native, no JS caller' : categoryOfNode(p));
    categoryCache.set(id, c);
    return c;
  };

  // sample i lasts until sample i + 1 (as in Chrome DevTools)
  const selfByNode = new Map<number, number>();
  const { samples, timeDeltas } = profile;
  for (let i = 0; i < samples.length; i++) {
    const duration = i + 1 < samples.length ? timeDeltas[i + 1]! : 0;
    selfByNode.set(samples[i]!, (selfByNode.get(samples[i]!) ?? 0) + duration);
  }

  const categories = new Map<string, number>();
  const functions = new Map<string, { name: string; location: string; category: string; us: number }>();
  let totalUs = 0;
  for (const [id, us] of selfByNode) {
    totalUs += us;
    const node = byId.get(id)!;
    const category = categoryOfNode(id);
    categories.set(category, (categories.get(category) ?? 0) + us);
    if (category === IDLE) continue;
    const name = node.callFrame.functionName || '(anonymous)';
    const loc = location(node.callFrame);
    const key = `${name}@${loc}`;
    const entry = functions.get(key) ?? { name, location: loc, category, us: 0 };
    entry.us += us;
    functions.set(key, entry);
  }
  const idleUs = categories.get(IDLE) ?? 0;
  return {
    wallMs: totalUs / 1000,
    busyMs: (totalUs - idleUs) / 1000,
    categories: [...categories].map(([name, us]) => ({ name, ms: us / 1000 })).sort((a, b) => b.ms - a.ms),
    top: [...functions.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, topCount)
      .map((f) => ({ name: f.name, location: f.location, category: f.category, ms: f.us / 1000 })),
  };
}
