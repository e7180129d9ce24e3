import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { EndpointStats, SessionAffinity } from "@model-gateway/core"
import { Context, Duration, Effect, Layer, Option, TestClock } from "effect"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  attemptRecord,
  endpointStatsContract,
  sessionAffinityContract,
  T
} from "../../core/test/contract/HealthContract.js"
import { dropSchema, pgUp, pgUrl, skipPostgres } from "../../core/test/contract/Postgres.js"
import { SqlEndpointStats, SqlStorage } from "../src/index.js"

const skipPg = skipPostgres("the PostgreSQL health tests")

const tempDir = mkdtempSync(join(tmpdir(), "mg-storage-sql-health-"))
const pgSchema = `mg_test_${randomUUID().replaceAll("-", "")}`

afterAll(async () => {
  rmSync(tempDir, { recursive: true, force: true })
  if (!skipPg && pgUp) await dropSchema(pgSchema)
})

// Short intervals, so that two "processes" see each other within a fraction of a second.
const fast = {
  healthSyncInterval: Duration.millis(50),
  affinityFlushInterval: Duration.millis(20)
} satisfies SqlStorage.StoreOptions

// Long intervals for the tests that move a TestClock while the layer runs: it runs every wake-up on the way.
const slow = {
  flushInterval: Duration.hours(1),
  healthSyncInterval: Duration.hours(1),
  healthPruneInterval: Duration.hours(1),
  healthFullRefreshInterval: Duration.hours(1),
  affinityFlushInterval: Duration.hours(1),
  affinityPruneInterval: Duration.hours(1)
} satisfies SqlStorage.StoreOptions

const shared = (filename: string, options: SqlStorage.StoreOptions = fast) =>
  SqlStorage.layerSqlite({ ...options, filename })

const pgProcess = (options: SqlStorage.StoreOptions = fast) =>
  SqlStorage.layerPg({ ...options, url: pgUrl, schema: pgSchema })

const healthOf = (endpointId: string) =>
  Effect.flatMap(EndpointStats.EndpointStats, (stats) => Effect.map(stats.snapshot, (s) => s.get(endpointId)))

/** Retries `check` (assertions included) every 25 ms on the live clock, for up to 10 s. */
const until = <A, E, R>(check: Effect.Effect<A, E, R>): Effect.Effect<A, unknown, R> => {
  const deadline = Date.now() + 10_000
  const loop: Effect.Effect<A, unknown, R> = Effect.suspend(() => check).pipe(
    Effect.catchAllDefect((defect) => Effect.fail(defect)),
    Effect.catchAll((error) =>
      Date.now() > deadline ? Effect.fail(error) : Effect.zipRight(Effect.sleep(Duration.millis(25)), loop)
    )
  )
  return loop
}

// --- SQLite -----------------------------------------------------------------------------------

const sqliteShared = join(tempDir, "shared", "gateway.db")

endpointStatsContract("SQLite :memory:", SqlStorage.layerSqlite({ ...slow, filename: ":memory:" }), {
  footprint: SqlEndpointStats.footprint,
  processes: { a: shared(sqliteShared), b: shared(sqliteShared) }
})
sessionAffinityContract("SQLite :memory:", SqlStorage.layerSqlite({ ...slow, filename: ":memory:" }), {
  processes: { a: shared(sqliteShared), b: shared(sqliteShared) }
})

describe("SqlEndpointStats on SQLite", () => {
  it.live("closing a process writes its deltas; a new process starts with the shared health", () =>
    Effect.gen(function*() {
      const filename = join(tempDir, "restart", "gateway.db")
      // Nothing would be written before closing: a sync interval of an hour.
      const slow = shared(filename, { healthSyncInterval: Duration.hours(1) })
      const endpointId = `restart-${randomUUID()}`
      const now = Date.now()
      yield* Effect.gen(function*() {
        const stats = yield* EndpointStats.EndpointStats
        for (let i = 0; i < 10; i++) yield* stats.record(attemptRecord({ endpointId, at: now, ttfbMs: 300 }))
        yield* stats.record(attemptRecord({ endpointId, at: now, outcome: "error", ttfbMs: null }))
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql`SELECT * FROM mg_endpoint_buckets WHERE endpoint_id = ${endpointId}`
        assert.strictEqual(rows.length, 0)
      }).pipe(Effect.provide(Layer.merge(slow, SqliteClient.layer({ filename }))))

      const health = yield* healthOf(endpointId).pipe(Effect.provide(slow))
      assert.approximately(health!.uptime5m!, 1000 / 11, 1e-9)
      assert.approximately(health!.latency30m!.p50, 300, 300 * 0.13)
    }))

  it.live("deltas are added, never overwritten: counts from many syncs and two processes sum up", () =>
    Effect.gen(function*() {
      const filename = join(tempDir, "sum", "gateway.db")
      const endpointId = `sum-${randomUUID()}`
      const build = (layer: Layer.Layer<EndpointStats.EndpointStats, unknown>) =>
        Effect.map(Layer.build(layer), (ctx) => Context.get(ctx, EndpointStats.EndpointStats))
      const a = yield* build(shared(filename))
      const b = yield* build(shared(filename))
      const now = Date.now()
      for (let round = 0; round < 5; round++) {
        for (let i = 0; i < 20; i++) {
          yield* a.record(attemptRecord({ endpointId, at: now + round }))
          yield* b.record(attemptRecord({ endpointId, at: now + round, outcome: i < 5 ? "timeout" : "ok" }))
        }
        yield* Effect.sleep(Duration.millis(60))
      }
      const sql = yield* Effect.map(
        Layer.build(SqliteClient.layer({ filename })),
        (ctx) => Context.get(ctx, SqlClient.SqlClient)
      )
      yield* until(Effect.gen(function*() {
        const rows = yield* sql<{ idx: number; n: number }>`SELECT idx, SUM(n) AS n FROM mg_endpoint_buckets
          WHERE endpoint_id = ${endpointId} AND metric = 0 AND bucket_ms = 3600000 GROUP BY idx ORDER BY idx`
        assert.deepStrictEqual(rows.map((r) => [r.idx, Number(r.n)]), [[0, 175], [4, 25]])
      }))
      for (const stats of [a, b]) {
        yield* until(Effect.map(stats.snapshot, (s) => assert.strictEqual(s.get(endpointId)?.uptime1d, 87.5)))
      }
    }).pipe(Effect.scoped))

  it.live("buckets that no window covers any more are deleted", () =>
    Effect.gen(function*() {
      const endpointId = `prune-${randomUUID()}`
      const stats = yield* EndpointStats.EndpointStats
      const sql = yield* SqlClient.SqlClient
      const now = Date.now()
      yield* stats.record(attemptRecord({ endpointId, at: now - 3 * 24 * 3_600_000 }))
      yield* stats.record(attemptRecord({ endpointId, at: now }))
      yield* until(Effect.gen(function*() {
        const rows = yield* sql<{ bucket_start: number }>`SELECT bucket_start FROM mg_endpoint_buckets
          WHERE endpoint_id = ${endpointId}`
        assert.isAbove(rows.length, 0)
        assert.isTrue(rows.every((r) => Number(r.bucket_start) > now - 26 * 3_600_000))
      }))
    }).pipe(
      Effect.provide(
        SqlStorage.layer({ healthSyncInterval: Duration.millis(20), healthPruneInterval: Duration.millis(50) }).pipe(
          Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" }))
        )
      )
    ))

  it.effect("a cooldown decided by one process holds the endpoint in another until it ends", () =>
    Effect.gen(function*() {
      const filename = join(tempDir, "cooldown", "gateway.db")
      const endpointId = `cooldown-${randomUUID()}`
      yield* TestClock.setTime(T)
      const build = (layer: Layer.Layer<EndpointStats.EndpointStats, unknown>) =>
        Effect.map(
          Layer.build(layer),
          (ctx) => Context.get(ctx, EndpointStats.EndpointStats) as SqlEndpointStats.SqlEndpointStatsService
        )
      const a = yield* build(shared(filename, slow))
      const b = yield* build(shared(filename, slow))
      yield* a.record(attemptRecord({ endpointId, at: T, outcome: "overloaded", ttfbMs: null, retryAfterMs: 120_000 }))
      yield* a.sync
      yield* b.sync
      const seen = (yield* b.snapshot).get(endpointId)
      assert.strictEqual(seen?.coolingDownUntil, T + 120_000)
      assert.isFalse(seen?.recentOutage)
      yield* TestClock.setTime(T + 120_000)
      assert.isTrue((yield* b.snapshot).get(endpointId)?.halfOpen)
      // B's own probe succeeds: closed in B.
      yield* b.record(attemptRecord({ endpointId, at: T + 120_000 }))
      yield* b.sync
      const closed = (yield* b.snapshot).get(endpointId)
      assert.isNull(closed?.coolingDownUntil)
      assert.isFalse(closed?.halfOpen)
    }).pipe(Effect.scoped))
})

describe("SqlSessionAffinity on SQLite", () => {
  it.live("expired sessions are deleted from the store", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const affinity = yield* SessionAffinity.SessionAffinity
      const now = Date.now()
      yield* sql`INSERT INTO mg_session_affinity ${
        sql.insert([
          { session_key: "idle", endpoint_id: "e1", updated_at: now - SessionAffinity.IDLE_TTL_MS - 1 },
          { session_key: "fresh", endpoint_id: "e2", updated_at: now }
        ])
      }`
      assert.isTrue(Option.isNone(yield* affinity.get("idle")))
      yield* until(Effect.gen(function*() {
        const rows = yield* sql<{ session_key: string }>`SELECT session_key FROM mg_session_affinity`
        assert.deepStrictEqual(rows.map((r) => r.session_key), ["fresh"])
      }))
      assert.deepStrictEqual(yield* affinity.get("fresh"), Option.some("e2"))
    }).pipe(
      Effect.provide(
        SqlStorage.layer({ affinityPruneInterval: Duration.millis(30), affinityFlushInterval: Duration.millis(10) })
          .pipe(Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })))
      )
    ))

  it.live("closing a process writes the sessions it holds; the later write wins", () =>
    Effect.gen(function*() {
      const filename = join(tempDir, "affinity", "gateway.db")
      const slow = shared(filename, { affinityFlushInterval: Duration.hours(1) })
      const set = (key: string, endpointId: string) =>
        Effect.flatMap(SessionAffinity.SessionAffinity, (s) => s.set(key, endpointId)).pipe(Effect.provide(slow))
      yield* set("k", "first")
      yield* Effect.sleep(Duration.millis(5))
      yield* set("k", "second")
      const found = yield* Effect.flatMap(SessionAffinity.SessionAffinity, (s) => s.get("k")).pipe(
        Effect.provide(slow)
      )
      assert.deepStrictEqual(found, Option.some("second"))
    }))
})

// --- PostgreSQL -----------------------------------------------------------------------------------

describe.skipIf(skipPg)("PostgreSQL", () => {
  endpointStatsContract("PostgreSQL", pgProcess(slow), {
    footprint: SqlEndpointStats.footprint,
    processes: { a: pgProcess(), b: pgProcess() }
  })
  sessionAffinityContract("PostgreSQL", pgProcess(slow), { processes: { a: pgProcess(), b: pgProcess() } })
})
