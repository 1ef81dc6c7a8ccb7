// The admission chain of runtime/data/admission.ts (docs/api.md "Order of checks",
// docs/architecture.md "Request phases"): the first phase that refuses a request decides its answer,
// in the same order for every front end. Credentials and rate limits are stand-ins here; the real
// ones run in test/rest, test/graphql and test/storage.
import { describe, expect, it } from 'vitest';
import type { Config } from '../../runtime/config/index.ts';
import { admit, refuseManagement, requireGrant, type DataLimits } from '../../runtime/data/index.ts';
import { Problem, type ApiRequest } from '../../runtime/http/index.ts';
import type { Principal } from '../../runtime/principal/index.ts';
import type { Grant } from '../../runtime/query/index.ts';

const CONFIG = { project: { id: 'shop' }, environments: ['master'] } as unknown as Config;
const KEY: Principal = { kind: 'apiKey', keyId: 'k1', environment: 'master', roles: ['reader'], context: {} };
const MANAGEMENT = { kind: 'management' } as Principal;
const DECISION = { limit: 10, remaining: 9, resetSeconds: 60 };

function request(headers: Record<string, string>): ApiRequest {
  return {
    method: 'GET',
    path: '/gw/api/rest/City',
    query: new URLSearchParams(),
    headers,
    params: {},
    ip: '127.0.0.1',
    receivedAt: 0,
    readBody: async () => undefined,
    onClientGone: () => () => {},
  };
}

interface Given {
  headers: Record<string, string>;
  credentials: 'valid' | 'invalid' | 'later';
  resource: 'found' | 'missing';
  limit: 'room' | 'used up' | 'later';
}

/** The phases a request went through, and its refusal's kind (or 'admitted'). */
async function run(given: Given): Promise<{ phases: string[]; outcome: string }> {
  const phases: string[] = [];
  const limits: DataLimits = {
    authenticate: () => {
      phases.push('credentials');
      if (given.credentials === 'invalid') throw new Problem('unauthorized', 'no credentials');
      return given.credentials === 'later' ? Promise.resolve(KEY) : KEY;
    },
    data: () => {
      phases.push('rate limit');
      if (given.limit === 'used up') throw new Problem('rate-limited', 'used up');
      return given.limit === 'later' ? Promise.resolve(DECISION) : DECISION;
    },
  };
  try {
    const admitted = await admit(limits, CONFIG, request(given.headers), () => {
      phases.push('resource');
      if (given.resource === 'missing') throw new Problem('unknown-table', 'no such table');
      return 'City';
    });
    expect(admitted).toEqual({
      tenant: { projectId: 'shop', environment: 'master' },
      principal: KEY,
      resource: 'City',
      headers: { 'ratelimit-limit': '10', 'ratelimit-remaining': '9', 'ratelimit-reset': '60' },
    });
    return { phases, outcome: 'admitted' };
  } catch (error) {
    if (!(error instanceof Problem)) throw error;
    return { phases, outcome: error.kind };
  }
}

const OK: Given = { headers: { 'x-project-id': 'shop' }, credentials: 'valid', resource: 'found', limit: 'room' };
const ALL = ['credentials', 'resource', 'rate limit'];

describe('admit', () => {
  const cases: [string, { given: Given; want: { phases: string[]; outcome: string } }][] = [
    ['every phase passes', { given: OK, want: { phases: ALL, outcome: 'admitted' } }],
    [
      'every phase passes, credentials and rate limit answering later',
      { given: { ...OK, credentials: 'later', limit: 'later' }, want: { phases: ALL, outcome: 'admitted' } },
    ],
    [
      'no project: refused before the credentials are looked at',
      { given: { ...OK, headers: {} }, want: { phases: [], outcome: 'missing-project' } },
    ],
    [
      'an unknown environment: refused before the credentials',
      {
        given: { ...OK, headers: { 'x-project-id': 'shop', environment: 'nope' } },
        want: { phases: [], outcome: 'unknown-environment' },
      },
    ],
    [
      'invalid credentials: refused before the resource (an unknown table is not revealed)',
      {
        given: { ...OK, credentials: 'invalid', resource: 'missing' },
        want: { phases: ['credentials'], outcome: 'unauthorized' },
      },
    ],
    [
      'an unknown resource: refused before the rate limit counts it',
      {
        given: { ...OK, resource: 'missing', limit: 'used up' },
        want: { phases: ['credentials', 'resource'], outcome: 'unknown-table' },
      },
    ],
    [
      'an unknown resource after credentials that answer later',
      {
        given: { ...OK, credentials: 'later', resource: 'missing' },
        want: { phases: ['credentials', 'resource'], outcome: 'unknown-table' },
      },
    ],
    ['the rate limit used up', { given: { ...OK, limit: 'used up' }, want: { phases: ALL, outcome: 'rate-limited' } }],
  ];
  it.each(cases)('%s', async (_name, { given, want }) => {
    expect(await run(given)).toEqual(want);
  });
});

describe('the grant', () => {
  const grant = { rows: { kind: 'true' } } as unknown as Grant;
  const access = { grant: (table: string, action: string) => (table === 'City' && action === 'read' ? grant : null) };

  it('is the caller grant when its roles allow the action', () => {
    expect(requireGrant(access, 'City', 'read')).toBe(grant);
  });

  it('is a 403 naming the action and the records otherwise', () => {
    expect(() => requireGrant(access, 'City', 'delete')).toThrow(
      expect.objectContaining({ kind: 'forbidden', status: 403, detail: 'your role may not delete City records' }),
    );
    expect(() => requireGrant(access, '_files', 'read', 'files in bucket avatars')).toThrow(
      expect.objectContaining({ kind: 'forbidden', detail: 'your role may not read files in bucket avatars' }),
    );
  });

  it('refuses a management token, and passes a principal with roles', () => {
    expect(refuseManagement(KEY)).toBe(KEY);
    expect(() => refuseManagement(MANAGEMENT)).toThrow(
      expect.objectContaining({
        kind: 'forbidden',
        detail: 'management tokens manage API keys and webhooks; they read and write no data',
      }),
    );
  });
});
