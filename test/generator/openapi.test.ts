/**
 * The generated OpenAPI 3.1 document of examples/shop (docs/api.md §9): valid against the official
 * schema, in step with the generated routes, and served at /gw/api/rest/_openapi and /_docs.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { service } from '../../examples/shop/generated/index.ts';
import { routes } from '../../examples/shop/generated/routes.ts';
import {
  MAX_AGGREGATE_ROWS,
  fieldFilterParameters,
  filterParameterName,
} from '../../generator/render/openapi-filters.ts';
import {
  OPERATORS,
  operatorMismatch,
  type FieldSpec,
  type FilteringOperation,
  type TableSpec,
} from '../../runtime/model/index.ts';
import { PROBLEM_KINDS, type ProblemKind } from '../../runtime/model/problem-kinds.ts';
import { startAuthServer } from '../support/auth.ts';
import { expectProblem, MANAGEMENT_TOKEN, SHOP, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
/** The /auth operations, their documented statuses, and the `error` codes each error status may carry. */
const AUTH_OPERATIONS: { method: string; path: string; operationId: string; statuses: Record<string, string[]> }[] = [
  {
    method: 'post',
    path: '/auth/signup',
    operationId: 'authSignup',
    statuses: {
      '201': [],
      '400': ['VALIDATION_ERROR'],
      '404': ['AUTH_NOT_CONFIGURED'],
      '409': ['AUTH_EMAIL_EXISTS'],
      '422': ['AUTH_REFUSED'],
      '429': ['RATE_LIMIT_EXCEEDED'],
    },
  },
  {
    method: 'post',
    path: '/auth/confirm-signup',
    operationId: 'authConfirmSignup',
    statuses: {
      '200': [],
      '400': ['AUTH_INVALID_CODE', 'VALIDATION_ERROR'],
      '404': ['AUTH_NOT_CONFIGURED'],
      '422': ['AUTH_REFUSED'],
    },
  },
  {
    method: 'post',
    path: '/auth/login',
    operationId: 'authLogin',
    statuses: {
      '200': [],
      '401': ['AUTH_INVALID_CREDENTIALS'],
      '403': ['AUTH_EMAIL_NOT_VERIFIED'],
      '404': ['AUTH_NOT_CONFIGURED'],
      '423': ['AUTH_ACCOUNT_LOCKED'],
      '429': ['RATE_LIMIT_EXCEEDED'],
    },
  },
  {
    method: 'post',
    path: '/auth/recover-password',
    operationId: 'authRecoverPassword',
    statuses: { '200': [], '404': ['AUTH_NOT_CONFIGURED'], '429': ['RATE_LIMIT_EXCEEDED'] },
  },
  {
    method: 'post',
    path: '/auth/reset-password',
    operationId: 'authResetPassword',
    statuses: { '200': [], '400': ['AUTH_INVALID_CODE', 'VALIDATION_ERROR'], '404': ['AUTH_NOT_CONFIGURED'] },
  },
  {
    method: 'post',
    path: '/auth/refresh-token',
    operationId: 'authRefreshToken',
    statuses: { '200': [], '401': ['AUTH_TOKEN_INVALID'], '404': ['AUTH_NOT_CONFIGURED'] },
  },
  {
    method: 'post',
    path: '/auth/logout',
    operationId: 'authLogout',
    statuses: { '200': [], '401': ['AUTH_TOKEN_INVALID', 'AUTH_TOKEN_EXPIRED'], '404': ['AUTH_NOT_CONFIGURED'] },
  },
  {
    method: 'get',
    path: '/auth/.well-known/jwks.json',
    operationId: 'authJwks',
    statuses: { '200': [], '404': ['AUTH_NOT_CONFIGURED'] },
  },
  ...SIGNED_IN_AUTH_OPERATIONS(),
];
/** A signed-in user's own account (docs/api.md §3 "Your account"): each takes the user's access token. */
function SIGNED_IN_AUTH_OPERATIONS(): typeof AUTH_OPERATIONS {
  const token = ['AUTH_TOKEN_INVALID', 'AUTH_TOKEN_EXPIRED'];
  const password = ['AUTH_INVALID_CREDENTIALS', ...token];
  const common = { '404': ['AUTH_NOT_CONFIGURED'], '429': ['RATE_LIMIT_EXCEEDED'] };
  return [
    { method: 'get', path: '/auth/me', operationId: 'authMe', statuses: { '200': [], '401': token, ...common } },
    {
      method: 'post',
      path: '/auth/change-password',
      operationId: 'authChangePassword',
      statuses: { '200': [], '400': ['VALIDATION_ERROR'], '401': password, '423': ['AUTH_ACCOUNT_LOCKED'], ...common },
    },
    {
      method: 'post',
      path: '/auth/change-email',
      operationId: 'authChangeEmail',
      statuses: {
        '200': [],
        '400': ['VALIDATION_ERROR'],
        '401': password,
        '409': ['AUTH_EMAIL_EXISTS'],
        '423': ['AUTH_ACCOUNT_LOCKED'],
        ...common,
      },
    },
    {
      method: 'post',
      path: '/auth/confirm-email-change',
      operationId: 'authConfirmEmailChange',
      statuses: {
        '200': [],
        '400': ['AUTH_INVALID_CODE', 'VALIDATION_ERROR'],
        '401': token,
        '409': ['AUTH_EMAIL_EXISTS'],
        ...common,
      },
    },
    {
      method: 'get',
      path: '/auth/sessions',
      operationId: 'authListSessions',
      statuses: { '200': [], '401': token, ...common },
    },
    {
      method: 'delete',
      path: '/auth/sessions',
      operationId: 'authEndOtherSessions',
      statuses: { '200': [], '401': token, ...common },
    },
    {
      method: 'delete',
      path: '/auth/sessions/{id}',
      operationId: 'authEndSession',
      statuses: {
        '200': [],
        '401': token,
        '404': ['AUTH_SESSION_NOT_FOUND', 'AUTH_NOT_CONFIGURED'],
        '429': ['RATE_LIMIT_EXCEEDED'],
      },
    },
    {
      method: 'post',
      path: '/auth/delete-account',
      operationId: 'authDeleteAccount',
      statuses: { '200': [], '400': ['VALIDATION_ERROR'], '401': password, '423': ['AUTH_ACCOUNT_LOCKED'], ...common },
    },
  ];
}
/** Operations that take the user's access token (bearerJwt): logout and the account's. */
const SIGNED_IN_AUTH = new Set(['/auth/logout', ...SIGNED_IN_AUTH_OPERATIONS().map((o) => o.path)]);
/** Auth operations that take no credentials (all but the signed-in ones); all but JWKS still need the project. */
const PUBLIC_AUTH = new Set(
  AUTH_OPERATIONS.filter((o) => !SIGNED_IN_AUTH.has(o.path)).map((o) => `${o.method.toUpperCase()} ${o.path}`),
);
const JWKS = 'GET /auth/.well-known/jwks.json';
/** The filter parameters of an operation: every query parameter that is not one of its own. */
/** The value in a filter parameter's "e.g. `<name>=<value>`". */
const exampleOf = (parameter: { name: string; description: string }) =>
  new RegExp(`e\\.g\\. \`${parameter.name}=([^\`]+)\``).exec(parameter.description)![1]!;
const OWN_PARAMETERS = new Set([
  'fn',
  'groupBy',
  'having',
  'sort',
  'limit',
  'offset',
  'after',
  'select',
  'and',
  'or',
  'not',
  'mode',
]);

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
    const generated = new Set(
      routes.map((r) => `${r.method.toUpperCase()} ${BASE}${r.path.replace(/:(\w+)/g, '{$1}')}`),
    );
    const tables = new Set(routes.map((r) => r.table));
    for (const [p, item] of Object.entries<Record<string, unknown>>(doc.paths)) {
      if (p.startsWith('/auth/')) continue; // user authentication, at the server root
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

  it('describes the webhook management operations the server serves, with the environment header required', () => {
    const expected: Record<string, string[]> = {
      [`${BASE}/_webhooks`]: ['post', 'get'],
      [`${BASE}/_webhooks/{id}`]: ['get', 'patch', 'delete'],
      [`${BASE}/_webhooks/{id}/deliveries/{deliveryId}/redeliver`]: ['post'],
    };
    for (const [p, methods] of Object.entries(expected)) {
      const item = doc.paths[p];
      expect(item, p).toBeDefined();
      expect(
        Object.keys(item)
          .filter((k) => METHODS.includes(k))
          .sort(),
        p,
      ).toEqual([...methods].sort());
      const environment = item.parameters.find((x: any) => x.name === 'environment');
      expect(environment, p).toMatchObject({ in: 'header', required: true });
      for (const m of methods) expect(item[m].security, `${m} ${p}`).toEqual([{ managementToken: [], projectId: [] }]);
    }
    const subscription = doc.components.schemas.WebhookSubscription;
    // _files: file metadata publishes events when the config has buckets (docs/storage.md).
    expect(subscription.properties.table.enum).toEqual(['City', 'Customer', 'Order', 'OrderItem', 'Product', '_files']);
    expect(subscription.properties).not.toHaveProperty('secret');
    expect(doc.paths[`${BASE}/_webhooks`].post.requestBody.content['application/json'].schema.required).toEqual([
      'projectId',
      'environment',
      'table',
      'events',
      'url',
      'secret',
    ]);
  });

  it('marks the non-null fields of a record required (typed clients get them non-optional)', () => {
    expect(doc.components.schemas.Order.required).toEqual([
      'id',
      'status',
      'total',
      'customerId',
      'createdAt',
      'updatedAt',
    ]);
    expect(doc.components.schemas.Customer.required).not.toContain('cityId');
  });

  it('has no /{id} path for the composite-key OrderItem', () => {
    const orderItem = Object.keys(doc.paths).filter(
      (p) => p === `${BASE}/OrderItem` || p.startsWith(`${BASE}/OrderItem/`),
    );
    expect(orderItem).toContain(`${BASE}/OrderItem`);
    for (const p of orderItem) expect(p).not.toMatch(/\{/);
    expect(routes.filter((r) => r.table === 'OrderItem').map((r) => r.path)).not.toContainEqual(
      expect.stringContaining(':'),
    );
  });

  it('defines the Problem schema (RFC 9457) and the security schemes it uses', () => {
    const problem = doc.components?.schemas?.Problem;
    expect(problem).toBeDefined();
    expect(problem.type).toBe('object');
    expect(problem.required).toEqual(
      expect.arrayContaining(['type', 'title', 'status', 'detail', 'instance', 'errors']),
    );
    for (const field of ['type', 'title', 'status', 'detail', 'instance', 'errors'])
      expect(problem.properties).toHaveProperty([field]);

    const schemes: Record<string, any> = doc.components?.securitySchemes ?? {};

    // every security requirement names a defined scheme, and every data operation is protected
    const requirementNames = (reqs: Record<string, unknown>[] | undefined) =>
      (reqs ?? []).flatMap((r) => Object.keys(r));
    for (const name of requirementNames(doc.security)) expect(schemes, name).toHaveProperty([name]);
    for (const [p, item] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const method of Object.keys(item).filter((k) => METHODS.includes(k))) {
        const op = item[method];
        for (const name of requirementNames(op.security))
          expect(schemes, `${method} ${p}: ${name}`).toHaveProperty([name]);
        if (PUBLIC_AUTH.has(`${method.toUpperCase()} ${p}`)) {
          expect(op.security, `${method.toUpperCase()} ${p} is public`).toEqual(
            `${method.toUpperCase()} ${p}` === JWKS ? [] : [{ projectId: [] }],
          );
          continue;
        }
        const effective = op.security ?? doc.security ?? [];
        expect(effective.length, `${method.toUpperCase()} ${p} has no security requirement`).toBeGreaterThan(0);
        expect(
          effective.some((r: Record<string, unknown>) => Object.keys(r).length === 0),
          `${method.toUpperCase()} ${p} allows anonymous access`,
        ).toBe(false);
      }
    }
  });

  it('describes the /auth endpoints at the server root with their statuses and AuthError bodies', () => {
    const authPaths = Object.keys(doc.paths).filter((p) => p.startsWith('/auth/'));
    expect(authPaths.sort()).toEqual([...new Set(AUTH_OPERATIONS.map((o) => o.path))].sort());
    expect(Object.keys(doc.paths).filter((p) => p.startsWith(`${BASE}/auth`))).toEqual([]);
    const codes: string[] = doc.components.schemas.AuthError.properties.error.enum;
    for (const { method, path: p, operationId, statuses } of AUTH_OPERATIONS) {
      const op = doc.paths[p]?.[method];
      expect(op, `${method.toUpperCase()} ${p}`).toBeDefined();
      expect(op.operationId).toBe(operationId);
      expect(op.tags).toEqual(['auth']);
      for (const [status, errors] of Object.entries(statuses)) {
        const response = op.responses[status];
        expect(response, `${method.toUpperCase()} ${p} ${status}`).toBeDefined();
        if (Number(status) >= 400) {
          expect(response.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/AuthError' });
          for (const code of errors) {
            expect(codes).toContain(code);
            expect(response.description, `${method.toUpperCase()} ${p} ${status}`).toContain(code);
          }
        }
      }
      if (statuses['429']) expect(op.responses['429'].headers).toHaveProperty(['Retry-After']);
      if (method === 'post' && p !== '/auth/logout')
        expect(op.requestBody.content).toHaveProperty(['application/json']);
    }
    expect(doc.paths['/auth/login'].post.responses['200'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/Session',
    });
    expect(doc.components.schemas.AuthError.properties.lockedUntil).toMatchObject({
      type: 'string',
      format: 'date-time',
    });
    for (const name of ['User', 'TokenPair', 'Session', 'Message', 'Jwks'])
      expect(doc.components.schemas).toHaveProperty([name]);
  });

  it('takes X-Project-Id on every /auth operation through the projectId scheme, optional only on JWKS, which also reads project_id and environment from the query', () => {
    for (const { method, path: p } of AUTH_OPERATIONS.filter((o) => o.operationId !== 'authJwks')) {
      expect(doc.paths[p].parameters).toEqual([{ $ref: '#/components/parameters/environment' }]);
      for (const requirement of doc.paths[p][method].security)
        expect(requirement, `${method} ${p}`).toHaveProperty(['projectId']);
    }
    const jwks = doc.paths['/auth/.well-known/jwks.json'];
    const params = [...(jwks.parameters ?? []), ...(jwks.get.parameters ?? [])];
    expect(params).toContainEqual(expect.objectContaining({ name: 'X-Project-Id', in: 'header', required: false }));
    expect(params).toContainEqual(expect.objectContaining({ name: 'project_id', in: 'query' }));
    expect(params).toContainEqual(expect.objectContaining({ name: 'environment', in: 'query' }));
    expect(jwks.get.responses['200'].headers).toHaveProperty(['Cache-Control']);
  });

  it('has one security scheme per kind of credential plus the project header, each described in CommonMark that renders as written', () => {
    const schemes = doc.components.securitySchemes;
    expect(Object.keys(schemes).sort()).toEqual(['apiKey', 'bearerJwt', 'managementToken', 'projectId']);
    expect(schemes.apiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(schemes.managementToken).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(schemes.apiKey.description).toContain('`Authorization: <prefix> <key>`');
    for (const [name, scheme] of Object.entries<any>(schemes)) {
      // Outside code spans, <word> would be taken as an HTML tag and vanish from the rendered text.
      const prose = String(scheme.description).replace(/`[^`]*`/g, '');
      expect(prose, name).not.toMatch(/[<>]/);
      expect(String(scheme.description).split('`').length % 2, `${name}: unbalanced code spans`).toBe(1);
    }
  });

  it('defines the bearerJwt scheme, used by logout and accepted by the data operations', () => {
    expect(doc.components.securitySchemes.bearerJwt).toMatchObject({
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
    });
    expect(doc.security).toContainEqual({ bearerJwt: [], projectId: [] });
    expect(doc.paths['/auth/logout'].post.security).toEqual([{ bearerJwt: [], projectId: [] }]);
    for (const { method, path: p } of SIGNED_IN_AUTH_OPERATIONS())
      expect(doc.paths[p][method].security, `${method} ${p}`).toEqual([{ bearerJwt: [], projectId: [] }]);
  });

  it('carries X-Project-Id as the projectId security scheme, never as a required parameter, so a client sets it once', () => {
    expect(doc.components.securitySchemes.projectId).toMatchObject({
      type: 'apiKey',
      in: 'header',
      name: 'X-Project-Id',
    });
    expect(doc.security).toEqual([
      { apiKey: [], projectId: [] },
      { bearerJwt: [], projectId: [] },
    ]);
    const resolve = (x: any) => (x.$ref ? doc.components.parameters[x.$ref.split('/').pop()] : x);
    for (const [p, item] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const method of Object.keys(item).filter((k) => METHODS.includes(k))) {
        const params = [...(item.parameters ?? []), ...(item[method].parameters ?? [])].map(resolve);
        const projectHeader = params.find((x) => x.in === 'header' && x.name.toLowerCase() === 'x-project-id');
        if (`${method.toUpperCase()} ${p}` === JWKS) expect(projectHeader).toMatchObject({ required: false });
        else expect(projectHeader, `${method.toUpperCase()} ${p}`).toBeUndefined();
      }
    }
  });

  it('lists one string filter parameter per field of the table on list, aggregate and PATCH by filter', () => {
    const operations = [
      ['get', '', 'list'],
      ['get', '/_aggregate', 'aggregate'],
      ['patch', '', 'updateMany'],
    ] as const;
    for (const table of ['City', 'Customer', 'Order', 'OrderItem', 'Product']) {
      const record = doc.components.schemas[table];
      for (const [method, suffix, operation] of operations) {
        const op = doc.paths[`${BASE}/${table}${suffix}`][method];
        const filters = op.parameters.filter((x: any) => x.in === 'query' && !OWN_PARAMETERS.has(x.name));
        // every record field and nothing else (relations are described, not enumerated)
        const scalar = Object.keys(record.properties).filter(
          (f) => !record.properties[f].description?.startsWith('Embedded'),
        );
        expect(
          filters.map((x: any) => x.name),
          `${operation} ${table}`,
        ).toEqual(scalar);
        for (const x of filters) {
          expect(x.schema.type, `${table}.${x.name}`).toBe('string');
          expect(x.required ?? false).toBe(false);
          const operators = /Operators: ([a-z_, ]+)\./.exec(x.description)![1]!.split(', ');
          for (const o of operators) expect(OPERATORS).toContain(o);
          expect(x.schema.pattern).toBe(`^(${operators.join('|')})\\.`);
          expect(x).not.toHaveProperty(['example']);
          expect(exampleOf(x)).toMatch(new RegExp(x.schema.pattern));
        }
        expect(op.description, `${operation} ${table}`).toContain('`<relation>.<field>=<operator>.<value>`');
        for (const group of ['and', 'or', 'not'])
          expect(op.parameters).toContainEqual({ $ref: `#/components/parameters/${group}` });
        expect(op.parameters.map((x: any) => x.name)).not.toContain('filter');
      }
    }
    const byName = (table: string, name: string) =>
      doc.paths[`${BASE}/${table}`].get.parameters.find((x: any) => x.name === name);
    expect(exampleOf(byName('Order', 'total'))).toBe('gte.10');
    expect(byName('Order', 'total').description).toContain(
      'Operators: equals, not_equals, gt, gte, lt, lte, in, not_in, between, is_empty, is_not_empty.',
    );
    expect(exampleOf(byName('Customer', 'id'))).toBe('equals.00000000-0000-0000-0000-000000000000');
    expect(exampleOf(byName('Product', 'tags'))).toBe('contains.abc');
    expect(exampleOf(byName('Customer', 'email'))).toBe('starts_with.abc');
    expect(byName('Order', 'status').description).toContain(
      'Operators: equals, not_equals, in, not_in, is_empty, is_not_empty.',
    );
    expect(byName('Order', 'createdAt').description).toContain('last_months');
    expect(byName('Product', 'tags').description).toContain('Operators: contains, is_empty, is_not_empty.');
    expect(byName('Customer', 'email').description).toContain('starts_with');
    expect(byName('Customer', 'id').description).not.toContain('starts_with');
    expect(doc.paths[`${BASE}/Order/_aggregate`].get.parameters).toContainEqual(
      expect.objectContaining({ name: 'limit', schema: expect.objectContaining({ maximum: MAX_AGGREGATE_ROWS }) }),
    );
  });

  it('names a filter parameter col.<field> where the field name is a reserved parameter of the operation', () => {
    const field = (name: string): FieldSpec => ({
      name,
      column: name,
      type: 'Int',
      list: false,
      nullable: false,
      id: false,
      unique: false,
      dbDefault: false,
      managed: false,
    });
    const cases: [field: string, operation: FilteringOperation, parameter: string][] = [
      ['limit', 'list', 'col.limit'],
      ['select', 'list', 'col.select'],
      ['first', 'list', 'col.first'],
      ['project_id', 'list', 'col.project_id'],
      ['or', 'list', 'col.or'],
      ['not', 'updateMany', 'col.not'],
      ['limit', 'updateMany', 'limit'],
      ['fn', 'aggregate', 'col.fn'],
      ['offset', 'aggregate', 'offset'],
      ['total', 'list', 'total'],
    ];
    for (const [name, operation, parameter] of cases)
      expect(filterParameterName(field(name), operation), `${name} in ${operation}`).toBe(parameter);
    const table = { name: 'T', fields: [field('limit')], relations: [], primaryKey: ['limit'] } as unknown as TableSpec;
    expect(fieldFilterParameters(table, 'list')[0]).toMatchObject({
      name: 'col.limit',
      description: expect.stringContaining('e.g. `col.limit=gte.10`'),
    });
  });

  it('references the Problem schema from error responses', () => {
    const text = JSON.stringify(doc.paths);
    expect(text).toContain('#/components/schemas/Problem');
  });

  it('documents on every data operation each status it can answer, 429 and 503 included, with the types of the Problem kinds table', () => {
    const everywhere = ['400', '401', '403', '404', '408', '429', '431', '500', '503'];
    const own: Record<string, string[]> = {
      list: [],
      read: [],
      aggregate: [],
      query: ['413', '415'],
      create: ['409', '413', '415', '422'],
      update: ['409', '413', '415', '422'],
      updateMany: ['409', '413', '415', '422'],
      delete: ['409'],
      bulkCreate: ['409', '413', '415', '422'],
      bulkDelete: ['413', '415', '422'],
    };
    const operationOf = (id: string) =>
      /^(list|get|create|update|delete|aggregate|query|bulkCreate|bulkDelete)[A-Z]/.exec(id)![1]!;
    let checked = 0;
    for (const [p, item] of Object.entries<Record<string, any>>(doc.paths)) {
      if (!p.startsWith(`${BASE}/`) || p.slice(BASE.length + 1).startsWith('_')) continue;
      for (const method of Object.keys(item).filter((k) => METHODS.includes(k))) {
        const op = item[method];
        // The example's own endpoint and database function answer their own statuses (test/usercode).
        if (op.tags?.includes('Endpoints') || op.tags?.includes('Database functions')) continue;
        let name = operationOf(op.operationId);
        if (name === 'get') name = 'read';
        if (name === 'update' && op.operationId.endsWith('Where')) name = 'updateMany';
        const responses = documentedProblems(op);
        const statuses = Object.keys(responses).sort();
        expect(statuses, op.operationId).toEqual([...new Set([...everywhere, ...own[name]!])].sort());
        expect([...responses['503']!.types].sort(), op.operationId).toEqual([
          '/errors/database-busy',
          '/errors/database-unavailable',
          '/errors/statement-timeout',
        ]);
        expect(responses['503']!.headers, op.operationId).toContain('Retry-After');
        expect(responses['429']!.types, op.operationId).toEqual(['/errors/rate-limited']);
        expect(responses['429']!.headers, op.operationId).toContain('Retry-After');
        expect(responses['401']!.headers, op.operationId).toContain('WWW-Authenticate');
        if (['read', 'update', 'delete'].includes(name))
          expect(responses['404']!.types, op.operationId).toContain('/errors/not-found');
        if (own[name]!.includes('413'))
          expect(responses['400']!.types, op.operationId).toContain('/errors/invalid-json');
        checked++;
      }
    }
    expect(checked).toBe(routes.length);
  });

  it('takes every Problem status and type of the management operations from the same table', () => {
    for (const p of Object.keys(doc.paths).filter(
      // /_files is data: rate limited like tables (test/storage).
      (x) =>
        x.startsWith(`${BASE}/_`) &&
        !x.endsWith('_openapi') &&
        !x.endsWith('_docs') &&
        !x.startsWith(`${BASE}/_files/`),
    )) {
      for (const method of Object.keys(doc.paths[p]).filter((k) => METHODS.includes(k))) {
        const responses = documentedProblems(doc.paths[p][method]);
        expect(Object.keys(responses), `${method} ${p}`).toEqual(
          expect.arrayContaining(['400', '401', '403', '404', '500', '503']),
        );
        expect(Object.keys(responses), `${method} ${p}: no rate limit on management routes`).not.toContain('429');
      }
    }
  });
});

/** The Problem responses of an operation by status, $refs resolved: their types (checked against PROBLEM_KINDS) and headers. */
function documentedProblems(op: any): Record<string, { types: string[]; headers: string[] }> {
  const out: Record<string, { types: string[]; headers: string[] }> = {};
  for (const [status, raw] of Object.entries<any>(op.responses)) {
    const response = raw.$ref ? doc.components.responses[raw.$ref.split('/').pop()] : raw;
    expect(response, `${op.operationId} ${status} ${raw.$ref ?? ''}`).toBeDefined();
    const schema = response.content?.['application/problem+json']?.schema;
    if (!schema) continue;
    expect(schema.allOf[0]).toEqual({ $ref: '#/components/schemas/Problem' });
    const types: string[] = schema.allOf[1].properties.type.enum;
    for (const type of types) {
      const kind = type.slice('/errors/'.length) as ProblemKind;
      expect(PROBLEM_KINDS[kind]?.status, `${op.operationId} ${status} ${type}`).toBe(Number(status));
      expect(response.description, `${op.operationId} ${status}`).toContain(`\`${type}\``);
    }
    out[status] = { types, headers: Object.keys(response.headers ?? {}) };
  }
  return out;
}

describe('served by a running server', () => {
  let t: TestServer;
  beforeAll(async () => {
    // Its signups send mail: to a loopback SMTP collector, not into examples/shop/.svcgen (which npm pack would ship).
    t = await startAuthServer();
  });
  afterAll(() => t?.close());

  it('GET /gw/api/rest/_openapi returns the same document', async () => {
    const res = await t.request('GET', `${BASE}/_openapi`);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual(doc);
  });

  it('accepts every documented filter example, and refuses the operators a field does not list with the runtime message', async () => {
    for (const [p, item] of Object.entries<Record<string, any>>(doc.paths)) {
      const table = p.slice(BASE.length + 1);
      if (!p.startsWith(`${BASE}/`) || !item.get || table.includes('/') || table.startsWith('_')) continue;
      for (const x of item.get.parameters.filter((y: any) => y.description?.startsWith('Filter on '))) {
        const ok = await t.request('GET', `${p}?${x.name}=${encodeURIComponent(exampleOf(x))}`);
        expect(ok.status, `${table} ${x.name}=${exampleOf(x)}: ${ok.text}`).toBe(200);
        const listed = /Operators: ([a-z_, ]+)\./.exec(x.description)![1]!.split(', ');
        const field = (service.tables as Record<string, { spec: TableSpec }>)[table]!.spec.fields.find(
          (f) => f.name === x.name,
        )!;
        for (const op of OPERATORS.filter((o) => !listed.includes(o))) {
          const res = await t.request('GET', `${p}?${x.name}=${op}.1`);
          expectProblem(res, 400, 'invalid-parameter', x.name);
          expect(res.body.detail).toBe(`${x.name}: ${operatorMismatch(field, op)}`);
        }
      }
    }
  });

  it('answers a data operation only with statuses and types its entry documents', async () => {
    const documented = documentedProblems(doc.paths[`${BASE}/City`].get);
    const answers = [
      await t.request('GET', `${BASE}/City`, { project: false }),
      await t.request('GET', `${BASE}/City`, { key: false }),
      await t.request('GET', `${BASE}/City`, { headers: { authorization: 'Bearer svk_not-a-key' } }),
      await t.request('GET', `${BASE}/City?limit=abc`),
      await t.request('GET', `${BASE}/City`, { environment: 'nowhere' }),
    ];
    expect(answers.map((r) => r.status)).toEqual([400, 401, 401, 400, 404]);
    for (const res of answers) expect(documented[String(res.status)]?.types, res.text).toContain(res.body.type);
  });

  it('takes a body at a length the document states and refuses one past it, as the one zod rule behind both says', async () => {
    const bodySchema = (p: string) => doc.paths[p].post.requestBody.content['application/json'].schema;
    const emailMax: number = bodySchema('/auth/signup').properties.email.maxLength;
    expect(emailMax).toBe(254);
    const signup = (length: number) =>
      t.request('POST', '/auth/signup', {
        key: false,
        body: { email: `${'a'.repeat(length - 12)}@example.com`, password: 'secret123', firstName: 'A', lastName: 'B' },
      });
    expect((await signup(emailMax)).status).toBe(201);
    const long = await signup(emailMax + 1);
    expect(long.body).toEqual({
      error: 'VALIDATION_ERROR',
      violations: [
        { field: 'email', rule: 'too_big', message: 'email: Too big: expected string to have <=254 characters' },
      ],
    });
    expect(long.status).toBe(400);

    const nameMax: number = bodySchema(`${BASE}/_apikeys`).properties.name.maxLength;
    const key = (name: string) =>
      t.request('POST', `${BASE}/_apikeys`, {
        key: MANAGEMENT_TOKEN,
        body: { name, prefix: 'Token', roles: ['admin'], environment: 'master' },
      });
    expect((await key('n'.repeat(nameMax))).status).toBe(201);
    expectProblem(await key('n'.repeat(nameMax + 1)), 422, 'validation', 'name');
  });

  it('GET /gw/api/rest/_docs returns an HTML reference page', async () => {
    const res = await t.request('GET', `${BASE}/_docs`);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.text).toMatch(/<html[\s>]/i);
    expect(res.text).toContain('data-openapi="_openapi"'); // relative: the page works under a proxy prefix (test/server/docs-page.test.ts)
  });
});
