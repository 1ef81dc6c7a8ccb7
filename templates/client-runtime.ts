/**
 * The fixed part of the typed client: its generic types and the requests behind them, for any
 * table. `svcgen generate` copies this file verbatim into `generated/client-runtime.ts`; the
 * generated `client.ts` describes the tables and re-exports everything here. It imports nothing
 * and runs wherever `fetch` does (browsers, Node 18+, workers), so an app needs no svcgen to use it.
 */

// Filters: the operands each operator takes (`OperandOf`, `FieldFilter`) are generated into
// client.ts from the server's operator table (runtime/model/operators.ts).

/** A table's filters plus groups; every member of one object must hold. */
export type Where<F> = F & {
  and?: readonly Where<F>[];
  or?: readonly Where<F>[];
  not?: Where<F>;
};

// Requests and answers.

/** The types a table client is made of (client.ts has one `<Table>Table` interface per table). */
export interface TableShape {
  record: object;
  create: object;
  update: object;
  filter: object;
  field: string;
  sort: string;
  key: object;
  /** The type of the single-field primary key; never for a composite key. */
  id: unknown;
  numeric: string;
  ordered: string;
  groupable: string;
}

/** The record narrowed to the selected fields, or the whole record without a select. */
export type Selected<R, S> = S extends readonly (infer K)[] ? Pick<R, K & keyof R> : R;

/** A field name, ascending, or with `-` in front, descending. */
export type Sort<F extends string> = F | `-${F}`;

export interface ListParams<T extends TableShape, S> {
  where?: Where<T['filter']> | undefined;
  sort?: readonly Sort<T['sort']>[] | undefined;
  select?: S | undefined;
  /** Default 100, at most 1000. */
  limit?: number | undefined;
  offset?: number | undefined;
  /** `meta.pagination.nextCursor` of the previous page (same where and sort). */
  cursor?: string | null | undefined;
  /** Ask for `meta.pagination.totalCount`. */
  count?: boolean | undefined;
}

export interface Pagination {
  limit: number;
  offset: number;
  hasNextPage: boolean;
  hasPreviousPage: boolean;
  nextCursor: string | null;
  totalCount?: number;
}

export interface ListResponse<R> {
  data: R[];
  meta: { pagination: Pagination };
}

export interface DataResponse<D> {
  data: D;
}

export type TransactionMode = 'ALL_OR_NOTHING' | 'BEST_EFFORT';

export interface BulkResult<I> {
  success: boolean;
  transactionMode: TransactionMode;
  totalRequested: number;
  totalSucceeded: number;
  totalFailed: number;
  items: I[];
  errors: { index: number; message: string }[];
}

/** What a bulk create reports per created record: `{ id }`, or the key fields of a composite key. */
export type BulkKey<T extends TableShape> = [T['id']] extends [never] ? T['key'] : { id: T['id'] };

/** Bulk delete by `ids` (single-field keys only) or by `filters`, one key object per record. */
export type BulkDeleteTarget<T extends TableShape> =
  | { filters: readonly T['key'][] }
  | ([T['id']] extends [never] ? never : { ids: readonly T['id'][] });

export type AggregateFunction<T extends TableShape> =
  | 'count'
  | `${'sum' | 'avg'}:${T['numeric']}`
  | `${'min' | 'max'}:${T['ordered']}`
  | `count_distinct:${T['groupable']}`;

/** `sum:total` answers as `sum_total`. */
export type AggregateAlias<F> = F extends `${infer Fn}:${infer Field}` ? `${Fn}_${Field}` : F;

type AggregateValue<T extends TableShape, F> = F extends 'count' | `count_distinct:${string}`
  ? number
  : F extends `${'sum' | 'avg'}:${string}`
    ? number | null
    : F extends `${string}:${infer Field}`
      ? Field extends keyof T['record']
        ? NonNullable<T['record'][Field]> | null
        : never
      : never;

export type AggregateRow<T extends TableShape, F extends string, G extends string> = Pick<
  T['record'],
  G & keyof T['record']
> & {
  [K in F as AggregateAlias<K>]: AggregateValue<T, K>;
};

export type HavingOperator = 'equals' | 'not_equals' | 'gt' | 'gte' | 'lt' | 'lte';

export interface AggregateParams<
  T extends TableShape,
  F extends readonly AggregateFunction<T>[],
  G extends readonly T['groupable'][],
> {
  /** Default: count. */
  fn?: F;
  groupBy?: G;
  where?: Where<T['filter']>;
  having?: { [A in AggregateAlias<F[number]>]?: { [Op in HavingOperator]?: number } };
  sort?: readonly Sort<AggregateAlias<F[number]> | G[number]>[];
  limit?: number;
}

export interface CallOptions {
  signal?: AbortSignal | undefined;
  /** Extra headers for this call, e.g. `Idempotency-Key` on a create. */
  headers?: Record<string, string> | undefined;
}

export interface BulkOptions extends CallOptions {
  /** Default ALL_OR_NOTHING. */
  transactionMode?: TransactionMode | undefined;
}

/** The operations of every table. */
export interface TableClient<T extends TableShape> {
  list<const S extends readonly T['field'][] | undefined = undefined>(
    params?: ListParams<T, S>,
    options?: CallOptions,
  ): Promise<ListResponse<Selected<T['record'], S>>>;
  /** Every matching record, page after page through the cursor. */
  all<const S extends readonly T['field'][] | undefined = undefined>(
    params?: Omit<ListParams<T, S>, 'cursor' | 'offset' | 'count'>,
    options?: CallOptions,
  ): AsyncIterable<Selected<T['record'], S>>;
  create(input: T['create'], options?: CallOptions): Promise<DataResponse<T['record']>>;
  /** At most 100 items; a BEST_EFFORT partial failure answers (207) rather than throws. */
  bulkCreate(items: readonly T['create'][], options?: BulkOptions): Promise<DataResponse<BulkResult<BulkKey<T>>>>;
  bulkDelete(
    target: BulkDeleteTarget<T>,
    options?: BulkOptions,
  ): Promise<DataResponse<BulkResult<BulkKey<T> | T['key']>>>;
  /** One merge patch applied to every record the filter matches (at least one filter). */
  updateWhere(
    where: Where<T['filter']>,
    patch: T['update'],
    options?: CallOptions,
  ): Promise<DataResponse<{ count: number }>>;
  aggregate<
    const F extends readonly AggregateFunction<T>[] = readonly ['count'],
    const G extends readonly T['groupable'][] = readonly [],
  >(
    params?: AggregateParams<T, F, G>,
    options?: CallOptions,
  ): Promise<DataResponse<{ aggregates: AggregateRow<T, F[number], G[number]>[] }>>;
}

/** A table with a single-field primary key also has `/<id>` routes. */
export interface KeyedTableClient<T extends TableShape> extends TableClient<T> {
  get<const S extends readonly T['field'][] | undefined = undefined>(
    id: T['id'],
    params?: { select?: S },
    options?: CallOptions,
  ): Promise<DataResponse<Selected<T['record'], S>>>;
  update(id: T['id'], patch: T['update'], options?: CallOptions): Promise<DataResponse<T['record']>>;
  delete(id: T['id'], options?: CallOptions): Promise<void>;
}

export interface ClientOptions {
  /** The server's address, e.g. `http://localhost:3000`; the data API lives under `/gw/api/rest`. */
  baseUrl: string;
  projectId: string;
  /** Default: the server's `master`. */
  environment?: string | undefined;
  /** An API key, sent as `Authorization: Bearer <key>`. */
  apiKey?: string | undefined;
  /** A user's access token (used when both are given). */
  token?: string | undefined;
  /** Default: the global fetch. */
  fetch?: typeof fetch | undefined;
  /** Headers sent with every request. */
  headers?: Record<string, string> | undefined;
}

// Errors.

export interface ProblemFieldError {
  field: string;
  rule: string;
  message: string;
}

/** Problem Details (RFC 9457) as the API answers errors; a bulk ALL_OR_NOTHING failure carries the bulk result as `data`. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  errors: ProblemFieldError[];
  data?: unknown;
  [extension: string]: unknown;
}

/** Marks a ServiceError whichever copy of this file made it (Symbol.for: one symbol per process). */
const SERVICE_ERROR_BRAND = Symbol.for('svcgen.ServiceError');

export class ServiceError extends Error {
  readonly status: number;
  readonly problem: Problem;

  constructor(problem: Problem) {
    super(`${problem.status} ${problem.title}: ${problem.detail}`);
    this.name = 'ServiceError';
    this.status = problem.status;
    this.problem = problem;
  }
}
Object.defineProperty(ServiceError.prototype, SERVICE_ERROR_BRAND, { value: true });
/**
 * One process may load this file twice (a server's own code in a CommonJS package requires its own
 * copy): `instanceof ServiceError` asks the brand, so it holds for either copy's errors.
 */
Object.defineProperty(ServiceError, Symbol.hasInstance, {
  value(this: unknown, value: unknown): boolean {
    if (this !== ServiceError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return (
      typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[SERVICE_ERROR_BRAND] === true
    );
  },
});

// The implementation: plain JavaScript behind the types above.

/** What client.ts tells this file about the service: its tables and the API's names. */
export interface ClientSchema {
  /** Where the data API lives below the server's address (`/gw/api/rest`). */
  readonly basePath: string;
  /** A table's literal sub-paths. */
  readonly subPaths: { readonly bulk: string; readonly aggregate: string };
  /** Per table: whether it has `/<id>` routes, and its relations with their target tables. */
  readonly tables: Readonly<
    Record<string, { readonly keyed: boolean; readonly relations: Readonly<Record<string, string>> }>
  >;
  /** Field names a top-level filter writes as `col.<name>` so the server reads them as fields. */
  readonly reserved: readonly string[];
}

type Json = Record<string, unknown>;
type Query = [string, string][];

/** A filter operand as query text; quoted when commas, parentheses, quotes or backslashes (or the word null) would be misread. */
function operandText(value: unknown): string {
  if (value === null) return 'null';
  const text = value instanceof Date ? value.toISOString() : String(value);
  return text === '' || text === 'null' || /[",()\\]/.test(text)
    ? `"${text.replace(/["\\]/g, (c) => `\\${c}`)}"`
    : text;
}

/** `<path>` and `<op>.<value>` of each condition in `filter` on one field or one relation. */
function conditions(
  schema: ClientSchema,
  table: string,
  name: string,
  filter: Json,
  path: string[],
): [string, string][] {
  const target = schema.tables[table]?.relations[name];
  const out: [string, string][] = [];
  for (const [key, value] of Object.entries(filter)) {
    if (value === undefined) continue;
    if (target !== undefined) {
      out.push(...conditions(schema, target, key, value as Json, [...path, name]));
    } else {
      const operand = Array.isArray(value) ? `(${value.map(operandText).join(',')})` : operandText(value);
      out.push([[...path, name].join('.'), `${key}.${operand}`]);
    }
  }
  return out;
}

/** The members of a where object as group items: `total.gte.10`, `or(...)`, `not(...)`. */
function groupItems(schema: ClientSchema, table: string, where: Json): string[] {
  const items: string[] = [];
  for (const [key, value] of Object.entries(where)) {
    if (value === undefined) continue;
    if (key === 'and' || key === 'or')
      items.push(`${key}(${(value as Json[]).map((w) => groupItem(schema, table, w)).join(',')})`);
    else if (key === 'not') items.push(`not(${groupItems(schema, table, value as Json).join(',')})`);
    else
      for (const [path, condition] of conditions(schema, table, key, value as Json, []))
        items.push(`${path}.${condition}`);
  }
  return items;
}

function groupItem(schema: ClientSchema, table: string, where: Json): string {
  const items = groupItems(schema, table, where);
  return items.length === 1 ? items[0]! : `and(${items.join(',')})`;
}

/** The filter parameters of a where object (svcgen's docs/api.md §5.5); parameters are ANDed. */
function filterQuery(schema: ClientSchema, table: string, where: Json | undefined): Query {
  const query: Query = [];
  for (const [key, value] of Object.entries(where ?? {})) {
    if (value === undefined) continue;
    if (key === 'and' || key === 'or')
      query.push([key, `(${(value as Json[]).map((w) => groupItem(schema, table, w)).join(',')})`]);
    else if (key === 'not') query.push(['not', `(${groupItems(schema, table, value as Json).join(',')})`]);
    else
      for (const [path, condition] of conditions(schema, table, key, value as Json, []))
        query.push([schema.reserved.includes(path) ? `col.${path}` : path, condition]);
  }
  return query;
}

interface ListInput {
  where?: Json;
  sort?: readonly string[];
  select?: readonly string[];
  limit?: number;
  offset?: number;
  cursor?: string | null;
  count?: boolean;
}

function listQuery(schema: ClientSchema, table: string, params: ListInput): Query {
  const query = filterQuery(schema, table, params.where);
  if (params.sort !== undefined) query.push(['sort', params.sort.join(',')]);
  if (params.select !== undefined) query.push(['select', params.select.join(',')]);
  if (params.limit !== undefined) query.push(['limit', String(params.limit)]);
  if (params.offset !== undefined) query.push(['offset', String(params.offset)]);
  if (params.cursor) query.push(['after', params.cursor]);
  return query;
}

interface AggregateInput {
  fn?: readonly string[];
  groupBy?: readonly string[];
  where?: Json;
  having?: Record<string, Record<string, number> | undefined>;
  sort?: readonly string[];
  limit?: number;
}

function aggregateQuery(schema: ClientSchema, table: string, params: AggregateInput): Query {
  const query = filterQuery(schema, table, params.where);
  if (params.fn !== undefined) query.push(['fn', params.fn.join(',')]);
  if (params.groupBy !== undefined && params.groupBy.length > 0) query.push(['groupBy', params.groupBy.join(',')]);
  const having = Object.entries(params.having ?? {}).flatMap(([alias, ops]) =>
    Object.entries(ops ?? {}).map(([op, n]) => `${alias}.${op}.${n}`),
  );
  if (having.length > 0) query.push(['having', having.join(',')]);
  if (params.sort !== undefined) query.push(['sort', params.sort.join(',')]);
  if (params.limit !== undefined) query.push(['limit', String(params.limit)]);
  return query;
}

interface Send {
  query?: Query | undefined;
  body?: unknown;
  /** Bytes sent as they are (a file upload), with `contentType`. */
  raw?: Blob | ArrayBuffer | string | undefined;
  contentType?: string | undefined;
  headers?: Record<string, string> | undefined;
  /** `raw`: answer the Response itself (a download; 304 included) instead of its JSON. */
  answer?: 'json' | 'raw' | undefined;
}

// biome-ignore lint/suspicious/noExplicitAny: each call site names the answer's type
type Sender = (method: string, path: string, send: Send, options: CallOptions | undefined) => Promise<any>;

/** The Problem of an error answer; one is made up (RFC 9457 about:blank) when the body is not one, e.g. from a proxy. */
function problemOf(res: Response, text: string, instance: string): Problem {
  try {
    const body = JSON.parse(text) as Partial<Problem> | null;
    if (body && typeof body === 'object' && typeof body.status === 'number' && typeof body.title === 'string') {
      return {
        ...body,
        type: body.type ?? 'about:blank',
        title: body.title,
        status: body.status,
        detail: body.detail ?? '',
        instance: body.instance ?? instance,
        errors: body.errors ?? [],
      };
    }
  } catch {
    // not JSON: fall through
  }
  return {
    type: 'about:blank',
    title: res.statusText || `HTTP ${res.status}`,
    status: res.status,
    detail: text.slice(0, 1000),
    instance,
    errors: [],
  };
}

function sender(options: ClientOptions, basePath: string): Sender {
  const root = `${options.baseUrl.replace(/\/+$/, '')}${basePath}`;
  const fetcher = options.fetch ?? globalThis.fetch;
  const credential = options.token ?? options.apiKey;
  return async (method, path, send, call) => {
    const headers: Record<string, string> = { accept: 'application/json', 'x-project-id': options.projectId };
    if (options.environment !== undefined) headers.environment = options.environment;
    if (credential !== undefined) headers.authorization = `Bearer ${credential}`;
    if (send.body !== undefined || send.raw !== undefined)
      headers['content-type'] = send.contentType ?? 'application/json';
    // Lower-cased so that a caller's `Authorization` replaces ours instead of joining it.
    for (const extra of [options.headers, send.headers, call?.headers]) {
      for (const [name, value] of Object.entries(extra ?? {})) headers[name.toLowerCase()] = value;
    }
    const search = send.query && send.query.length > 0 ? `?${new URLSearchParams(send.query).toString()}` : '';
    const res = await fetcher(`${root}${path}${search}`, {
      method,
      headers,
      body: send.raw ?? (send.body === undefined ? null : JSON.stringify(send.body)),
      signal: call?.signal ?? null,
    });
    if (send.answer === 'raw' && (res.ok || res.status === 304)) return res;
    const text = await res.text();
    if (!res.ok) throw new ServiceError(problemOf(res, text, `${basePath}${path}`));
    return text === '' ? undefined : JSON.parse(text);
  };
}

function tableClient(schema: ClientSchema, send: Sender, table: string, keyed: boolean): Record<string, unknown> {
  const base = `/${encodeURIComponent(table)}`;
  const list = (params: ListInput = {}, options?: CallOptions) =>
    send(
      'GET',
      base,
      { query: listQuery(schema, table, params), headers: params.count ? { prefer: 'count=exact' } : undefined },
      options,
    );
  const bulkOptions = (options: BulkOptions | undefined) =>
    options?.transactionMode === undefined ? {} : { transactionMode: options.transactionMode };
  const client: Record<string, unknown> = {
    list,
    async *all(params: ListInput = {}, options?: CallOptions) {
      let cursor: string | null = null;
      do {
        const page = (await list({ ...params, cursor }, options)) as ListResponse<unknown>;
        yield* page.data;
        cursor = page.meta.pagination.nextCursor;
      } while (cursor !== null);
    },
    create: (input: Json, options?: CallOptions) => send('POST', base, { body: input }, options),
    bulkCreate: (items: readonly Json[], options?: BulkOptions) =>
      send('POST', `${base}/${schema.subPaths.bulk}`, { body: { items, ...bulkOptions(options) } }, options),
    bulkDelete: (target: Json, options?: BulkOptions) =>
      send('DELETE', `${base}/${schema.subPaths.bulk}`, { body: { ...target, ...bulkOptions(options) } }, options),
    updateWhere: (where: Json, patch: Json, options?: CallOptions) =>
      send(
        'PATCH',
        base,
        { query: filterQuery(schema, table, where), body: patch, contentType: 'application/merge-patch+json' },
        options,
      ),
    aggregate: (params: AggregateInput = {}, options?: CallOptions) =>
      send('GET', `${base}/${schema.subPaths.aggregate}`, { query: aggregateQuery(schema, table, params) }, options),
  };
  if (keyed) {
    const one = (id: unknown) => `${base}/${encodeURIComponent(String(id))}`;
    client.get = (id: unknown, params: { select?: readonly string[] } = {}, options?: CallOptions) =>
      send(
        'GET',
        one(id),
        { query: params.select === undefined ? [] : [['select', params.select.join(',')]] },
        options,
      );
    client.update = (id: unknown, patch: Json, options?: CallOptions) =>
      send('PATCH', one(id), { body: patch, contentType: 'application/merge-patch+json' }, options);
    client.delete = async (id: unknown, options?: CallOptions) => {
      await send('DELETE', one(id), {}, options);
    };
  }
  return client;
}

/** One client per table of `schema`; client.ts's `createClient` gives it its `Client` type. */
export function createTableClients<C>(options: ClientOptions, schema: ClientSchema): C {
  const send = sender(options, schema.basePath);
  return Object.fromEntries(
    Object.entries(schema.tables).map(([name, table]) => [name, tableClient(schema, send, name, table.keyed)]),
  ) as C;
}

// Endpoints of the project's own code (docs/own-code.md "Endpoints").

/** How the client calls an endpoint: client.ts lists them (`ENDPOINTS`). */
export interface EndpointSchema {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Below the data API, with `:name` path parameters taken from the input. */
  readonly path: string;
}

/**
 * One method per endpoint: `:name` path parameters are taken from the input; the rest is the
 * query (GET, DELETE: a list as a repeated parameter, other values as text) or the JSON body.
 */
export function createEndpointClient<E>(
  options: ClientOptions,
  basePath: string,
  endpoints: Readonly<Record<string, EndpointSchema>>,
): E {
  const send = sender(options, basePath);
  const call = (endpoint: EndpointSchema, input: Record<string, unknown> = {}, callOptions?: CallOptions) => {
    const rest: Record<string, unknown> = { ...input };
    const path = endpoint.path.replace(/:([A-Za-z][A-Za-z0-9_]*)/g, (_, name: string) => {
      const value = rest[name];
      delete rest[name];
      return encodeURIComponent(String(value));
    });
    if (endpoint.method !== 'GET' && endpoint.method !== 'DELETE')
      return send(endpoint.method, path, { body: rest as Json }, callOptions);
    const query: Query = [];
    for (const [name, value] of Object.entries(rest)) {
      if (value === undefined) continue;
      for (const item of Array.isArray(value) ? value : [value])
        query.push([name, item instanceof Date ? item.toISOString() : String(item)]);
    }
    return send(endpoint.method, path, { query }, callOptions);
  };
  return Object.fromEntries(
    Object.entries(endpoints).map(([name, endpoint]) => [
      name,
      (input?: Record<string, unknown>, callOptions?: CallOptions) => call(endpoint, input, callOptions),
    ]),
  ) as E;
}

/**
 * The database functions of the config (docs/own-code.md "Database functions"): one method per
 * function, `POST <basePath>/rpc/<name>` with its arguments by name; client.ts's
 * `createFunctionClient` gives it its type.
 */
export function createFunctionMethods<C>(options: ClientOptions, basePath: string, names: readonly string[]): C {
  const send = sender(options, basePath);
  return Object.fromEntries(
    names.map((name) => [
      name,
      (args: Json = {}, call?: CallOptions) => send('POST', `/rpc/${encodeURIComponent(name)}`, { body: args }, call),
    ]),
  ) as C;
}

// Files (docs/storage.md): buckets of the config, under `/_files/<bucket>`.

/** A stored file's metadata. */
export interface FileRecord {
  id: string;
  bucket: string;
  name: string;
  contentType: string;
  size: number;
  sha256: string;
  ownerId: string | null;
  createdAt: string;
}

export interface FileBucketClient {
  /** Uploads bytes (in Node, `fs.openAsBlob(path)` streams a file from disk). */
  upload(
    bytes: Blob | ArrayBuffer | string,
    file: { name: string; contentType: string },
    options?: CallOptions,
  ): Promise<DataResponse<FileRecord>>;
  /** A page of files; `query` holds the API's own parameters, e.g. `{ contentType: 'starts_with.image/', sort: '-createdAt' }`. */
  list(query?: Record<string, string>, options?: CallOptions): Promise<ListResponse<FileRecord>>;
  get(id: string, options?: CallOptions): Promise<DataResponse<FileRecord>>;
  /** The bytes as a Response (stream its body); `range` ("bytes=0-99") answers 206, `etag` of a copy 304. */
  download(id: string, options?: CallOptions & { range?: string; etag?: string }): Promise<Response>;
  delete(id: string, options?: CallOptions): Promise<void>;
  /** A path on the server that downloads the file without credentials until `expiresAt`. */
  signedUrl(
    id: string,
    expiresIn?: number,
    options?: CallOptions,
  ): Promise<DataResponse<{ url: string; expiresAt: string }>>;
}

/** `files('attachments').upload(...)`: a client per bucket. */
export function createFileClient(
  options: ClientOptions,
  basePath = '/gw/api/rest',
): (bucket: string) => FileBucketClient {
  const send = sender(options, basePath);
  return (bucket) => {
    const at = `/_files/${encodeURIComponent(bucket)}`;
    const one = (id: string) => `${at}/${encodeURIComponent(id)}`;
    return {
      upload: (bytes, file, call) =>
        send('POST', at, { raw: bytes, contentType: file.contentType, query: [['name', file.name]] }, call),
      list: (query = {}, call) => send('GET', at, { query: Object.entries(query) }, call),
      get: (id, call) => send('GET', one(id), {}, call),
      download: (id, call) => {
        const headers: Record<string, string> = {};
        if (call?.range !== undefined) headers.range = call.range;
        if (call?.etag !== undefined) headers['if-none-match'] = call.etag;
        return send('GET', `${one(id)}/content`, { headers, answer: 'raw' }, call);
      },
      delete: async (id, call) => {
        await send('DELETE', one(id), {}, call);
      },
      signedUrl: (id, expiresIn, call) =>
        send('POST', `${one(id)}/signed-url`, expiresIn === undefined ? {} : { body: { expiresIn } }, call),
    };
  };
}
