import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Keys, UsageLog } from "@model-gateway/core"
import { Duration, Effect, Exit, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { dropSchema, pgUp, pgUrl, skipPostgres } from "../../core/test/contract/Postgres.js"
import { digestOf, storageContract, usageRecord } from "../../core/test/contract/StorageContract.js"
import { Migrations, SqlStorage, SqlUsageLog } from "../src/index.js"

const skipPg = skipPostgres("the PostgreSQL storage tests")

const tempDir = mkdtempSync(join(tmpdir(), "mg-storage-sql-"))
const pgSchema = `mg_test_${randomUUID().replaceAll("-", "")}`

afterAll(async () => {
  rmSync(tempDir, { recursive: true, force: true })
  if (!skipPg && pgUp) await dropSchema(pgSchema)
})

const secretStoredNowhere = (rows: ReadonlyArray<unknown>, secret: string) => {
  const dump = JSON.stringify(rows)
  assert.notInclude(dump, secret)
  assert.notInclude(dump, secret.slice(3))
}

const checkHashStored = Effect.gen(function*() {
  const keys = yield* Keys.Keys
  const sql = yield* SqlClient.SqlClient
  const secret = `sk-mg-${randomUUID()}`
  const principal = yield* keys.provision({
    digest: digestOf(secret),
    source: "cli",
    workspace: `ws-${randomUUID()}`,
    management: true,
    interns: true
  })
  yield* keys.authenticate(digestOf(secret))
  const rows = yield* sql<{ key_hash: string; key_id: string }>`SELECT * FROM mg_api_keys`
  const row = rows.find((r) => r.key_id === principal.keyId)
  assert.isDefined(row)
  assert.match(row!.key_hash, /^[0-9a-f]{64}$/)
  assert.strictEqual(row!.key_hash.slice(0, 12), principal.keyId)
  secretStoredNowhere(rows, secret)
  const usage = yield* sql`SELECT * FROM mg_usage`
  secretStoredNowhere(usage, secret)
})

// --- SQLite -----------------------------------------------------------------------------------

storageContract("SQLite :memory:", SqlStorage.layerSqlite({ filename: ":memory:" }))
storageContract("SQLite file", SqlStorage.layerSqlite({ filename: join(tempDir, "contract", "nested", "gateway.db") }))
storageContract("SQLite via layerFromUrl", SqlStorage.layerFromUrl("sqlite::memory:"))

describe("SqlStorage on SQLite", () => {
  it.effect("stores the SHA-256 hash of a key, never the secret", () =>
    checkHashStored.pipe(
      Effect.provide(SqlStorage.layer().pipe(Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" }))))
    ))

  it.effect("migrating a database of the first schema keeps its keys (as configuration keys) and usage", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const first = Object.fromEntries(Object.entries(Migrations.migrations).slice(0, 4))
      yield* Migrator.make({})({ loader: Migrator.fromRecord(first), table: Migrations.table })
      yield* sql`INSERT INTO mg_api_keys ${
        sql.insert({
          key_hash: digestOf("sk-old"),
          key_id: digestOf("sk-old").slice(0, 12),
          workspace: "old",
          management: 1,
          interns: 0,
          label: null,
          created_at: 5
        })
      }`
      // The first schema had no route (added by migration 5) and no custom metadata (migration 7).
      const old = usageRecord({ workspace: "old", metadata: null })
      const { route: _route, ...columns } = old
      yield* sql`INSERT INTO mg_usage ${
        sql.insert({
          request_id: columns.requestId,
          created_at: columns.createdAt,
          key_id: columns.keyId,
          workspace: columns.workspace,
          model: columns.model,
          provider: columns.provider,
          endpoint_id: columns.endpointId,
          stream: 1,
          status: columns.status,
          error_type: columns.errorType,
          input_tokens: columns.inputTokens,
          output_tokens: columns.outputTokens,
          cache_read_tokens: columns.cacheReadTokens,
          cache_write_tokens: columns.cacheWriteTokens,
          cost: columns.cost,
          latency_ms: columns.latencyMs,
          ttfb_ms: columns.ttfbMs,
          attempts: columns.attempts,
          session_id: columns.sessionId,
          user_id: columns.user,
          app_referer: columns.appReferer,
          app_title: columns.appTitle,
          app_categories: columns.appCategories
        })
      }`
      yield* Effect.gen(function*() {
        const keys = yield* Keys.Keys
        const usage = yield* UsageLog.UsageLog
        assert.deepStrictEqual(yield* usage.list({ workspace: "old" }), [old])
        assert.deepStrictEqual((yield* keys.list).map((k) => [k.workspace, k.source, k.createdAt]), [[
          "old",
          "config",
          5
        ]])
        const refused = usageRecord({ keyId: null, workspace: null, model: null, route: "GET /v1/models" })
        yield* usage.record(refused)
        yield* usage.flush
        assert.deepStrictEqual(yield* usage.list({ limit: 10 }), [refused, old])
      }).pipe(Effect.provide(SqlStorage.layer()))
    }).pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:" }))))

  it.live("creates the directory of the database file", () =>
    Effect.gen(function*() {
      const filename = join(tempDir, "created", "deeper", "gateway.db")
      yield* Effect.scoped(Layer.build(SqlStorage.layerSqlite({ filename })))
      assert.isTrue(existsSync(filename))
    }))

  it.live("keeps keys and usage across restarts, and closing the layer writes pending usage", () =>
    Effect.gen(function*() {
      const filename = join(tempDir, "restart", "gateway.db")
      // Nothing would be written before closing: a huge batch size and interval.
      const storage = SqlStorage.layerSqlite({ filename, batchSize: 100_000, flushInterval: Duration.hours(1) })
      const secret = `sk-mg-${randomUUID()}`
      const records = Array.from({ length: 1234 }, (_, i) => usageRecord({ workspace: "restart", createdAt: 1000 + i }))

      const principal = yield* Effect.gen(function*() {
        const keys = yield* Keys.Keys
        const usage = yield* UsageLog.UsageLog
        const principal = yield* keys.provision({
          digest: digestOf(secret),
          source: "cli",
          workspace: "restart",
          management: false,
          interns: true
        })
        yield* Effect.forEach(records, usage.record, { discard: true })
        assert.deepStrictEqual(yield* usage.list({ workspace: "restart" }), [])
        return principal
      }).pipe(Effect.provide(storage))

      yield* Effect.gen(function*() {
        const keys = yield* Keys.Keys
        const usage = yield* UsageLog.UsageLog
        assert.deepStrictEqual(yield* keys.authenticate(digestOf(secret)), Option.some(principal))
        assert.deepStrictEqual(yield* usage.list({ workspace: "restart", limit: 2000 }), [...records].reverse())
      }).pipe(Effect.provide(storage))
    }))

  it.live(
    "makes the SQLite file's missing directories; one that cannot be made fails the storage at once",
    () =>
      Effect.gen(function*() {
        const deep = join(tempDir, "made", "a", "b", "gateway.db")
        yield* Effect.scoped(Layer.build(SqlStorage.layerSqlite({ filename: deep })))
        assert.isTrue(existsSync(deep))
        // under /proc, node's own recursive mkdir never returned: the gateway hung at start, at full CPU
        const exit = yield* Effect.exit(
          Effect.scoped(Layer.build(SqlStorage.layerSqlite({ filename: "/proc/mg-nope/sub/gateway.db" })))
        )
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) {
          assert.include(String(exit.cause), "Cannot create the directory of the SQLite database")
        }
      }),
    { timeout: 5_000 }
  )

  it.live("on a SQLite file, a thread of its own writes the usage log, on a connection of its own", () =>
    Effect.gen(function*() {
      const filename = join(tempDir, "thread", "gateway.db")
      // The file, migrated by a first layer.
      yield* Effect.provide(Effect.void, SqlStorage.layerSqlite({ filename }))
      // The log's own client on another database: what the thread writes lands in the file, never there.
      const usageLog = SqlUsageLog.layer({ flushInterval: Duration.hours(1) }, { sqliteFile: filename }).pipe(
        Layer.provide(Migrations.layer),
        Layer.provide(SqliteClient.layer({ filename: ":memory:" }))
      )
      const records = Array.from({ length: 700 }, (_, i) => usageRecord({ workspace: "thread", createdAt: 1000 + i }))
      yield* Effect.gen(function*() {
        const usage = yield* UsageLog.UsageLog
        yield* Effect.forEach(records, usage.record, { discard: true })
        yield* usage.flush
        assert.deepStrictEqual(yield* usage.list({ workspace: "thread" }), [])
      }).pipe(Effect.provide(usageLog))
      const stored = yield* Effect.gen(function*() {
        const usage = yield* UsageLog.UsageLog
        return yield* usage.list({ workspace: "thread", limit: 1000 })
      }).pipe(Effect.provide(SqlStorage.layerSqlite({ filename })))
      assert.deepStrictEqual(stored, [...records].reverse())
    }))

  it.live("when the usage log's thread cannot run, the batches go to the layer's client", () =>
    Effect.gen(function*() {
      const usageLog = SqlUsageLog.layer({ flushInterval: Duration.hours(1) }, {
        sqliteFile: join(tempDir, "no-such-directory", "gateway.db")
      }).pipe(Layer.provide(Migrations.layer), Layer.provide(SqliteClient.layer({ filename: ":memory:" })))
      yield* Effect.gen(function*() {
        const usage = yield* UsageLog.UsageLog
        const first = usageRecord({ workspace: "fallback", createdAt: 1 })
        const second = usageRecord({ workspace: "fallback", createdAt: 2 })
        yield* usage.record(first)
        yield* usage.flush
        yield* usage.record(second)
        yield* usage.flush
        assert.deepStrictEqual(yield* usage.list({ workspace: "fallback" }), [second, first])
      }).pipe(Effect.provide(usageLog))
    }))

  it.live("writes records in the background without an explicit flush", () =>
    Effect.gen(function*() {
      const usage = yield* UsageLog.UsageLog
      const record = usageRecord({ workspace: "background" })
      yield* usage.record(record)
      yield* Effect.sleep(Duration.millis(800))
      assert.deepStrictEqual(yield* usage.list({ workspace: "background" }), [record])
    }).pipe(Effect.provide(SqlStorage.layerSqlite({ filename: ":memory:", flushInterval: Duration.millis(50) }))))

  it.live("drops the oldest records when the buffer is full, and flush still completes", () =>
    Effect.gen(function*() {
      const usage = yield* UsageLog.UsageLog
      const records = Array.from({ length: 25 }, (_, i) => usageRecord({ workspace: "full", createdAt: 1000 + i }))
      yield* Effect.forEach(records, usage.record, { discard: true })
      yield* usage.flush
      assert.deepStrictEqual(yield* usage.list({ workspace: "full" }), records.slice(15).reverse())
    }).pipe(
      Effect.provide(
        SqlStorage.layerSqlite({
          filename: ":memory:",
          capacity: 10,
          batchSize: 1000,
          flushInterval: Duration.hours(1)
        })
      )
    ))

  it.live("authenticate sees a revoke made through another layer after the cache TTL", () =>
    Effect.gen(function*() {
      const filename = join(tempDir, "cache", "gateway.db")
      const secret = `sk-mg-${randomUUID()}`
      const cached = SqlStorage.layerSqlite({ filename, cacheTtl: Duration.millis(200) })
      const other = SqlStorage.layerSqlite({ filename })
      yield* Effect.gen(function*() {
        const keys = yield* Keys.Keys
        const principal = yield* keys.provision({
          digest: digestOf(secret),
          source: "cli",
          workspace: "cache",
          management: false,
          interns: false
        })
        assert.isTrue(Option.isSome(yield* keys.authenticate(digestOf(secret))))
        assert.isTrue(yield* Effect.provide(Effect.flatMap(Keys.Keys, (k) => k.revoke(principal.keyId)), other))
        yield* Effect.sleep(Duration.millis(300))
        assert.isTrue(Option.isNone(yield* keys.authenticate(digestOf(secret))))
      }).pipe(Effect.provide(cached))
    }))
})

// --- layerFromUrl ---------------------------------------------------------------------------------

describe("SqlStorage.parseUrl and layerFromUrl", () => {
  it("reads SQLite and PostgreSQL URLs", () => {
    assert.deepStrictEqual(SqlStorage.parseUrl("sqlite::memory:"), { _tag: "Sqlite", filename: ":memory:" })
    assert.deepStrictEqual(SqlStorage.parseUrl("sqlite:data/gateway.db"), {
      _tag: "Sqlite",
      filename: "data/gateway.db"
    })
    assert.deepStrictEqual(SqlStorage.parseUrl("sqlite:///var/lib/mg.db"), {
      _tag: "Sqlite",
      filename: "/var/lib/mg.db"
    })
    assert.deepStrictEqual(SqlStorage.parseUrl("postgres://u:p@db:5432/mg"), {
      _tag: "Pg",
      url: "postgres://u:p@db:5432/mg",
      schema: undefined
    })
    assert.deepStrictEqual(SqlStorage.parseUrl("postgresql://u@db/mg?schema=gw&sslmode=disable"), {
      _tag: "Pg",
      url: "postgresql://u@db/mg?sslmode=disable",
      schema: "gw"
    })
  })

  it("rejects bad URLs without repeating them", () => {
    for (const url of ["mysql://root:hunter2@db/mg", "hunter2", "sqlite:", "postgres://root:hunter2@/mg", ""]) {
      const parsed = SqlStorage.parseUrl(url)
      assert.strictEqual(parsed._tag, "Invalid", url)
      if (parsed._tag === "Invalid") assert.notInclude(parsed.message, "hunter2")
    }
  })

  it.effect("a bad URL fails the layer with SqlStorageError", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Effect.scoped(Layer.build(SqlStorage.layerFromUrl("mysql://root:hunter2@db/mg")))
      )
      assert.strictEqual(error._tag, "SqlStorageError")
      assert.include(error.message, "Unsupported storage URL scheme \"mysql:\"")
      assert.notInclude(error.message, "hunter2")
    }))

  it.effect("an invalid schema name fails the layer", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Effect.scoped(Layer.build(SqlStorage.layerPg({ url: pgUrl, schema: "bad; DROP TABLE x" })))
      )
      assert.strictEqual(error._tag, "SqlStorageError")
    }))
})

// --- PostgreSQL -----------------------------------------------------------------------------------

describe.skipIf(skipPg)("PostgreSQL", () => {
  storageContract("PostgreSQL", SqlStorage.layerPg({ url: pgUrl, schema: pgSchema }))
  storageContract("PostgreSQL via layerFromUrl", SqlStorage.layerFromUrl(`${pgUrl}?schema=${pgSchema}`))

  it.effect("stores the SHA-256 hash of a key, never the secret", () =>
    checkHashStored.pipe(
      Effect.provide(
        SqlStorage.layer().pipe(
          Layer.provideMerge(
            PgClient.layer({ url: Redacted.make(`${pgUrl}?options=-c%20search_path%3D${pgSchema}`) })
          )
        )
      )
    ))

  it.live("keeps the tables in the requested schema", () =>
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const tables = yield* sql<{ table_name: string }>`SELECT table_name FROM information_schema.tables
        WHERE table_schema = ${pgSchema} ORDER BY table_name`
      assert.deepStrictEqual(tables.map((t) => t.table_name), [
        "mg_api_keys",
        "mg_batch_items",
        "mg_batches",
        "mg_endpoint_buckets",
        "mg_endpoint_cooldowns",
        "mg_intern_reveals",
        "mg_intern_turns",
        "mg_interns",
        "mg_migrations",
        "mg_quota_counters",
        "mg_session_affinity",
        "mg_usage"
      ])
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(pgUrl) }))))

  it.live("closing the layer writes pending usage; keys and usage survive a restart", () =>
    Effect.gen(function*() {
      const storage = SqlStorage.layerPg({
        url: pgUrl,
        schema: pgSchema,
        batchSize: 100_000,
        flushInterval: Duration.hours(1)
      })
      const workspace = `ws-${randomUUID()}`
      const secret = `sk-mg-${randomUUID()}`
      const records = Array.from({ length: 1234 }, (_, i) => usageRecord({ workspace, createdAt: 1000 + i }))
      const principal = yield* Effect.gen(function*() {
        const keys = yield* Keys.Keys
        const usage = yield* UsageLog.UsageLog
        yield* Effect.forEach(records, usage.record, { discard: true })
        return yield* keys.provision({
          digest: digestOf(secret),
          source: "cli",
          workspace,
          management: true,
          interns: false
        })
      }).pipe(Effect.provide(storage))
      yield* Effect.gen(function*() {
        const keys = yield* Keys.Keys
        const usage = yield* UsageLog.UsageLog
        assert.deepStrictEqual(yield* keys.authenticate(digestOf(secret)), Option.some(principal))
        assert.deepStrictEqual(yield* usage.list({ workspace, limit: 2000 }), [...records].reverse())
      }).pipe(Effect.provide(storage))
    }))

  it.live("replicas starting together on a fresh schema all come up, and migrate it once", () =>
    Effect.gen(function*() {
      const schema = `mg_race_${randomUUID().replaceAll("-", "")}`
      const start = Effect.scoped(Layer.build(SqlStorage.layerPg({ url: pgUrl, schema })))
      try {
        const exits = yield* Effect.all(Array.from({ length: 6 }, () => Effect.exit(start)), {
          concurrency: "unbounded"
        })
        for (const exit of exits) assert.isTrue(Exit.isSuccess(exit), String(exit))
        const applied = yield* Effect.flatMap(
          PgClient.PgClient,
          (sql) => sql<{ migration_id: number }>`SELECT migration_id FROM ${sql(schema)}.mg_migrations ORDER BY 1`
        ).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(pgUrl) })))
        assert.deepStrictEqual(
          applied.map((row) => Number(row.migration_id)),
          Object.keys(Migrations.migrations).map((id) => parseInt(id))
        )
      } finally {
        yield* Effect.flatMap(PgClient.PgClient, (sql) => sql`DROP SCHEMA IF EXISTS ${sql(schema)} CASCADE`).pipe(
          Effect.provide(PgClient.layer({ url: Redacted.make(pgUrl) })),
          Effect.orDie
        )
      }
    }))

  it.live("an unreachable server fails the layer", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(
        Effect.scoped(Layer.build(SqlStorage.layerPg({ url: "postgres://postgres@127.0.0.1:1/test" })))
      )
      assert.isTrue(Exit.isFailure(exit))
    }))
})
