// Webhook subscriptions before anything is stored (runtime/webhooks/subscriptions.ts, targets.ts;
// docs/api.md §8.1, §8.5): the request schema and its 422 field errors, the checks against the
// model (filter values normalised as event records write them) and the target policy, without a
// database or DNS (literal addresses only). Signature and payload: test/webhooks/units.test.ts.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../runtime/config/index.ts';
import type { FieldError } from '../../runtime/http/index.ts';
import {
  newSubscriptionBody as newSubscription,
  subscriptionPatchBody as subscriptionPatch,
} from '../../runtime/model/wire/index.ts';
import { checkSubscription, schemaErrors, type SubscriptionInput } from '../../runtime/webhooks/subscriptions.ts';
import { checkLiteralHost, checkedLookup, TargetRefused } from '../../runtime/webhooks/targets.ts';
import { catalog } from '../support/query-unit.ts';

const VALID = {
  projectId: 'shop',
  environment: 'master',
  table: 'Order',
  events: ['INSERT'],
  url: 'https://93.184.215.14/hooks',
  secret: 's3cret',
};

/** The parsed body, or its field errors as a 422 lists them. */
function parsed(schema: typeof newSubscription | typeof subscriptionPatch, raw: unknown): unknown {
  const result = schema.safeParse(raw);
  return result.success ? { data: result.data } : { errors: schemaErrors(result.error) };
}

describe('the request schema', () => {
  it("takes a minimal subscription as sent (defaults are the store's)", () => {
    expect(parsed(newSubscription, VALID)).toEqual({ data: VALID });
  });

  it.each<[string, unknown, FieldError[]]>([
    [
      'an empty body',
      {},
      ['projectId', 'environment', 'table', 'events', 'url', 'secret'].map((field) => ({
        field,
        rule: 'required',
        message: `${field} is required`,
      })),
    ],
    [
      'no events and an unknown field',
      { ...VALID, events: [], extra: 1 },
      [
        {
          field: 'events',
          rule: 'too_small',
          message: 'events: events must name at least one of INSERT, UPDATE, DELETE',
        },
        { field: 'extra', rule: 'unknown_field', message: 'unknown field "extra"' },
      ],
    ],
    [
      'an unknown event',
      { ...VALID, events: ['INSERT', 'upsert'] },
      [
        {
          field: 'events[1]',
          rule: 'invalid_value',
          message: 'events[1]: each event must be INSERT, UPDATE or DELETE',
        },
      ],
    ],
    [
      'a repeated event',
      { ...VALID, events: ['DELETE', 'DELETE'] },
      [{ field: 'events', rule: 'custom', message: 'events: events must not repeat' }],
    ],
    [
      'an empty secret and an empty select',
      { ...VALID, secret: '', select: [] },
      [
        { field: 'secret', rule: 'too_small', message: 'secret: secret must not be empty' },
        {
          field: 'select',
          rule: 'too_small',
          message: 'select: select must name at least one field (leave it out for every field)',
        },
      ],
    ],
    [
      'a repeated select field',
      { ...VALID, select: ['id', 'id'] },
      [{ field: 'select', rule: 'custom', message: 'select: select must not repeat a field' }],
    ],
    [
      'a URL over 2048 characters',
      { ...VALID, url: `https://example.com/${'x'.repeat(2030)}` },
      [{ field: 'url', rule: 'too_big', message: 'url: Too big: expected string to have <=2048 characters' }],
    ],
  ])('refuses %s', (_name, raw, errors) => {
    expect(parsed(newSubscription, raw)).toEqual({ errors });
  });

  it('refuses a "__proto__" filter key instead of storing an empty filter that fires on every event', () => {
    expect(parsed(subscriptionPatch, JSON.parse('{"filter":{"__proto__":"x"}}'))).toEqual({
      errors: [
        { field: 'filter.__proto__', rule: 'exists', message: 'filter.__proto__: no table has a field "__proto__"' },
      ],
    });
  });

  it('takes any subset in a PATCH, and nothing at all', () => {
    expect(parsed(subscriptionPatch, { active: false })).toEqual({ data: { active: false } });
    expect(parsed(subscriptionPatch, {})).toEqual({ data: {} });
  });
});

describe('checkSubscription: against the model and the target policy', () => {
  const config = parseConfig({ project: { id: 'shop' } }, 'svcgen.config.json');

  /** The field errors, and the filter as it would be stored. */
  async function check(
    over: Partial<SubscriptionInput>,
    cfg = config,
  ): Promise<{ errors: FieldError[]; filter: unknown }> {
    const input = { active: true, filter: null, select: null, ...VALID, ...over } as SubscriptionInput;
    const errors = await checkSubscription(input, { catalog, config: cfg, projectId: 'shop', environment: 'master' });
    return { errors, filter: input.filter };
  }

  it("normalises filter values as the event record writes them (timestamps in the API's ISO form)", async () => {
    expect(
      await check({
        filter: {
          status: 'paid',
          total: 10,
          note: null,
          placedAt: '2026-01-02',
          createdAt: '2026-01-02T03:04:05+02:00',
        },
        select: ['id', 'total'],
      }),
    ).toEqual({
      errors: [],
      filter: {
        status: 'paid',
        total: 10,
        note: null,
        placedAt: '2026-01-02T00:00:00.000Z',
        createdAt: '2026-01-02T01:04:05.000Z',
      },
    });
  });

  it.each<[string, Partial<SubscriptionInput>, FieldError[]]>([
    [
      'another project and an unknown table',
      { projectId: 'other', table: 'Nope' },
      [
        { field: 'projectId', rule: 'equals', message: 'projectId must be "shop", the X-Project-Id of this request' },
        {
          field: 'table',
          rule: 'exists',
          message: 'no table "Nope"; tables: City, Customer, Order, OrderItem, Product',
        },
      ],
    ],
    [
      'an unknown filter field',
      { filter: { nope: 1 } },
      [{ field: 'filter.nope', rule: 'exists', message: 'Order has no field "nope"' }],
    ],
    [
      'an enum value the field does not have',
      { filter: { status: 'lost' } },
      [{ field: 'filter.status', rule: 'type', message: '"lost" is not a possible value of Order.status (Enum)' }],
    ],
    [
      'a fraction for an Int',
      { filter: { id: 1.5 } },
      [{ field: 'filter.id', rule: 'type', message: '1.5 is not a possible value of Order.id (Int)' }],
    ],
    [
      'a string for a Float',
      { filter: { total: 'x' } },
      [{ field: 'filter.total', rule: 'type', message: '"x" is not a possible value of Order.total (Float)' }],
    ],
    [
      'null for a required field',
      { filter: { total: null } },
      [{ field: 'filter.total', rule: 'type', message: 'null is not a possible value of Order.total (Float)' }],
    ],
    // a time without a zone would be read in the server's zone
    [
      'a time without a zone',
      { filter: { placedAt: '2026-01-02T10:00' } },
      [
        {
          field: 'filter.placedAt',
          rule: 'type',
          message: '"2026-01-02T10:00" is not a possible value of Order.placedAt (DateTime)',
        },
      ],
    ],
    [
      'an impossible date',
      { filter: { placedAt: '2026-13-45T00:00:00Z' } },
      [
        {
          field: 'filter.placedAt',
          rule: 'type',
          message: '"2026-13-45T00:00:00Z" is not a possible value of Order.placedAt (DateTime)',
        },
      ],
    ],
    [
      'a list field',
      { table: 'Product', filter: { tags: 'a' } },
      [{ field: 'filter.tags', rule: 'type', message: 'filter compares single values; tags is a list field' }],
    ],
    [
      'an unknown select field',
      { select: ['id', 'zzz'] },
      [{ field: 'select[1]', rule: 'exists', message: 'Order has no field "zzz"' }],
    ],
    [
      'http',
      { url: 'http://93.184.215.14/x' },
      [{ field: 'url', rule: 'target', message: 'url must use https (webhooks.allowHttp permits http)' }],
    ],
    [
      'a private address',
      { url: 'https://10.0.0.1/x' },
      [
        {
          field: 'url',
          rule: 'target',
          message:
            'url must reach a public address: 10.0.0.1 resolves to 10.0.0.1 is a private address (webhooks.allowPrivateTargets permits it)',
        },
      ],
    ],
  ])('refuses %s', async (_name, over, errors) => {
    expect((await check(over)).errors).toEqual(errors);
  });

  it('lets webhooks.allowHttp and allowPrivateTargets open the target policy', async () => {
    const open = parseConfig(
      { project: { id: 'shop' }, webhooks: { allowHttp: true, allowPrivateTargets: true } },
      'svcgen.config.json',
    );
    expect((await check({ url: 'http://10.0.0.1/x' }, open)).errors).toEqual([]);
  });
});

describe('the target policy at delivery time', () => {
  const strict = { allowHttp: false, allowPrivateTargets: false };

  it('refuses a literal private address before connecting, and leaves names to the lookup', () => {
    expect(() => checkLiteralHost(new URL('https://169.254.169.254/latest'), strict)).toThrow(
      new TargetRefused('target refused: 169.254.169.254 is a link-local address (cloud metadata services live here)'),
    );
    expect(() => checkLiteralHost(new URL('https://[::1]/x'), strict)).toThrow(
      'target refused: ::1 is a loopback address',
    );
    expect(() => checkLiteralHost(new URL('https://93.184.215.14/x'), strict)).not.toThrow();
    expect(() => checkLiteralHost(new URL('https://hooks.example.com/x'), strict)).not.toThrow();
    expect(() =>
      checkLiteralHost(new URL('https://127.0.0.1/x'), { ...strict, allowPrivateTargets: true }),
    ).not.toThrow();
  });

  it("fails the connection's own lookup when the name resolves to a refused address", async () => {
    const error = await new Promise<NodeJS.ErrnoException | null>((resolve) =>
      checkedLookup('localhost', {}, (e) => resolve(e)),
    );
    expect(error).toBeInstanceOf(TargetRefused);
    expect(error).toMatchObject({ code: 'ETARGETREFUSED' });
    expect(error!.message).toMatch(/^target refused: localhost resolves to (127\.0\.0\.1|::1) is a loopback address$/);
  });
});
