/**
 * The schema of the SQL stores, as @effect/sql migrations that run on both SQLite and PostgreSQL.
 * They run when a storage layer is built; applied ids are kept in `mg_migrations`.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** The table that records which migrations have been applied. */
export const table = "mg_migrations"

const createApiKeys = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE mg_api_keys (
    key_hash TEXT PRIMARY KEY NOT NULL,
    key_id TEXT NOT NULL,
    workspace TEXT NOT NULL,
    management INTEGER NOT NULL,
    interns INTEGER NOT NULL,
    label TEXT,
    created_at BIGINT NOT NULL
  )`
  yield* sql`CREATE INDEX mg_api_keys_key_id ON mg_api_keys (key_id)`
})

const createUsage = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // The only dialect difference: an auto-incrementing id that orders records written in the same millisecond.
  const id = sql.onDialectOrElse({
    pg: () => sql.literal("id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
    orElse: () => sql.literal("id INTEGER PRIMARY KEY")
  })
  yield* sql`CREATE TABLE mg_usage (
    ${id},
    request_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    key_id TEXT NOT NULL,
    workspace TEXT NOT NULL,
    model TEXT NOT NULL,
    provider TEXT,
    endpoint_id TEXT,
    stream INTEGER NOT NULL,
    status INTEGER NOT NULL,
    error_type TEXT,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cache_read_tokens BIGINT NOT NULL,
    cache_write_tokens BIGINT NOT NULL,
    cost TEXT NOT NULL,
    latency_ms DOUBLE PRECISION NOT NULL,
    ttfb_ms DOUBLE PRECISION,
    attempts INTEGER NOT NULL,
    session_id TEXT,
    user_id TEXT,
    app_referer TEXT,
    app_title TEXT,
    app_categories TEXT
  )`
  yield* sql`CREATE INDEX mg_usage_workspace_created_at ON mg_usage (workspace, created_at)`
  yield* sql`CREATE INDEX mg_usage_request_id ON mg_usage (request_id)`
})

// One row per non-zero cell of a time bucket of an endpoint's health windows (see core `HealthWindows`):
// `metric` 0 = outcome counts (`idx` in the order of `HealthWindows.outcomes`), 1 = TTFB bins,
// 2 = throughput bins. Every process adds its deltas with `n = n + excluded.n`.
const createEndpointHealth = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE mg_endpoint_buckets (
    endpoint_id TEXT NOT NULL,
    bucket_ms INTEGER NOT NULL,
    bucket_start BIGINT NOT NULL,
    metric INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (endpoint_id, bucket_ms, bucket_start, metric, idx)
  )`
  yield* sql`CREATE INDEX mg_endpoint_buckets_start ON mg_endpoint_buckets (bucket_ms, bucket_start)`
  // The latest cooldown any process decided for an endpoint (circuit breaker or Retry-After).
  yield* sql`CREATE TABLE mg_endpoint_cooldowns (
    endpoint_id TEXT PRIMARY KEY NOT NULL,
    cooling_until BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
})

const createSessionAffinity = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE mg_session_affinity (
    session_key TEXT PRIMARY KEY NOT NULL,
    endpoint_id TEXT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
  yield* sql`CREATE INDEX mg_session_affinity_updated_at ON mg_session_affinity (updated_at)`
})

/**
 * Keys learn where they came from (`config` keys are synced at every start; `cli` keys stay until revoked); usage
 * records learn their route, and may have no key, workspace or model (a request refused before those were known).
 * Existing keys were all provisioned from configuration. SQLite cannot drop a NOT NULL, so its usage table is rebuilt.
 */
const keySourcesAndUsageRoutes = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE mg_api_keys ADD COLUMN source TEXT NOT NULL DEFAULT 'config'`
  yield* sql.onDialectOrElse({
    pg: () =>
      Effect.all([
        sql`ALTER TABLE mg_usage ADD COLUMN route TEXT NOT NULL DEFAULT 'POST /v1/messages'`,
        sql`ALTER TABLE mg_usage ALTER COLUMN key_id DROP NOT NULL`,
        sql`ALTER TABLE mg_usage ALTER COLUMN workspace DROP NOT NULL`,
        sql`ALTER TABLE mg_usage ALTER COLUMN model DROP NOT NULL`
      ], { discard: true }),
    orElse: () =>
      Effect.all([
        sql`CREATE TABLE mg_usage_new (
          id INTEGER PRIMARY KEY,
          request_id TEXT NOT NULL,
          created_at BIGINT NOT NULL,
          route TEXT NOT NULL,
          key_id TEXT,
          workspace TEXT,
          model TEXT,
          provider TEXT,
          endpoint_id TEXT,
          stream INTEGER NOT NULL,
          status INTEGER NOT NULL,
          error_type TEXT,
          input_tokens BIGINT NOT NULL,
          output_tokens BIGINT NOT NULL,
          cache_read_tokens BIGINT NOT NULL,
          cache_write_tokens BIGINT NOT NULL,
          cost TEXT NOT NULL,
          latency_ms DOUBLE PRECISION NOT NULL,
          ttfb_ms DOUBLE PRECISION,
          attempts INTEGER NOT NULL,
          session_id TEXT,
          user_id TEXT,
          app_referer TEXT,
          app_title TEXT,
          app_categories TEXT
        )`,
        sql`INSERT INTO mg_usage_new SELECT id, request_id, created_at, 'POST /v1/messages', key_id, workspace, model,
          provider, endpoint_id, stream, status, error_type, input_tokens, output_tokens, cache_read_tokens,
          cache_write_tokens, cost, latency_ms, ttfb_ms, attempts, session_id, user_id, app_referer, app_title,
          app_categories FROM mg_usage`,
        sql`DROP TABLE mg_usage`,
        sql`ALTER TABLE mg_usage_new RENAME TO mg_usage`,
        sql`CREATE INDEX mg_usage_workspace_created_at ON mg_usage (workspace, created_at)`,
        sql`CREATE INDEX mg_usage_request_id ON mg_usage (request_id)`
      ], { discard: true })
  })
})

/**
 * Interns (`mg_interns`; the idempotency key of their creation unique per workspace, NULLs apart), the turns of their
 * chat sessions (`mg_intern_turns`, in insertion order) and the audit log of daemon-access reveals
 * (`mg_intern_reveals`, kept when the intern goes).
 */
const createInterns = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE mg_interns (
    id TEXT PRIMARY KEY NOT NULL,
    workspace TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    instructions TEXT,
    model TEXT,
    status TEXT NOT NULL,
    progress_label TEXT,
    progress_step INTEGER,
    progress_total INTEGER,
    hostname TEXT,
    vault_id TEXT,
    attached_vault_id TEXT,
    last_failure_message TEXT,
    idempotency_key TEXT,
    fingerprint TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
  yield* sql`CREATE UNIQUE INDEX mg_interns_idempotency ON mg_interns (workspace, idempotency_key)`
  yield* sql`CREATE INDEX mg_interns_workspace_id ON mg_interns (workspace, id)`
  const id = sql.onDialectOrElse({
    pg: () => sql.literal("id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
    orElse: () => sql.literal("id INTEGER PRIMARY KEY")
  })
  yield* sql`CREATE TABLE mg_intern_turns (
    ${id},
    intern_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at BIGINT NOT NULL
  )`
  yield* sql`CREATE INDEX mg_intern_turns_session ON mg_intern_turns (intern_id, session_id, id)`
  yield* sql`CREATE TABLE mg_intern_reveals (
    id TEXT PRIMARY KEY NOT NULL,
    intern_id TEXT NOT NULL,
    workspace TEXT NOT NULL,
    key_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    at BIGINT NOT NULL,
    outcome TEXT NOT NULL
  )`
  yield* sql`CREATE INDEX mg_intern_reveals_intern_at ON mg_intern_reveals (intern_id, at)`
})

/** Custom metadata (a request's `trace` keys besides the tracing ids) on usage records, as JSON text. */
const usageMetadata = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE mg_usage ADD COLUMN metadata TEXT`
})

/**
 * Batches (`mg_batches`: the record, its counts and usage, and the lease of the worker that moves it through its
 * lifecycle) and their requests (`mg_batch_items`: one row per request in submission order, its state, the lease of the
 * worker running it, and its result as JSON). The cost is an exact decimal kept as text.
 */
const createBatches = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE mg_batches (
    id TEXT PRIMARY KEY NOT NULL,
    workspace TEXT NOT NULL,
    key_id TEXT,
    endpoint TEXT NOT NULL,
    model TEXT NOT NULL,
    completion_window TEXT NOT NULL,
    status TEXT NOT NULL,
    provider TEXT,
    app_referer TEXT,
    app_title TEXT,
    app_categories TEXT,
    total INTEGER NOT NULL,
    completed INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    prompt_tokens BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    cost TEXT NOT NULL,
    error_message TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    finalized_at BIGINT,
    updated_at BIGINT NOT NULL,
    lease_owner TEXT,
    lease_until BIGINT NOT NULL
  )`
  yield* sql`CREATE INDEX mg_batches_workspace_id ON mg_batches (workspace, id)`
  yield* sql`CREATE INDEX mg_batches_status ON mg_batches (status, id)`
  yield* sql`CREATE TABLE mg_batch_items (
    batch_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    custom_id TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL,
    lease_owner TEXT,
    lease_token TEXT,
    lease_until BIGINT NOT NULL,
    result TEXT,
    PRIMARY KEY (batch_id, idx)
  )`
  yield* sql`CREATE INDEX mg_batch_items_state ON mg_batch_items (batch_id, state, idx)`
  yield* sql`CREATE INDEX mg_batch_items_owner ON mg_batch_items (lease_owner, state)`
})

/**
 * The limits: each key's own (JSON, null when unlimited), and the shared counters of each limited scope (a key or a
 * workspace: its sliding windows and budget spending, as JSON; see `SqlQuotaStore`).
 */
const limits = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE mg_api_keys ADD COLUMN limits TEXT`
  yield* sql`CREATE TABLE mg_quota_counters (
    scope TEXT PRIMARY KEY NOT NULL,
    state TEXT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
})

/** Every migration, by `<id>_<name>`. Append new ones; never edit an applied one. */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "1_create_api_keys": createApiKeys,
  "2_create_usage": createUsage,
  "3_create_endpoint_health": createEndpointHealth,
  "4_create_session_affinity": createSessionAffinity,
  "5_key_sources_and_usage_routes": keySourcesAndUsageRoutes,
  "6_create_interns": createInterns,
  "7_usage_metadata": usageMetadata,
  "8_create_batches": createBatches,
  "9_limits": limits
}

const migrator = Migrator.make({})

const migrate = migrator({ loader: Migrator.fromRecord(migrations), table })

/**
 * On PostgreSQL, replicas that start together on a fresh schema would race to create the migrations table (the
 * migrator checks for it, then creates it: one of them fails on a duplicate type). So the whole run holds a
 * transaction-scoped advisory lock, per schema, and creates the table (as the migrator would) under it; the others
 * wait, then find every migration applied. The migrator's own transaction nests inside as a savepoint.
 */
const runPg = (sql: SqlClient.SqlClient) =>
  sql.withTransaction(
    sql`SELECT pg_advisory_xact_lock(hashtext('model-gateway/migrations/' || current_schema()))`.pipe(
      Effect.zipRight(sql`CREATE TABLE IF NOT EXISTS ${sql(table)} (
        migration_id integer primary key,
        created_at timestamp with time zone not null default now(),
        name text not null
      )`),
      Effect.zipRight(migrate)
    )
  )

/** Applies the migrations that have not run yet; returns the ones it applied. */
export const run: Effect.Effect<
  ReadonlyArray<readonly [id: number, name: string]>,
  Migrator.MigrationError | SqlError,
  SqlClient.SqlClient
> = Effect.flatMap(SqlClient.SqlClient, (sql) => sql.onDialectOrElse({ pg: () => runPg(sql), orElse: () => migrate }))

/** Runs the migrations when built. */
export const layer: Layer.Layer<never, Migrator.MigrationError | SqlError, SqlClient.SqlClient> = Layer.effectDiscard(
  run
)
