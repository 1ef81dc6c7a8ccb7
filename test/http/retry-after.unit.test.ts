// Every 429 carries Retry-After (docs/api.md §6.2): a source that gives its own keeps it, and one
// that forgot gets DEFAULT_RETRY_AFTER_SECONDS where every error becomes a response (Problem and
// AuthError, so errorReply and GraphQL's error mapping both see it). Other statuses get none.
import { describe, expect, it } from 'vitest';
import { AuthError, errorReply, Problem, type ApiRequest } from '../../runtime/http/index.ts';
import { DEFAULT_RETRY_AFTER_SECONDS } from '../../runtime/http/problems.ts';

const request = { path: '/gw/api/rest/City' } as ApiRequest;
const reply = (error: unknown) => errorReply(error, request, () => {});

describe('Retry-After on every 429', () => {
  it.each<[string, { given: () => Problem | AuthError; want: Record<string, string> }]>([
    [
      'a 429 Problem without one gets the default',
      {
        given: () => new Problem('rate-limited', 'at most 1 connections per caller; close one first'),
        want: { 'retry-after': String(DEFAULT_RETRY_AFTER_SECONDS) },
      },
    ],
    [
      "a 429 Problem's own is kept, with its RateLimit-*",
      {
        given: () => new Problem('rate-limited', 'used up', [], { 'retry-after': '30', 'ratelimit-limit': '10' }),
        want: { 'retry-after': '30', 'ratelimit-limit': '10' },
      },
    ],
    [
      'a name in another case counts as one',
      { given: () => new Problem('rate-limited', 'used up', [], { 'Retry-After': '7' }), want: { 'Retry-After': '7' } },
    ],
    ['another status gets none', { given: () => new Problem('validation', 'bad'), want: {} }],
    [
      'a 429 of /auth without one gets the default',
      {
        given: () => new AuthError('RATE_LIMIT_EXCEEDED'),
        want: { 'retry-after': String(DEFAULT_RETRY_AFTER_SECONDS) },
      },
    ],
    ['another /auth error gets none', { given: () => new AuthError('VALIDATION_ERROR'), want: {} }],
  ])('%s', (_name, { given, want }) => {
    const error = given();
    expect(error.headers).toEqual(want);
    const { 'content-type': _type, ...headers } = reply(error).headers ?? {};
    expect(headers).toEqual(want);
  });
});
