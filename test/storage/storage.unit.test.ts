/** The pure parts of file storage, table-driven: filenames in headers, media types, signed URL tokens. */
import { describe, expect, it } from 'vitest';
import { allowedBy, contentMismatch, mediaType } from '../../runtime/storage/content-types.ts';
import { attachmentDisposition } from '../../runtime/storage/download.ts';
import { UrlSigner } from '../../runtime/storage/signed-urls.ts';

describe('attachmentDisposition (RFC 6266)', () => {
  const cases: [string, { given: string; want: string }][] = [
    ['plain', { given: 'a.pdf', want: `attachment; filename="a.pdf"; filename*=UTF-8''a.pdf` }],
    [
      'quotes and backslashes',
      { given: 'a"b\\c.txt', want: `attachment; filename="a_b_c.txt"; filename*=UTF-8''a%22b%5Cc.txt` },
    ],
    [
      'non-ASCII',
      { given: 'résumé.pdf', want: `attachment; filename="r_sum_.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf` },
    ],
    [
      'header break',
      {
        given: 'a\r\nSet-Cookie: x',
        want: `attachment; filename="a__Set-Cookie: x"; filename*=UTF-8''a%0D%0ASet-Cookie%3A%20x`,
      },
    ],
    [
      'parameter break',
      {
        given: "x'; filename=evil",
        want: `attachment; filename="x'; filename=evil"; filename*=UTF-8''x%27%3B%20filename%3Devil`,
      },
    ],
    ['percent', { given: '100%.txt', want: `attachment; filename="100_.txt"; filename*=UTF-8''100%25.txt` }],
  ];
  it.each(cases)('%s', (_, { given, want }) => {
    const header = attachmentDisposition(given);
    expect(header).toBe(want);
    expect(header).not.toMatch(/[\r\n]/);
  });
});

describe('media types', () => {
  it.each([
    ['image/PNG; charset=x', 'image/png'],
    ['text/plain', 'text/plain'],
    ['', undefined],
    ['nonsense', undefined],
    ['a/b/c', undefined],
  ])('mediaType(%j) = %j', (given, want) => expect(mediaType(given)).toBe(want));

  it.each([
    [['*/*'], 'application/zip', true],
    [['image/*'], 'image/png', true],
    [['image/*'], 'text/plain', false],
    [['application/pdf'], 'application/pdf', true],
    [['application/pdf'], 'application/pdfx', false],
  ])('allowedBy(%j, %s) = %s', (patterns, type, want) => expect(allowedBy(patterns, type)).toBe(want));

  const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
  it.each([
    ['image/png', png, undefined],
    ['image/png', Buffer.from('hello'), 'the file was declared image/png but its content is not image/png'],
    ['text/plain', png, 'the file was declared text/plain but its content is image/png'],
    ['text/csv', Buffer.from('a,b\n1,2\n'), undefined],
  ])('contentMismatch(%s, …)', async (declared, head, want) =>
    expect(await contentMismatch(declared, head)).toBe(want),
  );
});

describe('UrlSigner', () => {
  const signer = new UrlSigner('secret');
  const target = { environment: 'master', bucket: 'docs', id: '5b0c3f1e-0000-4000-8000-000000000000' };
  const now = 1_800_000_000_000;
  const token = signer.sign(target, now / 1000 + 60);
  it.each([
    ['valid', token, target.bucket, target.id, now, { ok: true, environment: 'master' }],
    ['expired', token, target.bucket, target.id, now + 60_000, { ok: false, reason: 'the download link has expired' }],
    [
      'another file',
      token,
      target.bucket,
      '5b0c3f1e-0000-4000-8000-000000000001',
      now,
      { ok: false, reason: 'the token is not valid for this file' },
    ],
    ['another bucket', token, 'other', target.id, now, { ok: false, reason: 'the token is not valid for this file' }],
    [
      'a later expiry',
      token.replace(/^\d+/, String(now / 1000 + 999)),
      target.bucket,
      target.id,
      now,
      { ok: false, reason: 'the token is not valid for this file' },
    ],
    [
      'another environment',
      token.replace('.master.', '.staging.'),
      target.bucket,
      target.id,
      now,
      { ok: false, reason: 'the token is not valid for this file' },
    ],
    ['garbage', 'x', target.bucket, target.id, now, { ok: false, reason: 'the token is not a download token' }],
  ] as const)('%s', (_, given, bucket, id, at, want) => expect(signer.verify(given, bucket, id, at)).toEqual(want));
});
