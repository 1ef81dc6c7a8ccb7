/** `svcgen.config.json` (docs/config.md): one zod schema, defaults included. */
import { z } from 'zod';
import { BUCKET_NAME_PATTERN } from '../model/index.ts';

const seconds = z.number().int().positive();
const perMinute = z.number().int().positive();

const filterValue = z.union([z.string(), z.number(), z.boolean(), z.null(), z.record(z.string(), z.unknown())]);

const actionRule = z.union([
  z.boolean(),
  z
    .object({
      filter: z.record(z.string(), filterValue).optional(),
      fields: z.array(z.string()).optional(),
    })
    .strict(),
]);

const tablePermissions = z
  .object({
    read: actionRule.optional(),
    create: actionRule.optional(),
    update: actionRule.optional(),
    delete: actionRule.optional(),
  })
  .strict();

const role = z
  .object({
    signup: z.boolean().default(false),
    tables: z.record(z.string(), tablePermissions).default({}),
  })
  .strict();

/** A bucket's rule for one action: true, false, or a row filter over file metadata (docs/storage.md). */
const bucketRule = z.union([
  z.boolean(),
  z
    .object({
      /** Names fields of FILE_FILTER_FIELDS (checked in parseConfig, which can say which ones exist). */
      filter: z.record(z.string(), filterValue).optional(),
    })
    .strict(),
]);

const contentTypePattern = z
  .string()
  .regex(
    /^([a-z0-9][a-z0-9!#$&^_.+-]*|\*)\/([a-z0-9][a-z0-9!#$&^_.+-]*|\*)$/,
    'a media type such as "image/png", "image/*" or "*/*" (lower case, no parameters)',
  );

const bucket = z
  .object({
    /** Largest file accepted, in bytes; larger → 413 while it streams, nothing kept. */
    maxBytes: z
      .number()
      .int()
      .positive()
      .default(10 * 1024 * 1024),
    /** Media types accepted (patterns like image/*); checked against what is declared and against the first bytes. */
    contentTypes: z.array(contentTypePattern).min(1).default(['*/*']),
    /** true: anyone may read a file's metadata and bytes by id, without credentials. */
    public: z.boolean().default(false),
    /** Quota: bytes of all the bucket's files together, per environment; an upload past it → 413 quota-exceeded. */
    maxTotalBytes: z.number().int().positive().optional(),
    /** Quota: files in the bucket, per environment; an upload past it → 413 quota-exceeded. */
    maxFiles: z.number().int().positive().optional(),
    roles: z
      .record(
        z.string(),
        z
          .object({ read: bucketRule.optional(), create: bucketRule.optional(), delete: bucketRule.optional() })
          .strict(),
      )
      .default({}),
  })
  .strict();

const envVarName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'the name of an environment variable (letters, digits and _), not its value');

/** Where file bytes are kept (docs/storage.md "Backends"); credentials come from the environment, never from here. */
const storageBackend = z.discriminatedUnion(
  'type',
  [
    z
      .object({
        type: z.literal('local'),
        /** Folder of the local-disk backend, relative to the project folder (storage.root by default). */
        root: z.string().min(1).optional(),
      })
      .strict(),
    z
      .object({
        type: z.literal('s3'),
        bucket: z
          .string({ error: 'the name of the S3 bucket that keeps the files' })
          .regex(
            /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/,
            'an S3 bucket name: 3 to 63 lower-case letters, digits, dots and hyphens, starting and ending with a letter or digit',
          ),
        /** The bucket's region; else AWS_REGION, AWS_DEFAULT_REGION, else us-east-1. */
        region: z
          .string()
          .regex(/^[a-z0-9-]+$/, 'a region name such as "eu-west-1"')
          .optional(),
        /** An S3-compatible store's URL (MinIO, Ceph, R2, ...); AWS S3 when absent. */
        endpoint: z
          .url({ protocol: /^https?$/, error: 'an http(s) URL of the store, such as "http://127.0.0.1:9000"' })
          .optional(),
        /** Bucket in the path (http://host/bucket/key), which MinIO and most S3-compatible stores need. */
        forcePathStyle: z.boolean().default(false),
        /** Keys are <prefix>/<environment>/<bucket>/<id>; the prefix is svcgen's alone (the sweep removes unknown ids under it). */
        prefix: z
          .string()
          .regex(
            /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*\/?$/,
            'folder names of letters, digits, ., _ and - separated by / (e.g. "svcgen/files")',
          )
          .optional(),
        /** Names of environment variables holding the access key; without them the AWS default chain (AWS_ACCESS_KEY_ID, profiles, roles). */
        accessKeyIdEnv: envVarName.optional(),
        secretAccessKeyEnv: envVarName.optional(),
      })
      .strict()
      .refine((s) => (s.accessKeyIdEnv === undefined) === (s.secretAccessKeyEnv === undefined), {
        message: 'give accessKeyIdEnv and secretAccessKeyEnv together, or neither (the AWS default credential chain)',
        path: ['accessKeyIdEnv'],
      }),
  ],
  { error: 'type is "local" (the default) or "s3"' },
);

const environmentName = z
  .string()
  .regex(/^[a-z][a-z0-9_]{0,39}$/, 'lower-case letters, digits and _, starting with a letter, at most 40 characters');

export const configSchema = z
  .object({
    $schema: z.string().optional(),
    project: z.object({ id: z.string().min(1).max(100) }).strict(),
    environments: z
      .array(environmentName)
      .min(1)
      .default(['master'])
      .refine((names) => new Set(names).size === names.length, 'environment names must be unique'),
    auth: z
      .object({
        enabled: z.boolean().default(true),
        environments: z.array(environmentName).optional(),
        emailVerification: z.boolean().default(true),
        jwe: z.boolean().default(false),
        accessTokenTtl: seconds.default(900),
        refreshTokenTtl: seconds.default(2592000),
        codeTtl: seconds.default(3600),
        codeMaxAttempts: z.number().int().positive().default(5),
        /**
         * Wrong codes an account may send per codeTtl, across every code it is sent (a new code does
         * not bring fresh attempts); past it every code of the account fails until the window moves on.
         */
        codeMaxFailuresPerAccount: z.number().int().positive().default(10),
        lockout: z
          .object({
            maxFailedAttempts: z.number().int().positive().default(5),
            duration: seconds.default(900),
          })
          .strict()
          .prefault({}),
        password: z
          .object({ minLength: z.number().int().min(1).max(72).default(8) })
          .strict()
          .prefault({}),
        defaultRole: z.string().optional(),
      })
      .strict()
      .prefault({}),
    rateLimits: z
      .object({
        signupPerMinutePerIp: perMinute.default(10),
        loginPerMinutePerIp: perMinute.default(20),
        recoveryPerMinutePerEmail: perMinute.default(5),
        dataPerMinutePerProject: perMinute.default(6000),
        /**
         * Each caller's own share of the project's data budget (a user or an API key), so one caller
         * cannot use up the whole project's; default a fifth of dataPerMinutePerProject (callerDataLimit).
         */
        dataPerMinutePerCaller: perMinute.optional(),
        /** Data requests per minute and client address whose credentials fail (401); beyond → 429. */
        unauthenticatedPerMinutePerIp: perMinute.default(60),
        /** confirm-signup and reset-password attempts per minute and client address. */
        codePerMinutePerIp: perMinute.default(20),
        /** A signed-in user's reads of their account and sessions, and ends of sessions, per minute. */
        accountPerMinutePerUser: perMinute.default(60),
        /** A signed-in user's password changes, e-mail changes and confirmations, and deletions, per minute. */
        accountChangesPerMinutePerUser: perMinute.default(5),
      })
      .strict()
      .prefault({}),
    mail: z
      .object({
        smtpUrl: z.string().optional(),
        from: z.string().default('no-reply@localhost'),
      })
      .strict()
      .prefault({}),
    webhooks: z
      .object({
        retryDelaysMs: z.array(z.number().int().min(0)).min(1).default([0, 1000, 5000, 30000, 300000]),
        timeoutMs: z.number().int().positive().default(5000),
        circuit: z
          .object({
            failureThreshold: z.number().int().positive().default(5),
            cooldownMs: z.number().int().positive().default(120000),
          })
          .strict()
          .prefault({}),
        allowHttp: z.boolean().default(false),
        allowPrivateTargets: z.boolean().default(false),
        /** Seconds a finished delivery (delivered or dead_letter) stays in the history. */
        historyRetention: z.number().int().positive().default(604800),
        /** Delivery attempts in flight per worker process. */
        concurrency: z.number().int().min(1).max(500).default(32),
      })
      .strict()
      .prefault({}),
    cors: z
      .object({
        /** Origins allowed to call /auth and the data API from a browser; "*" for any (then without credentials). */
        origins: z.array(z.union([z.literal('*'), z.url({ protocol: /^https?$/ })])).default([]),
        credentials: z.boolean().default(false),
      })
      .strict()
      .refine(
        (cors) => !(cors.credentials && cors.origins.includes('*')),
        'origins "*" cannot be combined with credentials: list the origins',
      )
      .prefault({}),
    /** Whether X-Forwarded-For gives the client address (for per-IP rate limits): true, or the proxies' addresses/subnets. */
    trustProxy: z.union([z.boolean(), z.array(z.string().min(1))]).default(false),
    limits: z
      .object({
        /** Largest request body accepted, in bytes; larger → 413. */
        bodyBytes: z.number().int().positive().default(1048576),
      })
      .strict()
      .prefault({}),
    /** Slow or idle clients are cut off (408) and SIGTERM drains within a bound (docs/deployment.md "HTTP timeouts"). */
    http: z
      .object({
        /** The request line and headers must arrive within this, from the first byte; else 408. */
        headersTimeoutMs: z.number().int().min(100).max(600_000).default(10_000),
        /** The whole request, body included, must arrive within this; else 408. */
        requestTimeoutMs: z.number().int().min(100).max(3_600_000).default(30_000),
        /** An idle keep-alive connection is closed after this. */
        keepAliveTimeoutMs: z.number().int().min(100).max(600_000).default(5_000),
        /** Connections open at once per process; more are closed on accept. */
        maxConnections: z.number().int().min(1).max(1_000_000).default(1_000),
        /** Connections open at once per client address (the TCP peer; trustProxy peers are exempt); more → 429 on accept; `null`: off. */
        maxConnectionsPerAddress: z.number().int().min(1).max(1_000_000).nullable().default(200),
        /** On SIGTERM, in-flight requests get this long before their connections are closed. */
        drainTimeoutMs: z.number().int().min(0).max(600_000).default(10_000),
      })
      .strict()
      .refine((http) => http.headersTimeoutMs <= http.requestTimeoutMs, {
        message: 'headersTimeoutMs cannot be more than requestTimeoutMs (the headers are part of the request)',
        path: ['headersTimeoutMs'],
      })
      .prefault({}),
    database: z
      .object({
        /** Connections per server process; all processes together must stay under max_connections. */
        poolSize: z.number().int().min(1).max(1000).default(10),
        /** A request's SQL statement is cancelled in PostgreSQL past this (503 Problem); 0 turns it off. */
        statementTimeoutMs: z.number().int().min(0).max(3_600_000).default(5000),
        /** How long a request waits for a free pool connection before a 503 Problem. */
        poolWaitTimeoutMs: z.number().int().min(1).max(600_000).default(2000),
        /**
         * Expensive reads (aggregates, large pages, count=exact, unindexed filters and sorts) running
         * at once per process, so they cannot take every pool connection. Unset (the default), the
         * limit adapts to their latency, from half of poolSize up to poolSize less a quarter
         * (runtime/server/features/data.ts); set, it is this fixed number.
         */
        expensiveReadConcurrency: z.number().int().min(1).max(1000).optional(),
        /** Expensive reads waiting for a slot (at most poolWaitTimeoutMs); beyond it → 503 at once. */
        expensiveReadQueue: z.number().int().min(0).max(100_000).default(50),
        /**
         * Places of that budget (running and waiting) one caller may hold at once; past it → 429. Unset,
         * half of the budget's places at most (runtime/server/features/data.ts expensiveReadsPerCaller).
         */
        expensiveReadsPerCaller: z.number().int().min(1).max(100_000).optional(),
      })
      .strict()
      .refine((db) => db.expensiveReadConcurrency === undefined || db.expensiveReadConcurrency <= db.poolSize, {
        message:
          'expensiveReadConcurrency cannot be more than poolSize (each running expensive read holds a connection)',
        path: ['expensiveReadConcurrency'],
      })
      .prefault({}),
    /** The GraphQL read API (docs/graphql.md). */
    graphql: z
      .object({
        /** Whether __schema/__type are answered: true (everywhere), false, or the environments where they are. */
        introspection: z.union([z.boolean(), z.array(environmentName)]).default(true),
        /** Bytes of JSON text one document may read (records, introspection); past it → ANSWER_TOO_LARGE. */
        maxAnswerBytes: z.number().int().min(65_536).max(1_073_741_824).default(8_388_608),
      })
      .strict()
      .prefault({}),
    /** GraphQL subscriptions over WebSocket (docs/realtime.md): bounds per process, caller and socket. */
    realtime: z
      .object({
        /** Sockets open at once per process; more are answered 429 at the upgrade. */
        maxConnections: z.number().int().min(1).max(1_000_000).default(10_000),
        /** Sockets per caller (API key or user) per process; more are closed with 4403. */
        maxConnectionsPerCaller: z.number().int().min(1).max(1_000_000).default(100),
        /** Subscriptions per socket; more are answered with an error. */
        maxSubscriptionsPerConnection: z.number().int().min(1).max(10_000).default(100),
        /** Changes waiting for one subscription; past it the socket is closed with 1013. */
        maxQueuedChanges: z.number().int().min(1).max(1_000_000).default(10_000),
        /** Bytes unsent to one socket; past it the socket is closed with 1013. */
        maxBufferedBytes: z.number().int().min(1024).max(1_073_741_824).default(4_194_304),
      })
      .strict()
      .prefault({}),
    /** GET /metrics (Prometheus text), off unless enabled; scrapers send a bearer token. */
    metrics: z
      .object({
        enabled: z.boolean().default(false),
        /** The bearer token; SVCGEN_METRICS_TOKEN overrides it (keep tokens out of committed files). */
        token: z.string().min(16, 'at least 16 characters').optional(),
      })
      .strict()
      .prefault({}),
    /** File storage (docs/storage.md): buckets and where the local backend keeps bytes. */
    storage: z
      .object({
        /** Folder of the local-disk backend, relative to the project folder. */
        root: z.string().min(1).default('.svcgen/files'),
        /** Where bytes are kept: local disk (default) or an S3 bucket. */
        backend: storageBackend.default({ type: 'local' }),
        /** Bytes with no metadata (a crash mid-upload) older than this are removed by the sweep. */
        orphanGraceSeconds: seconds.default(3600),
        /** Default lifetime of a signed download URL; a request may ask for up to signedUrlMaxTtl. */
        signedUrlTtl: seconds.default(900),
        signedUrlMaxTtl: seconds.default(7 * 24 * 3600),
        /**
         * Per caller (API key or user), project and environment, so that one caller cannot hog uploads,
         * downloads or the disk (docs/storage.md "Limits and quotas"); `null` turns a limit off.
         */
        limits: z
          .object({
            /** Uploads a minute, across buckets; more → 429 before the body is read. */
            uploadsPerMinutePerCaller: z.number().int().positive().nullable().default(60),
            /** Bytes stored a day (UTC), across buckets; an upload that would pass it → 429, nothing kept. */
            bytesPerDayPerCaller: z.number().int().positive().nullable().default(1_073_741_824),
            /** Uploads in progress at once per server process; one more → 429 before the body is read. */
            concurrentUploadsPerCaller: z.number().int().positive().nullable().default(10),
            /** Downloads (file content being sent) at once per server process; one more → 429. */
            concurrentDownloadsPerCaller: z.number().int().positive().nullable().default(32),
            /** An upload arriving slower than this over a window (after the first) → 408, nothing kept. */
            minUploadBytesPerSecond: z.number().int().positive().nullable().default(1024),
            /** The window over which minUploadBytesPerSecond is measured; the first one is a grace period. */
            uploadRateWindowMs: z.number().int().min(100).max(600_000).default(10_000),
          })
          .strict()
          .prefault({}),
        /** An upload that receives no byte for this long → 408, nothing kept (uploads are exempt from http.requestTimeoutMs). */
        uploadIdleTimeoutMs: z.number().int().min(100).max(3_600_000).default(30_000),
        /** A download that hands no byte to its connection for this long (the client stopped reading) is cut; `null`: no bound. */
        downloadStallTimeoutMs: z.number().int().min(100).max(3_600_000).nullable().default(60_000),
        /** An upload still arriving after this long → 408, nothing kept; `null`: no bound but the idle and rate ones. */
        uploadTimeoutMs: z.number().int().min(100).max(86_400_000).nullable().default(3_600_000),
        buckets: z
          .record(
            z
              .string()
              .regex(
                BUCKET_NAME_PATTERN,
                'lower-case letters, digits, _ and -, starting with a letter or digit, at most 63',
              ),
            bucket,
          )
          .default({}),
      })
      .strict()
      .prefault({}),
    /** The project's own code (docs/own-code.md): hooks, endpoints, jobs, schedules, auth hooks. */
    code: z
      .object({
        /** The entry file, relative to the project; default svcgen.code.ts when it exists. */
        entry: z.string().min(1).max(500).optional(),
        /** A hook (before, after write) that runs longer is abandoned: its write fails with 500 (docs/own-code.md "Hooks"); an afterCommit is logged. */
        hookTimeoutMs: z.number().int().min(10).max(600_000).default(5_000),
        /** Cron schedules of the code's jobs, beside those the code declares (docs/own-code.md "Schedules"). */
        schedules: z
          .array(
            z
              .object({
                name: z.string().regex(/^[A-Za-z][A-Za-z0-9_]{0,62}$/, 'letters, digits and _, starting with a letter'),
                cron: z.string().min(9).max(200),
                job: z.string().min(1).max(63),
                payload: z.unknown().optional(),
                backfillSeconds: z
                  .number()
                  .int()
                  .min(0)
                  .max(7 * 24 * 3600)
                  .optional(),
              })
              .strict(),
          )
          .default([]),
      })
      .strict()
      .prefault({}),
    /** PostgreSQL functions served as `POST <data prefix>/rpc/<name>` (docs/own-code.md "Database functions"). */
    functions: z
      .record(
        z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/, 'a lower-case SQL identifier: letters, digits and _'),
        z
          .object({
            /** The roles that may call it; none means nobody. */
            roles: z.array(z.string()).default([]),
          })
          .strict(),
      )
      .default({}),
    roles: z
      .record(
        z
          .string()
          .regex(/^[A-Za-z][A-Za-z0-9_-]*$/, 'letters, digits, _ and -')
          .refine(
            (name) => !Object.hasOwn(Object.prototype, name),
            'a name every JavaScript object already has (constructor, toString, valueOf, ...); choose another',
          ),
        role,
      )
      .default({}),
  })
  .strict();

export type Config = z.output<typeof configSchema>;

/** The data requests one caller may make a minute (rateLimits.dataPerMinutePerCaller, or a fifth of the project's). */
export function callerDataLimit(config: Config): number {
  const { dataPerMinutePerCaller, dataPerMinutePerProject } = config.rateLimits;
  return Math.min(
    dataPerMinutePerProject,
    dataPerMinutePerCaller ?? Math.max(1, Math.ceil(dataPerMinutePerProject / 5)),
  );
}
export type RoleConfig = Config['roles'][string];
export type ActionRule = z.output<typeof actionRule>;
export type TablePermissionsConfig = z.output<typeof tablePermissions>;
export type BucketConfig = z.output<typeof bucket>;
export type StorageBackendConfig = z.output<typeof storageBackend>;
