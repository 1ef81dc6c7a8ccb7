// svcgen.config.json (runtime/config): the defaults a minimal file gets, and every problem of an
// invalid one as `<json path>: <message>` (docs/config.md). Without a database: the config is
// checked before anything connects. One row per case.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  callerDataLimit,
  ConfigError,
  jsonErrorLocation,
  loadConfig,
  parseConfig,
  type ModelNames,
} from '../../runtime/config/index.ts';

const MINIMAL = { project: { id: 'p' } };

/** The problems parseConfig reports for `raw` (the test fails if it accepts it). */
function problems(raw: unknown, model?: ModelNames): string[] {
  try {
    parseConfig(raw, 'svcgen.config.json', model);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('the config was accepted');
}

describe('defaults of a minimal config', () => {
  const config = parseConfig(MINIMAL, 'svcgen.config.json');

  it('fills in every section', () => {
    const { rateLimits, ...rest } = config;
    expect(rest).toEqual({
      project: { id: 'p' },
      environments: ['master'],
      auth: {
        enabled: true,
        emailVerification: true,
        jwe: false,
        accessTokenTtl: 900,
        refreshTokenTtl: 2_592_000,
        codeTtl: 3600,
        codeMaxAttempts: 5,
        codeMaxFailuresPerAccount: 10,
        lockout: { maxFailedAttempts: 5, duration: 900 },
        password: { minLength: 8 },
      },
      mail: { from: 'no-reply@localhost' },
      webhooks: {
        retryDelaysMs: [0, 1000, 5000, 30_000, 300_000],
        timeoutMs: 5000,
        circuit: { failureThreshold: 5, cooldownMs: 120_000 },
        allowHttp: false,
        allowPrivateTargets: false,
        historyRetention: 604_800,
        concurrency: 32,
      },
      cors: { origins: [], credentials: false },
      code: { hookTimeoutMs: 5000, schedules: [] },
      functions: {},
      trustProxy: false,
      limits: { bodyBytes: 1_048_576 },
      http: {
        headersTimeoutMs: 10_000,
        requestTimeoutMs: 30_000,
        keepAliveTimeoutMs: 5000,
        maxConnections: 1000,
        maxConnectionsPerAddress: 200,
        drainTimeoutMs: 10_000,
      },
      // expensiveReadConcurrency stays unset: the server resolves it to half of poolSize at start.
      database: { poolSize: 10, statementTimeoutMs: 5000, poolWaitTimeoutMs: 2000, expensiveReadQueue: 50 },
      graphql: { introspection: true, maxAnswerBytes: 8_388_608 },
      realtime: {
        maxConnections: 10_000,
        maxConnectionsPerCaller: 100,
        maxSubscriptionsPerConnection: 100,
        maxQueuedChanges: 10_000,
        maxBufferedBytes: 4_194_304,
      },
      metrics: { enabled: false },
      storage: {
        root: '.svcgen/files',
        backend: { type: 'local' },
        orphanGraceSeconds: 3600,
        signedUrlTtl: 900,
        signedUrlMaxTtl: 604_800,
        limits: {
          uploadsPerMinutePerCaller: 60,
          bytesPerDayPerCaller: 1_073_741_824,
          concurrentUploadsPerCaller: 10,
          concurrentDownloadsPerCaller: 32,
          minUploadBytesPerSecond: 1024,
          uploadRateWindowMs: 10_000,
        },
        uploadIdleTimeoutMs: 30_000,
        downloadStallTimeoutMs: 60_000,
        uploadTimeoutMs: 3_600_000,
        buckets: {},
      },
      roles: {},
    });
    // dataPerMinutePerCaller stays unset: callerDataLimit derives it.
    expect(rateLimits).toMatchObject({
      signupPerMinutePerIp: 10,
      loginPerMinutePerIp: 20,
      recoveryPerMinutePerEmail: 5,
      dataPerMinutePerProject: 6000,
      unauthenticatedPerMinutePerIp: 60,
      codePerMinutePerIp: 20,
      accountPerMinutePerUser: 60,
      accountChangesPerMinutePerUser: 5,
    });
    expect(rateLimits.dataPerMinutePerCaller).toBeUndefined();
  });

  it('storage limits and the upload bound are on by default; null turns each off', () => {
    const off = parseConfig(
      {
        ...MINIMAL,
        storage: {
          limits: {
            uploadsPerMinutePerCaller: null,
            bytesPerDayPerCaller: null,
            concurrentUploadsPerCaller: null,
            concurrentDownloadsPerCaller: null,
            minUploadBytesPerSecond: null,
          },
          uploadTimeoutMs: null,
        },
      },
      'svcgen.config.json',
    ).storage;
    expect(off.limits).toEqual({
      uploadsPerMinutePerCaller: null,
      bytesPerDayPerCaller: null,
      concurrentUploadsPerCaller: null,
      concurrentDownloadsPerCaller: null,
      minUploadBytesPerSecond: null,
      uploadRateWindowMs: 10_000,
    });
    expect(off.uploadTimeoutMs).toBeNull();
  });

  it('fills in a role', () => {
    expect(parseConfig({ ...MINIMAL, roles: { reader: {} } }, 'svcgen.config.json').roles).toEqual({
      reader: { signup: false, tables: {} },
    });
  });

  it('keeps what a section sets and fills in the rest of it', () => {
    const set = parseConfig(
      {
        ...MINIMAL,
        auth: { lockout: { duration: 60 } },
        database: { poolSize: 4, expensiveReadConcurrency: 4, expensiveReadQueue: 0 },
      },
      'svcgen.config.json',
    );
    expect(set.auth.lockout).toEqual({ maxFailedAttempts: 5, duration: 60 });
    expect(set.database).toEqual({
      poolSize: 4,
      statementTimeoutMs: 5000,
      poolWaitTimeoutMs: 2000,
      expensiveReadConcurrency: 4,
      expensiveReadQueue: 0,
    });
  });
});

describe('callerDataLimit', () => {
  const limit = (rateLimits: Record<string, number>) =>
    callerDataLimit(parseConfig({ ...MINIMAL, rateLimits }, 'svcgen.config.json'));

  it.each<[Record<string, number>, number]>([
    [{}, 1200], // a fifth of 6000
    [{ dataPerMinutePerProject: 101 }, 21], // rounded up
    [{ dataPerMinutePerProject: 3 }, 1], // at least 1
    [{ dataPerMinutePerProject: 100, dataPerMinutePerCaller: 40 }, 40],
    [{ dataPerMinutePerProject: 100, dataPerMinutePerCaller: 500 }, 100], // never more than the project's
  ])('%j → %i a minute', (rateLimits, want) => {
    expect(limit(rateLimits)).toBe(want);
  });
});

describe('problems of an invalid config', () => {
  const NAME_RULE = 'lower-case letters, digits and _, starting with a letter, at most 40 characters';
  const PROTO = '"__proto__" cannot be used as a name (it is a property every JavaScript object has)';

  it.each<[string, unknown, string[]]>([
    ['no project', {}, ['$.project: Invalid input: expected object, received undefined']],
    ['not an object', [], ['$: Invalid input: expected object, received array']],
    [
      'an empty project id',
      { project: { id: '' } },
      ['$.project.id: Too small: expected string to have >=1 characters'],
    ],
    [
      'bad environment names',
      { ...MINIMAL, environments: ['Prod', 'ok', '1x'] },
      [`$.environments[0]: ${NAME_RULE}`, `$.environments[2]: ${NAME_RULE}`],
    ],
    [
      'a repeated environment',
      { ...MINIMAL, environments: ['a', 'a'] },
      ['$.environments: environment names must be unique'],
    ],
    [
      'no environment',
      { ...MINIMAL, environments: [] },
      ['$.environments: Too small: expected array to have >=1 items'],
    ],
    [
      'unknown keys',
      { ...MINIMAL, extra: 1, auth: { foo: 1, bar: 2 } },
      ['$.auth: unknown keys "foo", "bar"', '$: unknown key "extra"'],
    ],
    [
      '__proto__ keys, wherever they are',
      JSON.parse('{"project":{"id":"p"},"roles":{"__proto__":{}},"auth":{"__proto__":1}}'),
      [`$.auth.__proto__: ${PROTO}`, `$.roles.__proto__: ${PROTO}`],
    ],
    [
      'role names',
      { ...MINIMAL, roles: { '1bad': {}, 'ok-role_2': {}, constructor: {} } },
      [
        '$.roles["1bad"]: the name "1bad" is not allowed: letters, digits, _ and -',
        '$.roles.constructor: the name "constructor" is not allowed: a name every JavaScript object already has (constructor, toString, valueOf, ...); choose another',
      ],
    ],
    [
      'storage buckets: names, content types, roles and filter fields',
      {
        ...MINIMAL,
        roles: { admin: {} },
        storage: {
          buckets: {
            'Bad Name': {},
            docs: {
              maxBytes: 0,
              contentTypes: ['image/*', 'Text/Plain', 'pdf'],
              roles: { admin: { read: { filter: { environment: 'x', ownerId: '$user.id' } } }, ghost: { read: true } },
            },
          },
        },
      },
      [
        '$.storage.buckets["Bad Name"]: the name "Bad Name" is not allowed: lower-case letters, digits, _ and -, starting with a letter or digit, at most 63',
        '$.storage.buckets.docs.maxBytes: Too small: expected number to be >0',
        '$.storage.buckets.docs.contentTypes[1]: a media type such as "image/png", "image/*" or "*/*" (lower case, no parameters)',
        '$.storage.buckets.docs.contentTypes[2]: a media type such as "image/png", "image/*" or "*/*" (lower case, no parameters)',
      ],
    ],
    [
      'storage backend: an S3 bucket, endpoint, prefix and credential variables',
      {
        ...MINIMAL,
        storage: {
          backend: { type: 's3', bucket: 'ab', endpoint: 'ftp://x', prefix: '/lead', accessKeyIdEnv: 'X' },
        },
      },
      [
        '$.storage.backend.bucket: an S3 bucket name: 3 to 63 lower-case letters, digits, dots and hyphens, starting and ending with a letter or digit',
        '$.storage.backend.endpoint: an http(s) URL of the store, such as "http://127.0.0.1:9000"',
        '$.storage.backend.prefix: folder names of letters, digits, ., _ and - separated by / (e.g. "svcgen/files")',
        '$.storage.backend.accessKeyIdEnv: give accessKeyIdEnv and secretAccessKeyEnv together, or neither (the AWS default credential chain)',
      ],
    ],
    [
      'storage backend of an unknown type',
      { ...MINIMAL, storage: { backend: { type: 'gcs' } } },
      ['$.storage.backend.type: type is "local" (the default) or "s3"'],
    ],
    [
      'storage bucket rules naming what is not defined',
      {
        ...MINIMAL,
        roles: { admin: {} },
        storage: {
          buckets: {
            docs: {
              roles: { admin: { read: { filter: { environment: 'x', ownerId: '$user.id' } } }, ghost: { read: true } },
            },
          },
        },
      },
      [
        '$.storage.buckets.docs.roles.admin.read.filter.environment: files have no field "environment" to filter on (fields: id, name, contentType, size, sha256, ownerId, createdAt)',
        '$.storage.buckets.docs.roles.ghost: role "ghost" is not defined under roles',
      ],
    ],
    [
      'auth naming what is not defined',
      { ...MINIMAL, auth: { environments: ['prod'], defaultRole: 'toString' } },
      [
        '$.auth.environments[0]: "prod" is not one of environments (master)',
        '$.auth.defaultRole: role "toString" is not defined under roles',
      ],
    ],
    [
      'numbers out of range',
      {
        ...MINIMAL,
        auth: { accessTokenTtl: 0, password: { minLength: 73 } },
        webhooks: { retryDelaysMs: [], concurrency: 501 },
      },
      [
        '$.auth.accessTokenTtl: Too small: expected number to be >0',
        '$.auth.password.minLength: Too big: expected number to be <=72',
        '$.webhooks.retryDelaysMs: Too small: expected array to have >=1 items',
        '$.webhooks.concurrency: Too big: expected number to be <=500',
      ],
    ],
    [
      '"*" with credentials',
      { ...MINIMAL, cors: { origins: ['*'], credentials: true } },
      ['$.cors: origins "*" cannot be combined with credentials: list the origins'],
    ],
    [
      'origins that are not http(s) URLs',
      { ...MINIMAL, cors: { origins: ['ftp://x.example', 'example.com'] } },
      ['$.cors.origins[0]: Invalid URL', '$.cors.origins[1]: Invalid URL'],
    ],
    [
      'headers allowed longer than the request',
      { ...MINIMAL, http: { headersTimeoutMs: 20_000, requestTimeoutMs: 10_000 } },
      [
        '$.http.headersTimeoutMs: headersTimeoutMs cannot be more than requestTimeoutMs (the headers are part of the request)',
      ],
    ],
    [
      'http bounds',
      { ...MINIMAL, http: { headersTimeoutMs: 50, maxConnections: 0 } },
      [
        '$.http.headersTimeoutMs: Too small: expected number to be >=100',
        '$.http.maxConnections: Too small: expected number to be >=1',
      ],
    ],
    [
      'more expensive-read slots than connections',
      { ...MINIMAL, database: { poolSize: 4, expensiveReadConcurrency: 5 } },
      [
        '$.database.expensiveReadConcurrency: expensiveReadConcurrency cannot be more than poolSize (each running expensive read holds a connection)',
      ],
    ],
    [
      'a negative expensive-read queue',
      { ...MINIMAL, database: { expensiveReadQueue: -1 } },
      ['$.database.expensiveReadQueue: Too small: expected number to be >=0'],
    ],
    [
      'a share of expensive reads per caller of 0',
      { ...MINIMAL, database: { expensiveReadsPerCaller: 0 } },
      ['$.database.expensiveReadsPerCaller: Too small: expected number to be >=1'],
    ],
    [
      'a short metrics token',
      { ...MINIMAL, metrics: { enabled: true, token: 'short' } },
      ['$.metrics.token: at least 16 characters'],
    ],
  ])('%s', (_name, raw, want) => {
    expect(problems(raw)).toEqual(want);
  });

  it('checks role rules against the model: table names, and field names when given', () => {
    const raw = {
      ...MINIMAL,
      roles: {
        r: { tables: { Nope: { read: true }, City: { read: { fields: ['name', 'nope'] } }, '*': { read: true } } },
      },
    };
    expect(problems(raw, { City: ['id', 'name'] })).toEqual([
      '$.roles.r.tables.Nope: no model named "Nope" in schema.prisma',
      '$.roles.r.tables.City.read.fields[1]: City has no field "nope" (fields: id, name)',
    ]);
    // with table names only, fields are not checked
    expect(problems(raw, ['City'])).toEqual(['$.roles.r.tables.Nope: no model named "Nope" in schema.prisma']);
  });

  it('says which file, and lists each problem on a line of the error message', () => {
    expect(() => parseConfig({ environments: [] }, 'app/svcgen.config.json')).toThrow(
      'app/svcgen.config.json is invalid:\n  - $.project: Invalid input: expected object, received undefined\n  - $.environments: Too small: expected array to have >=1 items',
    );
  });
});

describe('loadConfig', () => {
  async function load(text: string | undefined): Promise<string[]> {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'svcgen-config-unit-'));
    try {
      if (text !== undefined) await fs.writeFile(path.join(dir, 'svcgen.config.json'), text);
      await loadConfig(dir);
    } catch (error) {
      if (error instanceof ConfigError) return error.problems;
      throw error;
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
    throw new Error('the config was accepted');
  }

  it('says how to start when there is no file', async () => {
    expect(await load(undefined)).toEqual([
      '$: file not found (create svcgen.config.json with at least {"project": {"id": "<id>"}})',
    ]);
  });

  it('points at the line and column where the JSON goes wrong', async () => {
    const [problem] = await load('{\n  "project": {"id": "p"},\n}');
    expect(problem).toMatch(/^line 3, column 1: not valid JSON \(.+\)$/);
  });

  it.each<[string, { line: number; column: number }]>([
    ['{\n  "a": 1,\n  }', { line: 3, column: 3 }],
    ['{"a": tru}', { line: 1, column: 10 }],
    ['{"a":', { line: 1, column: 6 }], // cut short: the end
    ['', { line: 1, column: 1 }],
  ])('jsonErrorLocation(%j) → %j', (text, want) => {
    expect(jsonErrorLocation(text)).toEqual(want);
  });
});
