/** The endpoint changes `svcgen diff` reports (docs/diff.md "Endpoint changes"), from two openapi.json documents. */
import { describe, expect, it } from 'vitest';
import { diffEndpoints } from '../../generator/diff/diff-endpoints.ts';

const object = (properties: Record<string, unknown>, required: string[] = []) => ({
  type: 'object',
  properties,
  required,
});

function doc(
  endpoints: {
    name: string;
    method?: string;
    path?: string;
    input?: object;
    params?: object[];
    output?: object;
  }[],
) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const e of endpoints) {
    const path = e.path ?? `/gw/api/rest/${e.name}`;
    paths[path] = {
      ...paths[path],
      [e.method ?? 'post']: {
        operationId: e.name,
        'x-svcgen-access': 'public',
        ...(e.params ? { parameters: e.params } : {}),
        ...(e.input ? { requestBody: { content: { 'application/json': { schema: e.input } } } } : {}),
        responses: { '200': { content: { 'application/json': { schema: e.output ?? object({}) } } } },
      },
    };
  }
  // An operation of the service itself is never an endpoint's.
  paths['/gw/api/rest/_apikeys'] = { post: { operationId: 'createApiKey', responses: {} } };
  return { paths };
}

const sku = { type: 'string' };
const qty = { type: 'integer' };

describe('diffEndpoints', () => {
  it('nothing changed → nothing', () => {
    const d = doc([{ name: 'checkout', input: object({ sku }, ['sku']) }]);
    expect(diffEndpoints(d, d)).toEqual([]);
  });

  it('input: a required field added, a field removed, a type changed, optional made required → breaking', () => {
    const before = doc([{ name: 'checkout', input: object({ sku, qty, note: sku }, ['sku']) }]);
    const after = doc([
      { name: 'checkout', input: object({ sku: qty, note: sku, coupon: sku }, ['sku', 'coupon', 'note']) },
    ]);
    expect(diffEndpoints(before, after)).toEqual([
      { kind: 'endpoint changed', subject: 'checkout', detail: 'input: sku type changed', breaking: true },
      { kind: 'endpoint changed', subject: 'checkout', detail: 'input: note now required', breaking: true },
      { kind: 'endpoint changed', subject: 'checkout', detail: 'input: coupon added, required', breaking: true },
      { kind: 'endpoint changed', subject: 'checkout', detail: 'input: qty removed', breaking: true },
    ]);
  });

  it('an optional input field or an output field added → not breaking; an output field removed → breaking', () => {
    const before = doc([{ name: 'checkout', input: object({ sku }), output: object({ id: qty, total: qty }, ['id']) }]);
    const after = doc([
      { name: 'checkout', input: object({ sku, note: sku }), output: object({ id: qty, status: sku }, ['id']) },
    ]);
    expect(diffEndpoints(before, after)).toEqual([
      { kind: 'endpoint changed', subject: 'checkout', detail: 'input: note added', breaking: false },
      { kind: 'endpoint changed', subject: 'checkout', detail: 'output: total removed', breaking: true },
      { kind: 'endpoint changed', subject: 'checkout', detail: 'output: status added', breaking: false },
    ]);
  });

  it('GET parameters are its input; endpoints added, removed and moved', () => {
    const before = doc([
      { name: 'lookup', method: 'get', params: [{ name: 'code', in: 'path', required: true, schema: sku }] },
      { name: 'gone' },
      { name: 'moving' },
    ]);
    const after = doc([
      {
        name: 'lookup',
        method: 'get',
        params: [
          { name: 'code', in: 'path', required: true, schema: sku },
          { name: 'verbose', in: 'query', required: true, schema: sku },
        ],
      },
      { name: 'moving', method: 'put' },
      { name: 'fresh' },
    ]);
    expect(diffEndpoints(before, after)).toEqual([
      { kind: 'endpoint added', subject: 'fresh', detail: 'POST /gw/api/rest/fresh', breaking: false },
      { kind: 'endpoint changed', subject: 'lookup', detail: 'input: verbose added, required', breaking: true },
      { kind: 'endpoint removed', subject: 'gone', detail: 'POST /gw/api/rest/gone', breaking: true },
      {
        kind: 'endpoint changed',
        subject: 'moving',
        detail: 'moved: POST /gw/api/rest/moving → PUT /gw/api/rest/moving',
        breaking: true,
      },
    ]);
  });
});
