/**
 * The kinds of Problem Details answers under /gw/api/rest (docs/api.md §6.2), in one place: the
 * runtime answers with them (runtime/http/problems.ts) and the generator writes them into the
 * OpenAPI document, so a status the server answers cannot be missing from the document.
 * `type` of a body is `/errors/<kind>`.
 */
export const PROBLEM_KINDS = {
  'bad-request': {
    status: 400,
    title: 'Bad Request',
    description: 'a malformed Idempotency-Key or environment header, or a path that is not valid percent-encoding',
  },
  'invalid-json': {
    status: 400,
    title: 'Malformed JSON body',
    description: 'the body is not valid JSON (or UTF-8), is nested too deeply, or is missing',
  },
  'invalid-parameter': {
    status: 400,
    title: 'Invalid query parameter',
    description: 'a bad query parameter (filter, sort, select, limit, offset, cursor, mode, aggregate) or _query body',
  },
  'missing-project': {
    status: 400,
    title: 'Missing project',
    description: 'no X-Project-Id header or project_id parameter',
  },
  unauthorized: {
    status: 401,
    title: 'Unauthorized',
    description: 'missing, malformed, unknown, revoked or expired credential, or one of another environment',
  },
  forbidden: {
    status: 403,
    title: 'Forbidden',
    description:
      'the role may not do this action on this table or write this field, or the credential is of the wrong kind',
  },
  'not-found': {
    status: 404,
    title: 'Not Found',
    description: 'no such record (or not visible to the caller), API key, webhook or delivery',
  },
  'unknown-project': { status: 404, title: 'Unknown project', description: 'the project id is not configured' },
  'unknown-environment': {
    status: 404,
    title: 'Unknown environment',
    description: 'the environment is not configured',
  },
  'unknown-table': { status: 404, title: 'Unknown table', description: 'no such table (names are case-sensitive)' },
  'method-not-allowed': {
    status: 405,
    title: 'Method Not Allowed',
    description: 'the path does not answer this method; the Allow header lists those it answers',
  },
  'request-timeout': {
    status: 408,
    title: 'Request Timeout',
    description: 'the request did not arrive in time; the connection is closed',
  },
  conflict: {
    status: 409,
    title: 'Conflict',
    description: 'a unique value already taken, a record still referenced, or an Idempotency-Key still in flight',
  },
  'payload-too-large': {
    status: 413,
    title: 'Payload Too Large',
    description: "the body is larger than limits.bodyBytes, or an upload larger than its bucket's maxBytes",
  },
  'quota-exceeded': {
    status: 413,
    title: 'Quota exceeded',
    description: "an upload would pass its bucket's maxTotalBytes or maxFiles; nothing was kept",
  },
  'unsupported-media-type': {
    status: 415,
    title: 'Unsupported Media Type',
    description: "the body is not application/json, or an upload's content type is not one its bucket accepts",
  },
  'range-not-satisfiable': {
    status: 416,
    title: 'Range Not Satisfiable',
    description: "a file download's Range lies outside the file",
  },
  validation: {
    status: 422,
    title: 'Validation failed',
    description: 'the body failed validation; errors name the fields',
  },
  'rate-limited': {
    status: 429,
    title: 'Too Many Requests',
    description: 'the rate limit is reached; retry after Retry-After seconds',
  },
  'request-header-too-large': {
    status: 431,
    title: 'Request Header Fields Too Large',
    description: 'the request line and headers exceed 64 KiB (send long filters in a _query body)',
  },
  internal: { status: 500, title: 'Internal Server Error', description: 'a server fault (logged on the server)' },
  unavailable: {
    status: 503,
    title: 'Service Unavailable',
    description: 'not ready (GET /readyz), or metrics that cannot be gathered',
  },
  // Database faults (runtime/db/faults.ts): 503 with Retry-After, since each passes by itself.
  'database-unavailable': {
    status: 503,
    title: 'Database unavailable',
    description: 'the database cannot be reached or dropped the connection; retry after Retry-After seconds',
  },
  'database-busy': {
    status: 503,
    title: 'Database busy',
    description:
      'no database connection or expensive-read slot became free in time, or a write lost a lock conflict with a concurrent one and was rolled back; retry after Retry-After seconds',
  },
  'statement-timeout': {
    status: 503,
    title: 'Database statement timeout',
    description: 'the statement ran past database.statementTimeoutMs; retry after Retry-After seconds',
  },
  // The file store of an S3 storage backend (runtime/storage/s3.ts): 503 with Retry-After, nothing kept.
  'storage-unavailable': {
    status: 503,
    title: 'File storage unavailable',
    description:
      'the file store (S3) could not be reached or refused the request; nothing was changed, retry after Retry-After seconds',
  },
} as const satisfies Record<string, { status: number; title: string; description: string }>;

export type ProblemKind = keyof typeof PROBLEM_KINDS;

/** The headers a kind's answer carries besides Content-Type (the OpenAPI document lists them). */
export const PROBLEM_HEADERS: Partial<Record<ProblemKind, readonly string[]>> = {
  unauthorized: ['WWW-Authenticate'],
  'rate-limited': ['Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'],
  unavailable: ['Retry-After'],
  'database-unavailable': ['Retry-After'],
  'database-busy': ['Retry-After'],
  'statement-timeout': ['Retry-After'],
  'storage-unavailable': ['Retry-After'],
};
