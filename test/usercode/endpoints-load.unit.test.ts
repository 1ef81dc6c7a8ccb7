/**
 * What loading a project's code refuses of its endpoints (docs/own-code.md "Endpoints"): each
 * mistake fails at start, naming the endpoint, and nothing wins a collision.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CodeRegistry, defineCode, defineEndpoint, type EndpointDefinition } from '../../runtime/usercode/index.ts';

const TABLES = ['Order', 'Customer'];

function endpoint(overrides: Record<string, unknown>): EndpointDefinition {
  return {
    name: 'checkout',
    method: 'POST',
    path: '/checkout',
    access: { roles: ['admin'] },
    input: z.object({}),
    output: z.object({}),
    handler: async () => ({}),
    ...overrides,
  } as EndpointDefinition;
}

const load = (...endpoints: EndpointDefinition[]) => new CodeRegistry(defineCode({ endpoints }), TABLES);

describe('an endpoint is refused at load', () => {
  it.each([
    [
      { access: undefined },
      "access must be { roles: ['<role>', …] } (at least one), 'signed-in' or 'public'; there is no default",
    ],
    [{ access: { roles: [] } }, 'access must be'],
    [{ access: 'everyone' }, 'access must be'],
    [{ method: 'HEAD' }, 'method must be one of GET, POST, PUT, PATCH, DELETE'],
    [{ path: 'checkout' }, 'must start with /'],
    [{ path: '/check out' }, 'must start with /'],
    [{ path: '/:id' }, "the path's first segment must be literal"],
    [{ path: '/_apikeys/x' }, 'paths starting with _ are the service'],
    [{ path: '/_graphql' }, 'paths starting with _ are the service'],
    [{ path: '/rpc/sum' }, 'paths under /rpc are database functions'],
    [{ path: '/a/:id/:id' }, 'names a parameter twice'],
    [{ input: { parse() {} } }, 'input must be a zod schema'],
    [{ name: '1st' }, 'endpoint name "1st" must start with a letter'],
    [{ status: 204 }, 'status must be 200, 201 or 202'],
    [{ handler: undefined }, 'handler must be a function'],
  ])('%o', (overrides, message) => {
    expect(() => load(endpoint(overrides))).toThrow(message);
    // defineEndpoint says the same at once, where the mistake is written
    expect(() => defineEndpoint(endpoint(overrides) as never)).toThrow(message);
  });

  it('a path under a table', () => {
    expect(() => load(endpoint({ path: '/Order/summary' }))).toThrow(
      'endpoint "checkout": path /Order/summary is under the routes of table Order; choose another first segment',
    );
  });

  it('two endpoints of one method whose paths could match the same request', () => {
    expect(() =>
      load(endpoint({ name: 'a', path: '/orders/:id' }), endpoint({ name: 'b', path: '/orders/latest' })),
    ).toThrow('endpoints "a" and "b" both answer POST /orders/latest');
    expect(() => load(endpoint({ name: 'a' }), endpoint({ name: 'a', path: '/other' }))).toThrow(
      'two endpoints are named "a"',
    );
  });

  it('the same path with another method, or paths of other lengths, load', () => {
    const registry = load(
      endpoint({ name: 'a', path: '/orders/:id' }),
      endpoint({ name: 'b', path: '/orders/:id', method: 'GET' }),
      endpoint({ name: 'c', path: '/orders/:id/refund' }),
      endpoint({ name: 'd', path: '/ping', access: 'public' }),
      endpoint({ name: 'e', path: '/me', access: 'signed-in' }),
    );
    expect(registry.endpoints.map((e) => e.name)).toEqual(['a', 'b', 'c', 'd', 'e']);
  });
});
