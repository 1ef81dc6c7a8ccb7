/**
 * Whether two servers answer a bench case alike (status, content type, Location and body, exactly or
 * by shape as the case says), checked before either is measured: a ratio between servers means
 * something only when both do the same work (./run.ts, ./installed.ts).
 */
import { isDeepStrictEqual } from 'node:util';
import { headersFor, type BenchCase, type BenchRequest, type Fixture } from './cases.ts';

/** A server answering the bench's requests. */
export interface Target {
  readonly name: string;
  readonly url: string;
}

/** An answer, its body parsed when it is JSON. */
export interface Sent<Body = unknown> {
  status: number;
  text: string;
  body: Body;
  headers: Headers;
}

/** One request with an optional JSON body; the answer read whole. */
export async function sendJson<Body = unknown>(
  url: string,
  init: { method?: string; headers: Record<string, string>; body?: unknown },
): Promise<Sent<Body | undefined>> {
  const headers = { ...init.headers };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url, {
    method: init.method ?? 'GET',
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  let body: Body | undefined;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, text, body, headers: res.headers };
}

/** A bench request to `server`, with the fixture's API key. */
export function send(server: Target, request: BenchRequest, fixture: Fixture): Promise<Sent> {
  return sendJson(`${server.url}${request.path}`, {
    method: request.method,
    headers: headersFor(fixture),
    body: request.body,
  });
}

/** Same keys in the same order and same JSON types, recursively. */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(shape);
  if (value !== null && typeof value === 'object') return Object.entries(value).map(([k, v]) => [k, shape(v)]);
  return value === null ? 'null' : typeof value;
}

/** A copy of `body` with the values at `paths` replaced by their JSON type. */
function withOpaque(body: unknown, paths: readonly string[]): unknown {
  const copy = structuredClone(body);
  for (const p of paths) {
    const keys = p.split('.');
    let at: any = copy;
    for (const k of keys.slice(0, -1)) at = at?.[k];
    const last = keys[keys.length - 1]!;
    if (at && typeof at === 'object' && last in at) at[last] = `<${at[last] === null ? 'null' : typeof at[last]}>`;
  }
  return copy;
}

function firstDifference(a: unknown, b: unknown, at = '$'): string {
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object') {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
    for (const k of keys) {
      if (!isDeepStrictEqual((a as any)[k], (b as any)[k]))
        return firstDifference((a as any)[k], (b as any)[k], `${at}.${k}`);
    }
    return `${at} (key order)`;
  }
  return `${at}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`;
}

/** The servers `others` answer as svcgen does: the sample request, and for a walk every step of one sequence. */
export async function checkSameAnswers(
  benchCase: BenchCase,
  svcgen: Target,
  others: readonly Target[],
  fixture: Fixture,
): Promise<void> {
  for (const other of others) {
    const contexts = new Map<Target, Record<string, unknown>>([
      [svcgen, {}],
      [other, {}],
    ]);
    for (let step = 0; step < (benchCase.sequence ?? 1); step++) {
      const request = (target: Target) =>
        step === 0 ? benchCase.sample(fixture) : benchCase.next(fixture, contexts.get(target)!, step);
      const requests: [BenchRequest, BenchRequest] = [request(svcgen), request(other)];
      if (requests[0].path.replace(/after=[^&]*/, 'after=…') !== requests[1].path.replace(/after=[^&]*/, 'after=…')) {
        throw new Error(
          `${benchCase.title}, step ${step}: the walks diverged: ${requests[0].path} vs ${requests[1].path}`,
        );
      }
      const [a, b] = await checkSameAnswer(benchCase, [svcgen, other], fixture, requests, step);
      benchCase.onResponse?.(a.status, a.text, contexts.get(svcgen)!);
      benchCase.onResponse?.(b.status, b.text, contexts.get(other)!);
    }
  }
}

async function checkSameAnswer(
  benchCase: BenchCase,
  servers: [Target, Target],
  fixture: Fixture,
  requests: [BenchRequest, BenchRequest],
  step: number,
): Promise<[Sent, Sent]> {
  const [a, b] = [await send(servers[0], requests[0], fixture), await send(servers[1], requests[1], fixture)];
  const problems: string[] = [];
  for (const [name, r] of [
    [servers[0].name, a],
    [servers[1].name, b],
  ] as const) {
    if (r.status !== benchCase.status)
      problems.push(`${name} answered ${r.status}, expected ${benchCase.status}: ${r.text.slice(0, 300)}`);
  }
  if (a.headers.get('content-type') !== b.headers.get('content-type')) {
    problems.push(`content-type differs: ${a.headers.get('content-type')} vs ${b.headers.get('content-type')}`);
  }
  if ((a.headers.get('location') === null) !== (b.headers.get('location') === null))
    problems.push('only one of them sends Location');
  const comparable = (body: unknown) =>
    benchCase.compare === 'exact' ? withOpaque(body, benchCase.opaque ?? []) : shape(body);
  const [ca, cb] = [comparable(a.body), comparable(b.body)];
  if (!isDeepStrictEqual(ca, cb)) {
    const where = firstDifference(ca, cb);
    problems.push(
      `bodies differ (${benchCase.compare}) at ${where}:\n  ${servers[0].name}: ${a.text.slice(0, 600)}\n  ${servers[1].name}: ${b.text.slice(0, 600)}`,
    );
  }
  if (problems.length) {
    const where = benchCase.sequence ? ` (step ${step} of the walk, ${requests[0].path})` : '';
    throw new Error(
      `${benchCase.title}${where}: ${servers[0].name} and ${servers[1].name} do not answer alike:\n${problems.join('\n')}`,
    );
  }
  return [a, b];
}
