/**
 * ctx.mail of user code (docs/own-code.md "Mail"): handed to the server's mailer once the
 * transaction commits and never when it rolls back, checked at the call (a bad address or a
 * subject with a line break is a fault of the code: 500, nothing sent).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineCode, defineEndpoint } from '../../examples/shop/generated/code.ts';
import { startAuthServer, type AuthTestServer } from '../support/auth.ts';

const REST = '/gw/api/rest';

const notify = defineEndpoint({
  name: 'notify',
  method: 'POST',
  path: '/notify',
  access: { roles: ['admin'] },
  input: z.object({
    to: z.string(),
    subject: z.string(),
    mode: z.enum(['plain', 'commit', 'rollback']),
  }),
  output: z.object({ ok: z.boolean() }),
  async handler({ to, subject, mode }, ctx) {
    if (mode === 'plain') {
      ctx.mail({ to, subject, text: 'plain', html: '<p>plain</p>' });
      return { ok: true };
    }
    await ctx
      .transaction(async (tx) => {
        tx.mail({ to, subject, text: mode });
        if (mode === 'rollback') throw new Error('undo');
      })
      .catch(() => {});
    return { ok: true };
  },
});

let t: AuthTestServer;

beforeAll(async () => {
  t = await startAuthServer({ code: defineCode({ endpoints: [notify] }) });
}, 60_000);

afterAll(async () => {
  await t?.close();
});

const send = (body: object) => t.request('POST', `${REST}/notify`, { body });

describe('ctx.mail', () => {
  it('sends through the server mailer, from mail.from, with the HTML alternative', async () => {
    const res = await send({ to: 'ann@mail.test', subject: 'Hello', mode: 'plain' });
    expect(res.status, res.text).toBe(200);
    const mail = await t.mail.nextMail('ann@mail.test', 10_000);
    expect(mail.subject).toBe('Hello');
    expect(mail.raw).toMatch(/^From: shop <no-reply@shop\.test>/m);
    expect(mail.raw).toContain('<p>plain</p>');
  });

  it('inside a transaction: sent once it commits, never when it rolls back', async () => {
    expect((await send({ to: 'rolled@mail.test', subject: 'Undone', mode: 'rollback' })).status).toBe(200);
    expect((await send({ to: 'kept@mail.test', subject: 'Kept', mode: 'commit' })).status).toBe(200);
    const kept = await t.mail.nextMail('kept@mail.test', 10_000);
    expect(kept.subject).toBe('Kept');
    // The commit's mail went after the rolled-back one would have: nothing came for it.
    expect(t.mail.received.filter((m) => m.to === 'rolled@mail.test')).toEqual([]);
  });

  it('refuses a list of addresses or a subject with a line break: 500, nothing sent', async () => {
    const before = t.mail.received.length;
    for (const [to, subject] of [
      ['a@mail.test, b@mail.test', 'Two'],
      ['victim@mail.test', 'Hi\r\nBcc: other@mail.test'],
      ['not an address', 'Hi'],
    ]) {
      const res = await send({ to, subject, mode: 'plain' });
      expect(res.status, res.text).toBe(500);
      expect(res.body.detail).toMatch(/^endpoint notify failed; the server's log has the detail under request id /);
      expect(res.text).not.toContain('ctx.mail');
    }
    const marker = await send({ to: 'marker@mail.test', subject: 'Marker', mode: 'plain' });
    expect(marker.status).toBe(200);
    await t.mail.nextMail('marker@mail.test', 10_000);
    expect(t.mail.received.slice(before).map((m) => m.to)).toEqual(['marker@mail.test']);
  });
});
