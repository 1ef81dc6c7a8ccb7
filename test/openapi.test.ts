/**
 * The generated OpenAPI 3.1 document of examples/shop (CONTRACT §1, §6): valid against the official
 * schema, in step with the generated routes, and served at /gw/api/rest/_openapi and /_docs.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routes } from '../examples/shop/generated/routes.ts';
import { SHOP, startTestServer, type TestServer } from './support/server.ts';

const BASE = '/gw/api/rest';
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

let doc: any;
beforeAll(async () => {
  doc = JSON.parse(await fs.readFile(path.join(SHOP, 'generated/openapi.json'), 'utf8'));
});

describe('examples/shop/generated/openapi.json', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    expect(result.errors ?? [], JSON.stringify(result.errors, null, 2)).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
  });

  it('describes every generated route under /gw/api/rest with its method', () => {
    expect(routes.length).toBeGreaterThan(0);
    for (const route of routes) {
      const p = `${BASE}${route.path.replace(/:(\w+)/g, '{$1}')}`;
      expect(doc.paths, `${route.method} ${route.path}`).toHaveProperty([p]);
      expect(doc.paths[p], `${route.method} ${p}`).toHaveProperty([route.method.toLowerCase()]);
    }
  });

  it('describes no table operation that is not a generated route', () => {
    const generated = new Set(routes.map((r) => `${r.method.toUpperCase()} ${BASE}${r.path.replace(/:(\w+)/g, '{$1}')}`));
    const tables = new Set(routes.map((r) => r.table));
    for (const [p, item] of Object.entries<Record<string, unknown>>(doc.paths)) {
      expect(p.startsWith(`${BASE}/`), p).toBe(true);
      const first = p.slice(BASE.length + 1).split('/')[0];
      if (!tables.has(first)) continue;
      for (const method of Object.keys(item).filter((k) => METHODS.includes(k))) {
        const segments = p.slice(BASE.length + 1).split('/');
        if (segments.some((s) => s.startsWith('_'))) continue; // _bulk, _query, _aggregate: not in routes.ts's RouteSpec list
        expect(generated, `${method.toUpperCase()} ${p}`).toContain(`${method.toUpperCase()} ${p}`);
      }
    }
  });

  it('has no /{id} path for the composite-key OrderItem', () => {
    const orderItem = Object.keys(doc.paths).filter((p) => p === `${BASE}/OrderItem` || p.startsWith(`${BASE}/OrderItem/`));
    expect(orderItem).toContain(`${BASE}/OrderItem`);
    for (const p of orderItem) expect(p).not.toMatch(/\{/);
    expect(routes.filter((r) => r.table === 'OrderItem').map((r) => r.path)).not.toContainEqual(expect.stringContaining(':'));
  });

  it('defines the Problem schema (RFC 9457) and the security schemes it uses', () => {
    const problem = doc.components?.schemas?.Problem;
    expect(problem).toBeDefined();
    expect(problem.type).toBe('object');
    expect(problem.required).toEqual(expect.arrayContaining(['type', 'title', 'status', 'detail', 'instance', 'errors']));
    for (const field of ['type', 'title', 'status', 'detail', 'instance', 'errors']) expect(problem.properties).toHaveProperty([field]);

    const schemes: Record<string, any> = doc.components?.securitySchemes ?? {};
    const values = Object.values(schemes);
    expect(values.some((s) => s.type === 'http' && String(s.scheme).toLowerCase() === 'bearer'), JSON.stringify(schemes)).toBe(true);
    expect(values.some((s) => s.type === 'apiKey' && s.in === 'header' && String(s.name).toLowerCase() === 'authorization'), JSON.stringify(schemes)).toBe(
      true,
    );

    // every security requirement names a defined scheme, and every data operation is protected
    const requirementNames = (reqs: Record<string, unknown>[] | undefined) => (reqs ?? []).flatMap((r) => Object.keys(r));
    for (const name of requirementNames(doc.security)) expect(schemes, name).toHaveProperty([name]);
    for (const [p, item] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const method of Object.keys(item).filter((k) => METHODS.includes(k))) {
        const op = item[method];
        for (const name of requirementNames(op.security)) expect(schemes, `${method} ${p}: ${name}`).toHaveProperty([name]);
        const effective = op.security ?? doc.security ?? [];
        expect(effective.length, `${method.toUpperCase()} ${p} has no security requirement`).toBeGreaterThan(0);
        expect(effective.some((r: Record<string, unknown>) => Object.keys(r).length === 0), `${method.toUpperCase()} ${p} allows anonymous access`).toBe(false);
      }
    }
  });

  it('references the Problem schema from error responses', () => {
    const text = JSON.stringify(doc.paths);
    expect(text).toContain('#/components/schemas/Problem');
  });
});

describe('served by a running server', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(() => t?.close());

  it('GET /gw/api/rest/_openapi returns the same document', async () => {
    const res = await t.request('GET', `${BASE}/_openapi`);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual(doc);
  });

  it('GET /gw/api/rest/_docs returns an HTML reference page', async () => {
    const res = await t.request('GET', `${BASE}/_docs`);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.text).toMatch(/<html[\s>]/i);
    expect(res.text).toContain(`${BASE}/_openapi`);
  });
});
