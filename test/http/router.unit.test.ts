/**
 * The HTTP front's route matchers (runtime/http/router.ts) held to one table of cases: the data
 * routes' TableRouter, the PatternRouter of the feature routes answered outside Express, and
 * Express itself (which still matches every other route, runtime/server/app.ts). Where a matcher
 * answers otherwise on purpose, the row says so by its name; `undefined` means "no route here":
 * app.ts then hands the request on (to the data 404, or to Express), which keeps the answers as
 * they were.
 */
import express from 'express';
import { describe, expect, it } from 'vitest';
import { PatternRouter } from '../../runtime/http/pattern-router.ts';
import type { RouteMatch } from '../../runtime/http/router.ts';
import { TableRouter } from '../../runtime/http/table-router.ts';

type Found = { pattern: string; params: Record<string, string> } | { allowed: readonly string[] } | undefined;
/** Express refused the path before any route ran (a parameter that is not valid percent-encoding). */
type Want = Found | 'refused';
type Name = 'table' | 'pattern' | 'express';

interface Matcher {
  add(method: string, pattern: string): void;
  match(method: string, path: string): Want | Promise<Want>;
}

const found = (match: RouteMatch<string> | undefined): Found =>
  match && 'handler' in match ? { pattern: match.pattern, params: match.params } : match;

const MATCHERS: Record<Name, () => Matcher> = {
  table: () => {
    const router = new TableRouter<string>('/api');
    return {
      add: (method, pattern) => router.add(method, pattern, pattern),
      // The table the path names is in every match's params (runtime/http/table-router.ts): checked apart.
      match: (method, path) => {
        const match = found(router.match(method, path));
        if (!match || !('params' in match)) return match;
        const { table, ...params } = match.params;
        return { pattern: match.pattern, params };
      },
    };
  },
  pattern: () => {
    const router = new PatternRouter<string>();
    return {
      add: (method, pattern) => router.add(method, pattern, pattern),
      match: (m, p) => found(router.match(m, p)),
    };
  },
  // How Express matches, as createApp configures it: its answer is the route that runs, the Allow of
  // its own OPTIONS answer, or nothing (the 404 after the routes).
  express: () => {
    const app = express();
    app.disable('x-powered-by');
    app.set('case sensitive routing', true);
    let answer: (want: Want) => void = () => {};
    return {
      add: (method, pattern) => {
        app[method.toLowerCase() as 'get'](pattern, (req) =>
          answer({ pattern, params: { ...req.params } as Record<string, string> }),
        );
      },
      match: (method, url) =>
        new Promise<Want>((resolve) => {
          answer = resolve;
          const headers: Record<string, string> = {};
          const res = {
            setHeader: (name: string, value: string) => {
              headers[name.toLowerCase()] = value;
            },
            end: () => resolve({ allowed: (headers.allow ?? '').split(', ') }),
          };
          (app as unknown as { handle: (...args: unknown[]) => void }).handle(
            { method, url, headers: {} },
            res,
            (error: unknown) => resolve(error ? 'refused' : undefined),
          );
        }),
    };
  },
};

interface Case {
  readonly routes: readonly (readonly [method: string, pattern: string])[];
  readonly request: readonly [method: string, path: string];
  readonly want: Want;
  /** Where a matcher answers otherwise (see its row name for why). */
  readonly except?: Partial<Record<Name, Want>>;
}

const ORDERS: Case['routes'] = [
  ['GET', '/api/orders'],
  ['POST', '/api/orders'],
  ['POST', '/api/orders/_bulk'],
  ['GET', '/api/orders/:id'],
  ['PATCH', '/api/orders/:id'],
];
const at = (pattern: string, params: Record<string, string> = {}) => ({ pattern, params });

/** Data-route shapes (`/api/<table>`, `/<table>/<literal>`, `/<table>/:id`): every matcher reads these. */
const CASES: [string, Case][] = [
  ['a static path', { routes: ORDERS, request: ['GET', '/api/orders'], want: at('/api/orders') }],
  ['a parameter', { routes: ORDERS, request: ['GET', '/api/orders/42'], want: at('/api/orders/:id', { id: '42' }) }],
  [
    'a literal segment, not taken for a parameter',
    { routes: ORDERS, request: ['POST', '/api/orders/_bulk'], want: at('/api/orders/_bulk') },
  ],
  [
    'precedence: a literal added after a parameter wins in the table (literals are never ids); elsewhere the first added',
    {
      routes: [
        ['GET', '/api/orders/:id'],
        ['GET', '/api/orders/_count'],
      ],
      request: ['GET', '/api/orders/_count'],
      want: at('/api/orders/:id', { id: '_count' }),
      except: { table: at('/api/orders/_count') },
    },
  ],
  [
    'a literal of another method is no id in the table: its method is not allowed there',
    {
      routes: ORDERS,
      request: ['GET', '/api/orders/_bulk'],
      want: at('/api/orders/:id', { id: '_bulk' }),
      except: { table: { allowed: ['POST'] } },
    },
  ],
  [
    'a trailing slash: the table path in the table and Express; the pattern router leaves it to Express',
    { routes: ORDERS, request: ['GET', '/api/orders/'], want: at('/api/orders'), except: { pattern: undefined } },
  ],
  [
    'a trailing slash after an id: Express only',
    {
      routes: ORDERS,
      request: ['GET', '/api/orders/42/'],
      want: undefined,
      except: { express: at('/api/orders/:id', { id: '42' }) },
    },
  ],
  [
    'a parameter is decoded',
    { routes: ORDERS, request: ['GET', '/api/orders/a%2Fb%20c'], want: at('/api/orders/:id', { id: 'a/b c' }) },
  ],
  [
    'a literal spelled with percent-escapes is that literal in the table only',
    { routes: ORDERS, request: ['GET', '/api/ord%65rs'], want: undefined, except: { table: at('/api/orders') } },
  ],
  [
    'a parameter that is not valid percent-encoding: no route (Express refuses it with a 400)',
    { routes: ORDERS, request: ['GET', '/api/orders/%E0%A4%A'], want: undefined, except: { express: 'refused' } },
  ],
  [
    'HEAD is not GET (Express runs the GET route; app.ts leaves HEAD to Express)',
    {
      routes: ORDERS,
      request: ['HEAD', '/api/orders'],
      want: { allowed: ['GET', 'POST'] },
      except: { express: at('/api/orders') },
    },
  ],
  [
    'OPTIONS: the methods of the path (Express answers them itself, HEAD included)',
    {
      routes: ORDERS,
      request: ['OPTIONS', '/api/orders/7'],
      want: { allowed: ['GET', 'PATCH'] },
      except: { express: { allowed: ['GET', 'HEAD', 'PATCH'] } },
    },
  ],
  [
    'another method at a route path: the allowed methods, for a 405 (Express: no route, a 404)',
    {
      routes: ORDERS,
      request: ['DELETE', '/api/orders'],
      want: { allowed: ['GET', 'POST'] },
      except: { express: undefined },
    },
  ],
  ['a path no route has: a 404', { routes: ORDERS, request: ['GET', '/api/orders/1/lines'], want: undefined }],
  ['an unknown table', { routes: ORDERS, request: ['GET', '/api/customers'], want: undefined }],
  [
    'an unknown table with a known literal',
    { routes: ORDERS, request: ['POST', '/api/customers/_bulk'], want: undefined },
  ],
  ['an unknown table with an id', { routes: ORDERS, request: ['GET', '/api/customers/1'], want: undefined }],
  [
    'paths are case-sensitive (table names are exact model names)',
    { routes: ORDERS, request: ['GET', '/api/Orders'], want: undefined },
  ],
  ['a path outside the prefix', { routes: ORDERS, request: ['GET', '/apis/orders'], want: undefined }],
];

/** Adds the case's routes to a fresh matcher of `name` and checks what it finds for the request. */
async function check(name: Name, { routes, request, want, except }: Case): Promise<void> {
  const matcher = MATCHERS[name]();
  for (const [method, pattern] of routes) matcher.add(method, pattern);
  const expected = except && name in except ? except[name] : want;
  expect(await matcher.match(...request)).toEqual(expected);
}

describe.each(Object.keys(MATCHERS) as Name[])('router: %s', (name) => {
  it.each(CASES)('%s', (_, row) => check(name, row));
});

/** Patterns only the pattern router and Express read (not data-route shapes). */
const PATTERN_CASES: [string, Case][] = [
  [
    'registration order: the first route that matches',
    {
      routes: [
        ['POST', '/f/:bucket'],
        ['POST', '/f/uploads'],
      ],
      request: ['POST', '/f/uploads'],
      want: at('/f/:bucket', { bucket: 'uploads' }),
    },
  ],
  [
    'a literal path added first is found as such',
    {
      routes: [
        ['POST', '/f/uploads'],
        ['POST', '/f/:bucket'],
      ],
      request: ['POST', '/f/uploads'],
      want: at('/f/uploads'),
    },
  ],
  [
    'parameters in several segments',
    {
      routes: [['GET', '/f/:bucket/:id/content']],
      request: ['GET', '/f/a%62c/9/content'],
      want: at('/f/:bucket/:id/content', { bucket: 'abc', id: '9' }),
    },
  ],
  [
    'an empty parameter matches nothing',
    { routes: [['GET', '/f/:bucket/:id']], request: ['GET', '/f//9'], want: undefined },
  ],
  [
    'a pattern the pattern router does not read: Express decides',
    {
      routes: [
        ['GET', '/docs/*file'],
        ['GET', '/docs/index'],
      ],
      request: ['GET', '/docs/index'],
      want: undefined,
      except: { express: at('/docs/*file', { file: ['index'] } as never) },
    },
  ],
];

describe.each(['pattern', 'express'] as const)('router: %s (patterns beyond data routes)', (name) => {
  it.each(PATTERN_CASES)('%s', (_, row) => check(name, row));
});

describe('TableRouter', () => {
  it('names the table in the params, as the path spells it decoded', () => {
    const router = new TableRouter<string>('/api');
    router.add('GET', '/api/orders/:id', 'read');
    expect(router.match('GET', '/api/%6Frders/7')).toEqual({
      handler: 'read',
      params: { table: 'orders', id: '7' },
      pattern: '/api/orders/:id',
    });
  });

  it.each(['/api', '/api/:table', '/api/orders/:id/lines', '/other/orders', '/api/orders/:a-b'])(
    'refuses %s, which is no data route',
    (pattern) => {
      expect(() => new TableRouter<string>('/api').add('GET', pattern, 'x')).toThrow('is not a data route');
    },
  );
});
