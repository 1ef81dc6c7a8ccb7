/**
 * The pure parts of file storage, table-driven: filenames in headers, Range headers, media types,
 * signed URL tokens, the per-caller count of transfers in progress.
 */
import { describe, expect, it } from 'vitest';
import { allowedBy, contentMismatch, mediaType } from '../../runtime/storage/content-types.ts';
import { attachmentDisposition, requestedRange } from '../../runtime/storage/download.ts';
import { InFlight } from '../../runtime/storage/in-flight.ts';
import { Problem } from '../../runtime/http/index.ts';
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

describe('requestedRange (docs/storage.md "Downloading", RFC 9110 §14)', () => {
  const size = 100;
  const cases: [string, ReturnType<typeof requestedRange>][] = [
    ['bytes=0-9', { start: 0, end: 9 }],
    ['bytes=90-', { start: 90, end: 99 }],
    ['bytes=95-200', { start: 95, end: 99 }],
    ['bytes=-10', { start: 90, end: 99 }],
    ['bytes=-100', { start: 0, end: 99 }],
    // A suffix longer than the file selects the whole file (§14.1.2), as one range.
    ['bytes=-101', { start: 0, end: 99 }],
    ['bytes=-99999999999999', { start: 0, end: 99 }],
    // Several ranges, overlapping or not, even when only one is satisfiable: the whole file.
    ['bytes=0-0,0-0', 'whole'],
    ['bytes=0-9,20-29', 'whole'],
    ['bytes=0-9,500-600', 'whole'],
    ['bytes=500-600,-99999', 'whole'],
    // Malformed, or another unit: Range is ignored.
    ['bytes=abc', 'whole'],
    ['bytes=0-1,', 'whole'],
    ['bytes', 'whole'],
    ['items=0-9', 'whole'],
    ['items=500-600', 'whole'],
    // Nothing of the file: 416.
    ['bytes=100-', 'unsatisfiable'],
    ['bytes=500-600', 'unsatisfiable'],
    ['bytes=500-600,700-800', 'unsatisfiable'],
    ['bytes=-0', 'unsatisfiable'],
    ['bytes=9-5', 'unsatisfiable'],
  ];
  for (const [given, want] of cases)
    it(`${given} of ${size} bytes → ${JSON.stringify(want)}`, () => {
      expect(requestedRange(size, given)).toEqual(want);
    });
});

describe('InFlight (storage.limits.concurrent*PerCaller)', () => {
  it('refuses the slot past the cap with a 429 naming the key, per caller; a slot given back (once) frees one', () => {
    const uploads = new InFlight(2, 'uploads', 'storage.limits.concurrentUploadsPerCaller');
    const first = uploads.take('a');
    uploads.take('a');
    let refused: unknown;
    try {
      uploads.take('a');
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(Problem);
    expect((refused as Problem).status).toBe(429);
    expect((refused as Problem).message).toBe(
      'each caller may have 2 uploads in progress at once (storage.limits.concurrentUploadsPerCaller), and you have 2; retry in 1 s, once one of them has finished',
    );
    expect((refused as Problem).headers).toEqual({
      'retry-after': '1',
      'ratelimit-limit': '2',
      'ratelimit-remaining': '0',
      'ratelimit-reset': '1',
    });
    expect(uploads.count('b')).toBe(0);
    uploads.take('b');
    first();
    first();
    expect(uploads.count('a')).toBe(1);
    uploads.take('a');
    expect(uploads.count('a')).toBe(2);
  });

  it('null: no cap', () => {
    const downloads = new InFlight(null, 'downloads', 'storage.limits.concurrentDownloadsPerCaller');
    for (let i = 0; i < 1000; i++) downloads.take('a');
    expect(downloads.count('a')).toBe(1000);
  });
});
