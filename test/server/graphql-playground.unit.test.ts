/** Which GETs of /gw/api/graphql get the playground (docs/graphql.md "Playground"): a browser's, no GraphQL client's. */
import { describe, expect, test } from 'vitest';
import { prefersHtml } from '../../runtime/server/graphql-playground.ts';

/** What Chromium sends when it opens a page. */
const NAVIGATION_ACCEPT =
  'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8';

describe('which requests to the endpoint are a browser opening it', () => {
  test.each([
    [NAVIGATION_ACCEPT, true],
    ['text/html', true],
    ['text/html;q=0.5, application/json;q=0.4', true],
    [undefined, false],
    ['*/*', false],
    ['application/json', false],
    ['application/graphql-response+json, application/json;q=0.9', false],
    ['text/html, application/json', false],
    ['text/html;q=0, */*', false],
  ])('Accept: %s → page: %s', (accept, page) => {
    expect(prefersHtml(accept)).toBe(page);
  });
});
