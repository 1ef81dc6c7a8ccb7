/**
 * The API reference page (docs/api.md §9, `GET /gw/api/rest/_docs`): Swagger UI served by the server
 * itself. HTTP-level checks run everywhere; the browser checks need Debian's Chromium
 * (README "Tests") and are skipped without it, except under CI, where they fail.
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { chromium, type Browser, type Page, type Request } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { loadService } from '../../cli/project.ts';
import { startPrefixProxy } from '../support/prefix-proxy.ts';
import { REPO, SHOP, startTestServer, type TestServer } from '../support/server.ts';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = path.join(REPO, 'test-artifacts/docs-page.png');
const DOCS = '/gw/api/rest/_docs';

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
  test('the page links its files and the OpenAPI document by relative URLs, under a strict CSP', async () => {
    const res = await server.request('GET', DOCS, { key: false, project: false });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('content-security-policy')).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; " +
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    expect(res.text).toContain('<title>shop API reference</title>');
    expect(res.text).toContain(`data-openapi="_openapi" data-service-root="../../../" data-project-id="${projectId}"`);
    expect(res.text).toMatch(/<script src="_docs\/swagger-ui-bundle\.js\?v=[0-9a-f]{12}"><\/script>/);
    expect(res.text).not.toMatch(/<script>|<style|https?:|src="\/|href="\//);
  });

  test('_docs/ redirects to _docs with a relative Location, keeping the query', async () => {
    const res = await fetch(`${server.url}${DOCS}/?x=1`, { redirect: 'manual' });
    expect(res.status).toBe(308);
    expect(res.headers.get('location')).toBe('../_docs?x=1');
  });

  test('a file at the URL the page links is cached for a year and sent gzipped; at another version it is not cached', async () => {
    const page = await server.request('GET', DOCS);
    const linked = /src="_docs\/(swagger-ui-bundle\.js\?v=[0-9a-f]{12})"/.exec(page.text)![1]!;
    const res = await fetch(`${server.url}${DOCS}/${linked}`, { headers: { 'accept-encoding': 'gzip' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('content-encoding')).toBe('gzip');
    expect(res.headers.get('vary')).toBe('accept-encoding');
    expect((await res.text()).length).toBeGreaterThan(1_000_000);

    const stale = await fetch(`${server.url}${DOCS}/swagger-ui-bundle.js?v=000000000000`, {
      headers: { 'accept-encoding': 'identity' },
    });
    expect(stale.status).toBe(200);
    expect(stale.headers.get('cache-control')).toBe('no-cache');
    expect(stale.headers.get('content-encoding')).toBeNull();
    expect(Number(stale.headers.get('content-length'))).toBeGreaterThan(1_000_000);
  });

  test.each(['index.html', 'swagger-initializer.js', 'package.json', '..%2Fpackage.json', 'swagger-ui-bundle.js.map'])(
    '%s is not served (only the files the page uses are)',
    async (file) => {
      const res = await server.request('GET', `${DOCS}/${file}`, { key: false, project: false });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ type: '/errors/not-found', detail: `nothing is served at GET ${DOCS}/${file}` });
    },
  );
});

// Swagger UI renders a document this size in seconds, more on a loaded machine.
describe('in headless Chromium', { timeout: 120_000 }, () => {
  let browser: Browser | undefined;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      if (process.env.CI) {
        throw new Error(
          `Chromium is not installed at ${CHROMIUM} and CI is set: install it (apt-get install -y chromium) to run the API reference page test`,
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

  test('renders every table, the schemas, the auth and webhook sections, with nothing from another origin', async () => {
    const { page, requests, violations } = await openPage(browser!, server.url);
    const { service } = await loadService(SHOP);
    const tables = Object.values(service.tables).map((t) => t.spec.name);
    expect(tables).toContain('City');
    for (const tag of [...tables, 'auth', 'Webhooks', 'API keys']) {
      expect(await page.locator(`.opblock-tag[data-tag="${tag}"]`).count(), `section ${tag}`).toBe(1);
    }
    expect(await page.locator('section.models .json-schema-2020-12__title', { hasText: /^City$/ }).count()).toBe(1);
    expect(await page.locator('.opblock-summary-path', { hasText: /^\/auth\/login$/ }).count()).toBe(1);
    expect(await page.locator('.opblock-summary-path', { hasText: /^\/gw\/api\/rest\/_webhooks$/ }).count()).toBe(2);
    expect(await page.locator('.servers select option').allTextContents()).toEqual([`${server.url}/`]);

    await mkdir(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });

    expect(requests.filter((r) => new URL(r.url()).origin !== server.url).map((r) => r.url())).toEqual([]);
    expect(requests.map((r) => new URL(r.url()).pathname)).toContain('/gw/api/rest/_openapi');
    expect(await violations()).toEqual([]);
    await page.close();
  });

  test('Authorize lists one scheme per kind of credential, each description rendered as written, with the project id already filled in', async () => {
    const { page, violations } = await openPage(browser!, server.url);
    await page.click('.auth-wrapper .authorize');
    const containers = page.locator('.modal-ux .auth-container');
    await containers.first().waitFor();
    expect(await containers.locator('h4 > code').allTextContents()).toEqual([
      'apiKey',
      'bearerJwt',
      'managementToken',
      'projectId',
    ]);
    const apiKey = await scheme(page, 'apiKey').innerText();
    expect(apiKey).toContain('Every key is accepted as Authorization: Bearer <key>, which is what this scheme sends');
    expect(apiKey).toContain(
      'Authorization: <prefix> <key> with the prefix chosen when the key was created (e.g. Token svk_...)',
    );
    expect(apiKey).not.toContain('" "');
    expect(await scheme(page, 'bearerJwt').innerText()).toContain('A user access token (eyJ...) from POST /auth/login');
    expect(await scheme(page, 'managementToken').innerText()).toContain(
      'A management token (svm_... from svcgen token create',
    );
    // Filled in from the server's config: shown as authorized (value hidden, a Logout button), no input.
    const project = scheme(page, 'projectId');
    expect(await project.innerText()).toContain('Name: X-Project-Id');
    expect(await project.locator('input').count()).toBe(0);
    expect(await project.locator('button', { hasText: 'Logout' }).count()).toBe(1);
    expect(await scheme(page, 'apiKey').locator('input').count()).toBe(1);
    expect(await violations()).toEqual([]);
    await page.close();
  });

  test('try it: Authorize with only the API key, GET /City answers 200 in the page with the project id sent, and the key outlives a reload', async () => {
    const created = await server.request('POST', '/gw/api/rest/City', { body: { name: 'Docstown', country: 'DE' } });
    expect(created.status, created.text).toBe(201);
    const { page, violations } = await openPage(browser!, server.url);
    await authorize(page, server.adminKey);

    const sent = await executeListCity(page);
    expect(sent.url().split('?')[0]).toBe(`${server.url}/gw/api/rest/City`);
    expect(await sent.allHeaders()).toMatchObject({
      authorization: `Bearer ${server.adminKey}`,
      'x-project-id': projectId,
    });
    expect(await liveResponse(page, 'status')).toBe('200');
    expect(await liveResponse(page, 'description')).toContain('Docstown');

    // persistAuthorization: the credentials survive a reload (in localStorage), so Authorize shows them as set.
    await page.reload();
    await page.locator('.auth-wrapper .authorize.locked').waitFor();
    expect(await page.evaluate(() => localStorage.getItem('authorized'))).toContain(server.adminKey);
    expect(await violations()).toEqual([]);
    await page.close();
  });

  test('behind a proxy that mounts the service under /svc/, the page loads and try-it calls through the prefix', async () => {
    const proxy = await startPrefixProxy('/svc', server.url);
    try {
      const { page, requests } = await openPage(browser!, `${proxy.url}/svc`);
      await authorize(page, server.adminKey);
      const sent = await executeListCity(page);
      expect(await sent.allHeaders()).toMatchObject({ 'x-project-id': projectId });
      expect(sent.url().split('?')[0]).toBe(`${proxy.url}/svc/gw/api/rest/City`);
      expect(await liveResponse(page, 'status')).toBe('200');
      expect(requests.filter((r) => !r.url().startsWith(`${proxy.url}/svc/`)).map((r) => r.url())).toEqual([]);
      await page.close();
    } finally {
      await proxy.close();
    }
  });
});

/** Opens the page at `<root>/gw/api/rest/_docs`, recording its requests and CSP violations. */
async function openPage(browser: Browser, root: string) {
  const page = await browser.newPage();
  const requests: Request[] = [];
  page.on('request', (r) => requests.push(r));
  await page.addInitScript(() => {
    const seen: string[] = [];
    (window as unknown as { cspViolations: string[] }).cspViolations = seen;
    document.addEventListener('securitypolicyviolation', (e) => seen.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  const response = await page.goto(`${root}${DOCS}`);
  expect(response?.status()).toBe(200);
  await page.waitForSelector('.opblock-tag');
  const violations = () => page.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations);
  return { page, requests, violations };
}

/** The Authorize dialog's entry for a security scheme. */
function scheme(page: Page, name: string) {
  return page
    .locator('.modal-ux .auth-container')
    .filter({ has: page.locator('h4 > code', { hasText: new RegExp(`^${name}$`) }) });
}

/** Fills Authorize with the key under the `apiKey` scheme only: the page fills in the project id itself. */
async function authorize(page: Page, key: string): Promise<void> {
  await page.click('.auth-wrapper .authorize');
  await scheme(page, 'apiKey').locator('input').fill(key);
  await scheme(page, 'apiKey').locator('button.authorize').click();
  await page.click('.modal-ux .close-modal');
}

/**
 * Opens GET /City, presses "Try it out", empties the parameters Swagger UI prefilled from the
 * document's examples (a filter would hide the row), and Executes; returns the request the page sent.
 */
async function executeListCity(page: Page): Promise<Request> {
  const op = page.locator('#operations-City-listCity');
  await op.locator('.opblock-summary-control').click();
  await op.locator('.try-out__btn').click();
  for (const input of await op.locator('.parameters input[type="text"]').all()) await input.fill('');
  const [request] = await Promise.all([
    page.waitForRequest((r) => new URL(r.url()).pathname.endsWith('/gw/api/rest/City') && r.method() === 'GET'),
    op.locator('.execute').click(),
  ]);
  return request;
}

/** The status or description cell of the response the page received for its request. */
async function liveResponse(page: Page, column: 'status' | 'description'): Promise<string | null> {
  const cell = page.locator(`.live-responses-table tbody .response-col_${column}`).first();
  await cell.waitFor();
  return cell.textContent();
}
