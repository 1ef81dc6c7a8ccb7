/**
 * The GraphQL playground (docs/graphql.md "Playground"): GraphiQL served by the server itself at
 * /gw/api/graphql/_playground, and at /gw/api/graphql for a browser opening it. HTTP-level checks
 * run everywhere; the browser checks need Debian's Chromium (README "Tests") and are skipped
 * without it, except under CI, where they fail.
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { chromium, type Browser, type Page, type Request } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { startPrefixProxy } from '../support/prefix-proxy.ts';
import { REPO, startTestServer, type TestResponse, type TestServer } from '../support/server.ts';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = path.join(REPO, 'test-artifacts/graphql-playground.png');
const ENDPOINT = '/gw/api/graphql';
const PLAYGROUND = '/gw/api/graphql/_playground';
/** What Chromium sends when it opens a page. */
const NAVIGATION_ACCEPT =
  'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8';
/** The page's CSP, with the style nonce the page carries in data-style-nonce. */
function expectCsp(res: TestResponse): void {
  const nonce = /data-style-nonce="([A-Za-z0-9+/]{22}==)"/.exec(res.text)?.[1];
  expect(nonce).toBeDefined();
  expect(res.headers.get('content-security-policy')).toBe(
    `default-src 'none'; script-src 'self'; style-src 'self' 'nonce-${nonce}'; img-src 'self' data:; ` +
      "font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  );
}

let server: TestServer;
let projectId: string;

beforeAll(async () => {
  server = await startTestServer();
  projectId = server.config.project.id;
});

afterAll(async () => {
  await server?.close();
});

describe('the page and its files over HTTP', () => {
  test('the page needs no credentials, links its files by relative URLs and prefills the project, under a strict CSP', async () => {
    const res = await server.request('GET', PLAYGROUND, { key: false, project: false });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expectCsp(res);
    expect(res.text).toContain(`<title>${projectId} GraphQL playground</title>`);
    expect(res.text).toContain(
      `<div id="graphiql" data-endpoint="../graphql" data-project-id="${projectId}" data-environment="master" data-style-nonce="`,
    );
    for (const file of ['react.production.min.js', 'react-dom.production.min.js', 'graphiql.min.js', 'playground.js']) {
      expect(res.text).toMatch(
        new RegExp(`<script src="_playground/${file.replaceAll('.', '\\.')}\\?v=[0-9a-f]{12}"></script>`),
      );
    }
    expect(res.text).toMatch(/<link rel="stylesheet" href="_playground\/graphiql\.min\.css\?v=[0-9a-f]{12}">/);
    expect(res.text).not.toMatch(/<script>|<style|https?:|src="\/|href="\//);

    const again = await server.request('GET', PLAYGROUND, { key: false, project: false });
    expect(again.headers.get('content-security-policy')).not.toBe(res.headers.get('content-security-policy'));
  });

  test('GET /gw/api/graphql opened by a browser answers the same page, its URLs relative to the endpoint', async () => {
    const res = await server.request('GET', ENDPOINT, {
      key: false,
      project: false,
      headers: { accept: NAVIGATION_ACCEPT },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expectCsp(res);
    expect(res.headers.get('vary')).toBe('accept');
    expect(res.text).toContain(`data-endpoint="graphql" data-project-id="${projectId}"`);
    expect(res.text).toMatch(/<script src="graphql\/_playground\/graphiql\.min\.js\?v=[0-9a-f]{12}"><\/script>/);
  });

  test('GET /gw/api/graphql without text/html in Accept is still GraphQL over HTTP', async () => {
    const query = encodeURIComponent('{ __typename }');
    const res = await server.request('GET', `${ENDPOINT}?query=${query}`, { headers: { accept: 'application/json' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(res.headers.get('vary')).toBe('accept');
    expect(res.body).toEqual({ data: { __typename: 'Query' } });

    // No Accept at all, and no credentials: the data API's 400 for the missing project, not the page.
    const bare = await fetch(`${server.url}${ENDPOINT}?query=${query}`);
    expect(bare.status).toBe(400);
    expect(bare.headers.get('content-type')).toBe('application/problem+json');
  });

  test('the trailing-slash forms redirect to the page with a relative Location, keeping the query', async () => {
    const playground = await fetch(`${server.url}${PLAYGROUND}/?x=1`, { redirect: 'manual' });
    expect(playground.status).toBe(308);
    expect(playground.headers.get('location')).toBe('../_playground?x=1');
    const endpoint = await fetch(`${server.url}${ENDPOINT}/`, {
      redirect: 'manual',
      headers: { accept: NAVIGATION_ACCEPT },
    });
    expect(endpoint.status).toBe(308);
    expect(endpoint.headers.get('location')).toBe('../graphql');
  });

  test('a file at the URL the page links is cached for a year and sent gzipped; at another version it is not cached', async () => {
    const page = await server.request('GET', PLAYGROUND);
    const linked = /src="_playground\/(graphiql\.min\.js\?v=[0-9a-f]{12})"/.exec(page.text)![1]!;
    const res = await fetch(`${server.url}${PLAYGROUND}/${linked}`, { headers: { 'accept-encoding': 'gzip' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('content-encoding')).toBe('gzip');
    expect(res.headers.get('vary')).toBe('accept-encoding');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect((await res.text()).length).toBeGreaterThan(500_000);

    const stale = await fetch(`${server.url}${PLAYGROUND}/graphiql.min.css?v=000000000000`, {
      headers: { 'accept-encoding': 'identity' },
    });
    expect(stale.status).toBe(200);
    expect(stale.headers.get('content-type')).toBe('text/css; charset=utf-8');
    expect(stale.headers.get('cache-control')).toBe('no-cache');
    expect(stale.headers.get('content-encoding')).toBeNull();
    expect(Number(stale.headers.get('content-length'))).toBeGreaterThan(100_000);
  });

  test.each([
    'index.html',
    'graphiql.js',
    'graphiql.min.js.map',
    'package.json',
    'react.development.js',
    '..%2Fpackage.json',
  ])('%s is not served (only the files the page uses are)', async (file) => {
    const res = await server.request('GET', `${PLAYGROUND}/${file}`, { key: false, project: false });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({
      type: '/errors/not-found',
      detail: `nothing is served at GET ${PLAYGROUND}/${file}`,
    });
  });
});

// GraphiQL loads 1.5 MB of script and introspects; seconds, more on a loaded machine.
describe('in headless Chromium', { timeout: 120_000 }, () => {
  let browser: Browser | undefined;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      if (process.env.CI) {
        throw new Error(
          `Chromium is not installed at ${CHROMIUM} and CI is set: install it (apt-get install -y chromium) to run the GraphQL playground test`,
        );
      }
      return;
    }
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  });

  afterAll(async () => {
    await browser?.close();
  });

  beforeEach((context) => {
    if (!browser)
      context.skip(
        `Chromium is not installed at ${CHROMIUM} (apt-get install -y chromium); set CI=1 to make this a failure`,
      );
  });

  test('the headers come prefilled; with an API key written in, Run answers the query in the result pane', async () => {
    const customer = await server.request('POST', '/gw/api/rest/Customer', {
      body: { email: 'playground@example.com', name: 'Play Ground' },
    });
    expect(customer.status, customer.text).toBe(201);
    const order = await server.request('POST', '/gw/api/rest/Order', {
      body: { total: 9.5, customerId: (customer.body as { data: { id: string } }).data.id },
    });
    expect(order.status, order.text).toBe(201);
    const { page, requests, violations } = await openPage(browser!, `${server.url}${ENDPOINT}`);
    expect(JSON.parse(await editorText(page, 'headers'))).toEqual({
      'X-Project-Id': projectId,
      environment: 'master',
      Authorization: 'Bearer <API-key-or-user-access-token>',
    });

    // GraphiQL introspected on load with the placeholder: the result pane shows the server's 401.
    expect(JSON.parse(await resultText(page))).toMatchObject({
      status: 401,
      detail: 'the credential is not a valid API key or token, or it was revoked',
    });
    await writeKey(page, server.adminKey);
    const { sent, answer } = await run(page, '{ orderList(limit: 1) { id } }');
    expect(sent.url()).toBe(`${server.url}${ENDPOINT}`);
    expect(await sent.allHeaders()).toMatchObject({
      authorization: `Bearer ${server.adminKey}`,
      'x-project-id': projectId,
    });
    expect(JSON.parse(answer)).toEqual({
      data: { orderList: [{ id: (order.body as { data: { id: number } }).data.id }] },
    });

    await mkdir(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT });
    expect(requests.filter((r) => new URL(r.url()).origin !== server.url).map((r) => r.url())).toEqual([]);
    expect(await violations()).toEqual([]);
    await page.close();
  });

  test('the key outlives a reload, and the docs explorer shows the schema the key may read', async () => {
    const { page, violations } = await openPage(browser!, `${server.url}${PLAYGROUND}`);
    await writeKey(page, server.adminKey);
    // Introspected again on load, now with the key.
    await page.reload();
    await page.locator('.graphiql-execute-button').waitFor();
    expect(JSON.parse(await editorText(page, 'headers'))).toMatchObject({ Authorization: `Bearer ${server.adminKey}` });
    await page.click('button[aria-label="Show Documentation Explorer"]');
    await page.locator('.graphiql-doc-explorer a.graphiql-doc-explorer-type-name', { hasText: /^Query$/ }).click();
    expect(await page.locator('.graphiql-doc-explorer-field-name', { hasText: /^orderList$/ }).count()).toBe(1);
    // A dialog locks the page's scrolling with a <style> element it adds: the nonce lets it in.
    await page.click('button[aria-label="Open settings dialog"]');
    await page.locator('.graphiql-dialog', { hasText: 'Settings' }).waitFor();
    expect(await violations()).toEqual([]);
    await page.close();
  });

  test('behind a proxy that mounts the service under /svc/, the page loads and runs queries through the prefix', async () => {
    const proxy = await startPrefixProxy('/svc', server.url);
    try {
      const { page, requests } = await openPage(browser!, `${proxy.url}/svc${ENDPOINT}`);
      await writeKey(page, server.adminKey);
      const { sent, answer } = await run(page, '{ cityList(limit: 1) { id } }');
      expect(sent.url()).toBe(`${proxy.url}/svc${ENDPOINT}`);
      expect(JSON.parse(answer)).toEqual({ data: { cityList: expect.any(Array) } });
      expect(requests.filter((r) => !r.url().startsWith(`${proxy.url}/svc/`)).map((r) => r.url())).toEqual([]);
      await page.close();
    } finally {
      await proxy.close();
    }
  });

  test('where introspection is off, the page still runs queries; the docs explorer is empty and the result pane says why', async () => {
    const closed = await startTestServer({
      databaseUrl: server.database.url,
      configPatch: (raw) => {
        raw.graphql = { introspection: false };
      },
    });
    try {
      const { page, violations } = await openPage(browser!, `${closed.url}${PLAYGROUND}`);
      await writeKey(page, closed.adminKey);
      await page.reload();
      await page.locator('.graphiql-execute-button').waitFor();
      // GraphiQL's introspection on load was refused: the result pane shows the server's answer.
      const refused = JSON.parse(await resultText(page));
      expect(refused.errors.map((e: { message: string }) => e.message)).toEqual([
        'introspection is turned off in this environment (graphql.introspection); __schema is not answered',
      ]);
      await page.click('button[aria-label="Show Documentation Explorer"]');
      await page.locator('.graphiql-doc-explorer', { hasText: 'Error fetching schema' }).waitFor();
      const { answer } = await run(page, '{ cityList(limit: 1) { id } }');
      expect(JSON.parse(answer)).toEqual({ data: { cityList: expect.any(Array) } });
      expect(await violations()).toEqual([]);
      await page.close();
    } finally {
      await closed.close();
    }
  });
});

/** Writes the API key into the Headers editor and waits until GraphiQL has kept it (localStorage). */
async function writeKey(page: Page, key: string): Promise<void> {
  await setEditorText(page, 'headers', JSON.stringify({ 'X-Project-Id': projectId, Authorization: `Bearer ${key}` }));
  await page.waitForFunction((k) => Object.values(localStorage).some((value) => value.includes(k)), key);
}

/** Runs the query in the editor with Run; returns the request the page sent and the result pane's text. */
async function run(page: Page, query: string): Promise<{ sent: Request; answer: string }> {
  await setEditorText(page, 'query', query);
  const [sent] = await Promise.all([
    page.waitForRequest((r) => r.method() === 'POST' && r.postData()?.includes(query) === true),
    page.click('.graphiql-execute-button'),
  ]);
  return { sent, answer: await resultText(page) };
}

/** Opens the playground at `url`, recording its requests and CSP violations. */
async function openPage(browser: Browser, url: string) {
  const page = await browser.newPage();
  const requests: Request[] = [];
  page.on('request', (r) => requests.push(r));
  await page.addInitScript(() => {
    const seen: string[] = [];
    (window as unknown as { cspViolations: string[] }).cspViolations = seen;
    document.addEventListener('securitypolicyviolation', (e) => seen.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  const response = await page.goto(url);
  expect(response?.status()).toBe(200);
  await page.locator('.graphiql-execute-button').waitFor();
  const violations = () => page.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations);
  return { page, requests, violations };
}

type Editor = 'query' | 'headers';

/** The CodeMirror 5 editor GraphiQL 3 renders for the query or the headers. */
const EDITOR_SELECTOR: Record<Editor, string> = {
  query: '.graphiql-query-editor .CodeMirror',
  headers: '.graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror',
};

interface CodeMirrorElement {
  CodeMirror: { getValue(): string; setValue(text: string): void };
}

function editorText(page: Page, editor: Editor): Promise<string> {
  return page.$eval(EDITOR_SELECTOR[editor], (el) => (el as unknown as CodeMirrorElement).CodeMirror.getValue());
}

/** Replaces an editor's text as typing would: GraphiQL hears CodeMirror's change event. */
async function setEditorText(page: Page, editor: Editor, text: string): Promise<void> {
  await page.$eval(
    EDITOR_SELECTOR[editor],
    (el, value) => (el as unknown as CodeMirrorElement).CodeMirror.setValue(value),
    text,
  );
}

/** The result pane's text once an answer is in it. */
async function resultText(page: Page): Promise<string> {
  const selector = '.graphiql-response .CodeMirror';
  await page.waitForFunction(
    (s) =>
      (document.querySelector(s) as unknown as CodeMirrorElement | null)?.CodeMirror.getValue().trim().startsWith('{'),
    selector,
  );
  return page.$eval(selector, (el) => (el as unknown as CodeMirrorElement).CodeMirror.getValue());
}
