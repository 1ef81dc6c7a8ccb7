/**
 * svcgen's own tables. They are versioned here, not in the project's migrations folder: the
 * project's migrations describe the user's data model only.
 */
import { withConnection } from './client.ts';
import type { Database } from './pool.ts';

const STEPS: readonly string[] = [
  `CREATE TABLE svcgen.management_tokens (
     id          text PRIMARY KEY,
     name        text NOT NULL,
     token_hash  text NOT NULL UNIQUE,
     created_at  timestamptz NOT NULL DEFAULT now(),
     revoked_at  timestamptz
   );
   CREATE TABLE svcgen.api_keys (
     id           text PRIMARY KEY,
     project_id   text NOT NULL,
     environment  text NOT NULL,
     name         text NOT NULL,
     prefix       text NOT NULL,
     key_hash     text NOT NULL UNIQUE,
     roles        text[] NOT NULL,
     context      jsonb NOT NULL DEFAULT '{}',
     created_at   timestamptz NOT NULL DEFAULT now(),
     last_used_at timestamptz,
     revoked_at   timestamptz
   );
   CREATE INDEX api_keys_project_environment ON svcgen.api_keys (project_id, environment, created_at);`,
  `CREATE TABLE svcgen.secrets (
     name       text PRIMARY KEY,
     value      text NOT NULL,
     created_at timestamptz NOT NULL DEFAULT now()
   );
   CREATE TABLE svcgen.idempotency (
     caller       text NOT NULL,
     project_id   text NOT NULL,
     environment  text NOT NULL,
     key          text NOT NULL,
     request_hash text NOT NULL,
     state        text NOT NULL CHECK (state IN ('running', 'done')),
     status       integer,
     headers      jsonb,
     body         text,
     created_at   timestamptz NOT NULL DEFAULT now(),
     expires_at   timestamptz NOT NULL,
     PRIMARY KEY (caller, project_id, environment, key)
   );
   CREATE INDEX idempotency_expires ON svcgen.idempotency (expires_at);
   CREATE UNLOGGED TABLE svcgen.rate_limits (
     bucket       text NOT NULL,
     window_start timestamptz NOT NULL,
     hits         integer NOT NULL,
     PRIMARY KEY (bucket, window_start)
   );`,
  // User authentication: accounts, codes and sessions (docs/api.md §3).
  `CREATE TABLE svcgen.users (
     id              uuid PRIMARY KEY,
     project_id      text NOT NULL,
     environment     text NOT NULL,
     email           text NOT NULL,
     password_hash   text NOT NULL,
     first_name      text NOT NULL,
     last_name       text NOT NULL,
     roles           text[] NOT NULL,
     verified_at     timestamptz,
     failed_logins   integer NOT NULL DEFAULT 0,
     locked_until    timestamptz,
     created_at      timestamptz NOT NULL DEFAULT now(),
     updated_at      timestamptz NOT NULL DEFAULT now(),
     UNIQUE (project_id, environment, email)
   );
   CREATE TABLE svcgen.auth_codes (
     user_id     uuid NOT NULL REFERENCES svcgen.users ON DELETE CASCADE,
     purpose     text NOT NULL CHECK (purpose IN ('confirm-signup', 'reset-password')),
     code_hash   text NOT NULL,
     attempts    integer NOT NULL DEFAULT 0,
     expires_at  timestamptz NOT NULL,
     created_at  timestamptz NOT NULL DEFAULT now(),
     PRIMARY KEY (user_id, purpose)
   );
   CREATE TABLE svcgen.sessions (
     id          uuid PRIMARY KEY,
     user_id     uuid NOT NULL REFERENCES svcgen.users ON DELETE CASCADE,
     created_at  timestamptz NOT NULL DEFAULT now(),
     revoked_at  timestamptz
   );
   CREATE INDEX sessions_user ON svcgen.sessions (user_id);
   CREATE TABLE svcgen.refresh_tokens (
     token_hash  text PRIMARY KEY,
     session_id  uuid NOT NULL REFERENCES svcgen.sessions ON DELETE CASCADE,
     created_at  timestamptz NOT NULL DEFAULT now(),
     expires_at  timestamptz NOT NULL,
     used_at     timestamptz
   );
   CREATE INDEX refresh_tokens_session ON svcgen.refresh_tokens (session_id);
   CREATE TABLE svcgen.revoked_tokens (
     jti         text PRIMARY KEY,
     expires_at  timestamptz NOT NULL
   );
   CREATE INDEX revoked_tokens_expires ON svcgen.revoked_tokens (expires_at);
   CREATE TABLE svcgen.signing_keys (
     project_id   text NOT NULL,
     environment  text NOT NULL,
     use          text NOT NULL CHECK (use IN ('sig', 'enc')),
     kid          text NOT NULL UNIQUE,
     public_jwk   jsonb NOT NULL,
     private_jwk  text NOT NULL,
     created_at   timestamptz NOT NULL DEFAULT now(),
     PRIMARY KEY (project_id, environment, use)
   );`,
  // Webhooks: subscriptions, the events captured by data statements, one delivery per event and
  // subscription, the outbox of new deliveries not yet handed to the job queue, and the circuit of
  // each receiving endpoint (origin) per environment. Deliveries name their subscription and event
  // without foreign keys: a key check would lock the one subscription row from every concurrent
  // write; deleting a subscription deletes its deliveries, and pruning removes orphaned events.
  `CREATE TABLE svcgen.webhooks (
     id             text PRIMARY KEY,
     project_id     text NOT NULL,
     environment    text NOT NULL,
     table_name     text NOT NULL,
     events         text[] NOT NULL,
     url            text NOT NULL,
     endpoint       text NOT NULL,
     secret         text NOT NULL,
     active         boolean NOT NULL DEFAULT true,
     filter         jsonb,
     select_fields  text[],
     created_at     timestamptz NOT NULL DEFAULT now(),
     updated_at     timestamptz NOT NULL DEFAULT now()
   );
   CREATE INDEX webhooks_watch ON svcgen.webhooks (environment, table_name) WHERE active;
   CREATE TABLE svcgen.webhook_events (
     id              text PRIMARY KEY,
     environment     text NOT NULL,
     table_name      text NOT NULL,
     operation       text NOT NULL,
     record          json NOT NULL,
     changed_fields  text[] NOT NULL,
     created_at      timestamptz NOT NULL DEFAULT now()
   );
   CREATE TABLE svcgen.webhook_deliveries (
     id               text PRIMARY KEY,
     webhook_id       text NOT NULL,
     event_id         text NOT NULL,
     status           text NOT NULL DEFAULT 'pending',
     http_status      integer,
     attempts         integer NOT NULL DEFAULT 0,
     last_error       text,
     next_attempt_at  timestamptz NOT NULL DEFAULT now(),
     lease_until      timestamptz,
     created_at       timestamptz NOT NULL DEFAULT now(),
     updated_at       timestamptz NOT NULL DEFAULT now()
   );
   CREATE INDEX webhook_deliveries_history ON svcgen.webhook_deliveries (webhook_id, created_at DESC, id DESC);
   CREATE INDEX webhook_deliveries_event ON svcgen.webhook_deliveries (event_id);
   CREATE INDEX webhook_deliveries_waiting ON svcgen.webhook_deliveries (next_attempt_at)
     WHERE status IN ('pending', 'retrying', 'deferred');
   CREATE INDEX webhook_deliveries_finished ON svcgen.webhook_deliveries (updated_at)
     WHERE status IN ('delivered', 'dead_letter');
   CREATE TABLE svcgen.webhook_outbox (
     seq          bigserial PRIMARY KEY,
     delivery_id  text NOT NULL
   );
   CREATE TABLE svcgen.webhook_circuits (
     environment           text NOT NULL,
     endpoint              text NOT NULL,
     consecutive_failures  integer NOT NULL DEFAULT 0,
     open_until            timestamptz,
     trial_until           timestamptz,
     PRIMARY KEY (environment, endpoint)
   );`,
  // Checked writes (docs/permissions.md "Writing"): a data statement calls this on each row it
  // creates or changes, with whether the row matches the role's action filter; a row that does not
  // aborts the whole statement with SQLSTATE SVRF1, which the data API answers with 403 row_filter.
  `CREATE FUNCTION svcgen.row_filter_check(ok boolean) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
   BEGIN
     IF ok IS NOT TRUE THEN
       RAISE EXCEPTION 'the row does not match the role''s filter' USING ERRCODE = 'SVRF1';
     END IF;
     RETURN TRUE;
   END $$;`,
  // Abuse limits of /auth (docs/api.md §3 "Log in", "Password recovery"). login_failures counts the
  // failed logins of e-mails without an account exactly as svcgen.users counts an account's, so the
  // answers do not tell which e-mails exist; it holds a keyed hash of the e-mail, never the address.
  // auth_code_failures counts each account's wrong codes per purpose and codeTtl window, across
  // every code it is sent (the row outlives the codes).
  `CREATE TABLE IF NOT EXISTS svcgen.login_failures (
     project_id     text NOT NULL,
     environment    text NOT NULL,
     email_hash     text NOT NULL,
     failed_logins  integer NOT NULL,
     locked_until   timestamptz,
     PRIMARY KEY (project_id, environment, email_hash)
   );
   CREATE INDEX IF NOT EXISTS login_failures_locked ON svcgen.login_failures (locked_until) WHERE locked_until IS NOT NULL;
   CREATE TABLE IF NOT EXISTS svcgen.auth_code_failures (
     user_id       uuid NOT NULL REFERENCES svcgen.users ON DELETE CASCADE,
     purpose       text NOT NULL CHECK (purpose IN ('confirm-signup', 'reset-password')),
     failures      integer NOT NULL DEFAULT 0,
     window_start  timestamptz NOT NULL DEFAULT now(),
     PRIMARY KEY (user_id, purpose)
   );
   CREATE INDEX IF NOT EXISTS auth_code_failures_window ON svcgen.auth_code_failures (window_start);`,
  // Self-service accounts (docs/api.md §3 "Your account"): codes that confirm a new e-mail address
  // carry that address (payload) from the request to the confirmation.
  `ALTER TABLE svcgen.auth_codes ADD COLUMN IF NOT EXISTS payload text;
   ALTER TABLE svcgen.auth_codes DROP CONSTRAINT IF EXISTS auth_codes_purpose_check;
   ALTER TABLE svcgen.auth_codes ADD CONSTRAINT auth_codes_purpose_check
     CHECK (purpose IN ('confirm-signup', 'reset-password', 'change-email'));
   ALTER TABLE svcgen.auth_code_failures DROP CONSTRAINT IF EXISTS auth_code_failures_purpose_check;
   ALTER TABLE svcgen.auth_code_failures ADD CONSTRAINT auth_code_failures_purpose_check
     CHECK (purpose IN ('confirm-signup', 'reset-password', 'change-email'));`,
  // File storage (docs/storage.md): one row per complete file, inserted only once its bytes are
  // stored. Its bytes are at the key (environment, bucket, id) of the configured backend.
  `CREATE TABLE svcgen.files (
     id            uuid PRIMARY KEY,
     environment   text NOT NULL,
     bucket        text NOT NULL,
     name          text NOT NULL,
     content_type  text NOT NULL,
     size          bigint NOT NULL,
     sha256        text NOT NULL,
     owner_id      text,
     created_at    timestamptz NOT NULL DEFAULT now()
   );
   CREATE INDEX files_bucket_created ON svcgen.files (environment, bucket, created_at, id);
   CREATE INDEX files_bucket_owner ON svcgen.files (environment, bucket, owner_id);`,
  // Webhook capture writes one outbox row per data statement, listing its deliveries in order,
  // instead of one row per delivery; rows of the old form (delivery_id) are still drained.
  `ALTER TABLE svcgen.webhook_outbox ADD COLUMN IF NOT EXISTS delivery_ids text[];
   ALTER TABLE svcgen.webhook_outbox ALTER COLUMN delivery_id DROP NOT NULL;`,
  // Real-time subscriptions (docs/realtime.md): which processes hold live subscribers for which
  // tables (each refreshes its rows while it does; a data statement captures events while one has
  // not expired), and the NOTIFY that hands a statement's event ids to every process on commit.
  `CREATE UNLOGGED TABLE svcgen.live_interest (
     environment  text NOT NULL,
     table_name   text NOT NULL,
     instance     text NOT NULL,
     expires_at   timestamptz NOT NULL,
     PRIMARY KEY (environment, table_name, instance)
   );
   CREATE FUNCTION svcgen.live_notify(environment text, table_name text, ids text[]) RETURNS boolean
   LANGUAGE plpgsql VOLATILE AS $$
   DECLARE
     size constant integer := 150; -- 150 ids of 36 characters stay well under NOTIFY's 8000 bytes
   BEGIN
     FOR i IN 0 .. (cardinality(ids) - 1) / size LOOP
       PERFORM pg_notify('svcgen', 'live:' || environment || E'\t' || table_name || E'\t'
         || array_to_string(ids[i * size + 1 : (i + 1) * size], ','));
     END LOOP;
     RETURN true;
   END $$;`,
  // ... and then lists the statement's (event, subscription) pairs instead: the delivery workers
  // record the deliveries as they drain the outbox, off the write's path.
  `ALTER TABLE svcgen.webhook_outbox ADD COLUMN IF NOT EXISTS event_ids text[],
     ADD COLUMN IF NOT EXISTS webhook_ids text[];`,
  // ... in a table of their own: a delivery worker of an earlier release, still running during an
  // upgrade, drains svcgen.webhook_outbox only, and would drop the pairs it does not know.
  `ALTER TABLE svcgen.webhook_outbox DROP COLUMN IF EXISTS event_ids, DROP COLUMN IF EXISTS webhook_ids;
   CREATE TABLE IF NOT EXISTS svcgen.webhook_event_outbox (
     seq          bigserial PRIMARY KEY,
     event_ids    text[] NOT NULL,
     webhook_ids  text[] NOT NULL,
     created_at   timestamptz NOT NULL DEFAULT now()
   );`,
  // Event capture in one function (runtime/events/capture.ts): a data statement hands it the
  // records of the rows it changed (and, for an update, each row's changed fields), in row order.
  // It finds the active subscriptions for the table and operation and whether live subscribers
  // hold interest, writes an event for each row a subscription's filter matches (every row while
  // live interest holds), notifies the live subscribers of the statement's event ids, and answers
  // the (event, subscription) pairs in row order, for the statement's one outbox row (none when
  // nothing matched). PostgreSQL keeps its statements' plans per connection: written as CTEs of
  // the data statement they were planned again with every write.
  `CREATE FUNCTION svcgen.capture_events(in_environment text, in_table text, in_operation text, in_records json[],
     in_changes json[]) RETURNS TABLE (event_ids text[], webhook_ids text[]) LANGUAGE plpgsql VOLATILE AS $$
   DECLARE
     hook_ids text[];
     hook_filters jsonb[];
     live boolean;
     all_ids text[];
     pair_events text[];
     pair_hooks text[];
   BEGIN
     IF in_records IS NULL THEN RETURN; END IF;
     SELECT array_agg(s.id ORDER BY s.id), array_agg(s.filter ORDER BY s.id) INTO hook_ids, hook_filters
       FROM svcgen.webhooks s
       WHERE s.environment = in_environment AND s.table_name = in_table AND s.active AND in_operation = ANY (s.events);
     live := EXISTS (SELECT 1 FROM svcgen.live_interest l
       WHERE l.environment = in_environment AND l.table_name = in_table AND l.expires_at > now());
     IF hook_ids IS NULL AND NOT live THEN RETURN; END IF;
     WITH event AS (
         -- a UUIDv7 laid out as runtime/events/outbox.ts newIdSql does
         SELECT 'evt_' || encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
             placing substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex') AS id,
           e.record, e.n
         FROM unnest(in_records) WITH ORDINALITY AS e(record, n)),
       pair AS (
         SELECT event.id AS event_id, h.id AS webhook_id, event.n
         FROM event, unnest(hook_ids, hook_filters) AS h(id, filter)
         WHERE h.filter IS NULL OR event.record::jsonb @> h.filter),
       written AS (
         INSERT INTO svcgen.webhook_events (id, environment, table_name, operation, record, changed_fields)
         SELECT event.id, in_environment, in_table, in_operation, event.record,
           CASE WHEN in_changes IS NULL THEN '{}'::text[]
             ELSE ARRAY(SELECT json_array_elements_text(in_changes[event.n])) END
         FROM event WHERE live OR event.id IN (SELECT event_id FROM pair))
     SELECT (SELECT array_agg(id ORDER BY n) FROM event),
       (SELECT array_agg(event_id ORDER BY n, webhook_id) FROM pair),
       (SELECT array_agg(webhook_id ORDER BY n, webhook_id) FROM pair)
       INTO all_ids, pair_events, pair_hooks;
     IF live THEN PERFORM svcgen.live_notify(in_environment, in_table, all_ids); END IF;
     IF pair_events IS NOT NULL THEN
       event_ids := pair_events;
       webhook_ids := pair_hooks;
       RETURN NEXT;
     END IF;
   END $$;`,
  // Storage limits per caller (docs/storage.md "Limits and quotas"): bytes each caller stored a day (UTC).
  `CREATE TABLE svcgen.file_usage (
     caller       text NOT NULL,
     day          date NOT NULL,
     bytes        bigint NOT NULL,
     PRIMARY KEY (caller, day)
   );`,
  // Role changes end the user's live subscriptions (docs/realtime.md "Lifecycle and limits"): whatever changes
  // svcgen.users.roles (an endpoint, SQL) notifies every process on commit, on the shared channel.
  `CREATE FUNCTION svcgen.users_roles_changed() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     PERFORM pg_notify('svcgen', 'roles-changed:' || NEW.id::text || chr(9) || to_json(NEW.roles)::text);
     RETURN NULL;
   END $$;
   CREATE TRIGGER users_roles_changed AFTER UPDATE OF roles ON svcgen.users
     FOR EACH ROW WHEN (OLD.roles IS DISTINCT FROM NEW.roles) EXECUTE FUNCTION svcgen.users_roles_changed();`,
  // Record fields that reference files (docs/storage.md "Records that reference files"): a data
  // statement calls this with whether the file a field names exists and is readable to the caller;
  // it aborts the statement with SQLSTATE SVFR1 (the field in DETAIL), which the API answers with 422.
  `CREATE FUNCTION svcgen.file_reference_check(ok boolean, field text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
   BEGIN
     IF ok IS NOT TRUE THEN
       RAISE EXCEPTION 'no file the caller may read' USING ERRCODE = 'SVFR1', DETAIL = field;
     END IF;
     RETURN TRUE;
   END $$;`,
  // Live interest narrowed to the rows subscribers can want (docs/realtime.md "What a write
  // costs"): each process lists, per table, JSON objects one of which a row (to_jsonb, by column)
  // must contain for a local subscriber to want it (NULL: every row). The data statement decides
  // per row whether some process wants it (in_live) and calls this only when a row is wanted by a
  // live subscriber or could be by a webhook: a write no one can see takes no call, no event and no
  // NOTIFY, whose lock PostgreSQL holds across the commit's flush and so serializes such commits.
  // The five-argument form stays for processes of the release before, during an upgrade.
  `ALTER TABLE svcgen.live_interest ADD COLUMN IF NOT EXISTS filters jsonb;
   CREATE FUNCTION svcgen.capture_events(in_environment text, in_table text, in_operation text, in_records json[],
     in_changes json[], in_live boolean[]) RETURNS TABLE (event_ids text[], webhook_ids text[]) LANGUAGE plpgsql VOLATILE AS $$
   DECLARE
     hook_ids text[];
     hook_filters jsonb[];
     live_ids text[];
     pair_events text[];
     pair_hooks text[];
   BEGIN
     IF in_records IS NULL THEN RETURN; END IF;
     SELECT array_agg(s.id ORDER BY s.id), array_agg(s.filter ORDER BY s.id) INTO hook_ids, hook_filters
       FROM svcgen.webhooks s
       WHERE s.environment = in_environment AND s.table_name = in_table AND s.active AND in_operation = ANY (s.events);
     IF hook_ids IS NULL AND NOT (true = ANY (in_live)) THEN RETURN; END IF;
     WITH event AS (
         -- a UUIDv7 laid out as runtime/events/outbox.ts newIdSql does
         SELECT 'evt_' || encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
             placing substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex') AS id,
           e.record, e.n, coalesce(in_live[e.n], false) AS live
         FROM unnest(in_records) WITH ORDINALITY AS e(record, n)),
       pair AS (
         SELECT event.id AS event_id, h.id AS webhook_id, event.n
         FROM event, unnest(hook_ids, hook_filters) AS h(id, filter)
         WHERE h.filter IS NULL OR event.record::jsonb @> h.filter),
       written AS (
         INSERT INTO svcgen.webhook_events (id, environment, table_name, operation, record, changed_fields)
         SELECT event.id, in_environment, in_table, in_operation, event.record,
           CASE WHEN in_changes IS NULL THEN '{}'::text[]
             ELSE ARRAY(SELECT json_array_elements_text(in_changes[event.n])) END
         FROM event WHERE event.live OR event.id IN (SELECT event_id FROM pair))
     SELECT (SELECT array_agg(id ORDER BY n) FROM event WHERE live),
       (SELECT array_agg(event_id ORDER BY n, webhook_id) FROM pair),
       (SELECT array_agg(webhook_id ORDER BY n, webhook_id) FROM pair)
       INTO live_ids, pair_events, pair_hooks;
     IF live_ids IS NOT NULL THEN PERFORM svcgen.live_notify(in_environment, in_table, live_ids); END IF;
     IF pair_events IS NOT NULL THEN
       event_ids := pair_events;
       webhook_ids := pair_hooks;
       RETURN NEXT;
     END IF;
   END $$;`,
];

// Same key as Prisma's migrate lock, so svcgen and `prisma migrate deploy` never run at once.
export const MIGRATION_LOCK_KEY = 72707369;

export async function ensureSystemSchema(db: Database): Promise<void> {
  await withConnection(db.pool, async (client) => {
    try {
      // Schema changes and waiting for another process's migration lock may outlast a request's statement_timeout.
      await client.query('SET statement_timeout = 0');
      await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS svcgen;
      CREATE TABLE IF NOT EXISTS svcgen.schema_version (version integer NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
      const { rows } = await client.query<{ v: number | null }>('SELECT max(version) AS v FROM svcgen.schema_version');
      for (let version = (rows[0]?.v ?? 0) + 1; version <= STEPS.length; version++) {
        await client.query('BEGIN');
        try {
          await client.query(STEPS[version - 1]!);
          await client.query('INSERT INTO svcgen.schema_version (version) VALUES ($1)', [version]);
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK');
          throw error;
        }
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => {});
      await client.query('RESET statement_timeout').catch(() => {});
    }
  });
}
