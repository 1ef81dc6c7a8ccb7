/** Webhook policies without a server: the target address policy, the payload and its signature. */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { eventBody, refusedAddress, signature, urlProblems } from '../../runtime/webhooks/index.ts';

describe('target address policy', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.8.9.10', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::7f00:1', 'loopback'],
    ['::a9fe:a9fe', 'link-local'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['fd00:ec2::254', 'private'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['100.100.100.200', 'carrier-grade NAT'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'reserved'],
    ['255.255.255.255', 'reserved'],
  ])('refuses %s (%s)', (address, kind) => {
    expect(refusedAddress(address)).toContain(kind);
  });

  it.each(['93.184.215.14', '8.8.8.8', '2606:4700:4700::1111'])('accepts the public address %s', (address) => {
    expect(refusedAddress(address)).toBeUndefined();
  });

  const strict = { allowHttp: false, allowPrivateTargets: false };
  it('checks scheme, form and literal addresses of a subscription URL without DNS', async () => {
    expect(await urlProblems('https://93.184.215.14/hooks', strict)).toEqual([]);
    expect(await urlProblems('http://93.184.215.14/hooks', strict)).toEqual([
      'url must use https (webhooks.allowHttp permits http)',
    ]);
    expect(await urlProblems('http://93.184.215.14/hooks', { ...strict, allowHttp: true })).toEqual([]);
    expect(await urlProblems('ftp://93.184.215.14/', { ...strict, allowHttp: true })).toEqual([
      'url must use https or http',
    ]);
    expect(await urlProblems('hooks.example.com/x', strict)).toEqual([
      'url must be an absolute URL such as https://example.com/hooks',
    ]);
    expect(await urlProblems('https://user:pw@93.184.215.14/', strict)).toEqual([
      'url must not carry credentials; sign deliveries with the secret instead',
    ]);
    // WHATWG URL parsing turns these spellings of 127.0.0.1 into the dotted form before the check.
    for (const url of ['https://2130706433/', 'https://0x7f.1/', 'https://[::ffff:7f00:1]/']) {
      expect((await urlProblems(url, strict))[0], url).toMatch(/loopback/);
    }
    expect(await urlProblems('https://127.0.0.1/', { ...strict, allowPrivateTargets: true })).toEqual([]);
  });

  it('resolves names and refuses one that resolves to loopback', async () => {
    expect((await urlProblems('https://localhost/x', strict))[0]).toMatch(
      /^url must reach a public address: localhost resolves to .*loopback/,
    );
  });
});

describe('event body and signature', () => {
  const event = {
    event_id: 'evt_1',
    event_at: new Date('2026-11-23T10:00:00.000Z'),
    project_id: 'shop',
    environment: 'master',
    table_name: 'Order',
    operation: 'UPDATE',
    record: '{"id":7,"status":"paid","total":10.5,"note":null}',
    changed_fields: ['status'],
  };

  it('writes the payload of docs/api.md §8.2 with data equal to record, keeping the record field order', () => {
    const body = eventBody({ ...event, select_fields: null });
    expect(body).toBe(
      '{"id":"evt_1","timestamp":"2026-11-23T10:00:00.000Z","project_id":"shop","environment":"master","table":"Order","event":"UPDATE",' +
        '"record":{"id":7,"status":"paid","total":10.5,"note":null},"data":{"id":7,"status":"paid","total":10.5,"note":null},"changed_fields":["status"]}',
    );
  });

  it('trims record and data to the selected fields', () => {
    const parsed = JSON.parse(eventBody({ ...event, select_fields: ['total', 'id', 'missing'] }));
    expect(parsed.record).toEqual({ id: 7, total: 10.5 });
    expect(parsed.data).toEqual(parsed.record);
  });

  it('signs with HMAC-SHA256 of the exact bytes as lowercase hex', () => {
    const body = eventBody({ ...event, select_fields: null });
    expect(signature('k', body)).toBe(createHmac('sha256', 'k').update(body).digest('hex'));
    expect(signature('k', body)).toMatch(/^[0-9a-f]{64}$/);
    expect(signature('k', `${body} `)).not.toBe(signature('k', body));
  });
});
