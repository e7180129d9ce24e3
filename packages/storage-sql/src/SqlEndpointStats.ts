/**
 * `EndpointStats` shared by every gateway process over one database (SQLite or PostgreSQL).
 *
 * The hot path stays in memory: `record` adds the attempt to the endpoint's local view and to a
 * pending delta (both fixed-size `HealthWindows`), and updates the local circuit breaker;
 * `snapshot` reads the view (percentiles and uptime cached for `healthCacheTtl`). A background
 * fiber, every `healthSyncInterval` (1 s), adds the pending deltas to table `mg_endpoint_buckets`
 * (additive upserts, `n = n + excluded.n`, so processes never overwrite each other), then reads back
 * the recent buckets of every endpoint (written by all processes) and rebuilds those buckets of the
 * view as database + what was recorded since. Every `healthFullRefreshInterval` (and at start) it
 * reads all buckets of the last day; every `healthPruneInterval` it deletes the buckets that no
 * window covers any more.
 *
 * Breakers are per process, but their cooldowns are shared: a process whose breaker opens (or that
 * gets a `Retry-After`) writes the end of the cooldown to `mg_endpoint_cooldowns` (the later end
 * wins), and every process holds the endpoint until then (`CircuitBreaker.hold`); after it each
 * process lets its own half-open probe through. Outages are shared through the buckets: a process
 * sees another's failures in `recentOutage` and uptime after one sync. So another process learns of
 * an outage or a cooldown within about two sync intervals.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { CircuitBreaker, EndpointStats, HealthCache, HealthWindows } from "@model-gateway/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { Num } from "./internal/Columns.js"
import { fixedChunks } from "./internal/StatementChunks.js"

export interface SqlEndpointStatsOptions extends HealthWindows.WindowOptions {
  /** How often deltas are written and the shared buckets read back (default 1 second). */
  readonly healthSyncInterval?: Duration.DurationInput | undefined
  /** How often every bucket of the last day is read again (default 5 minutes). */
  readonly healthFullRefreshInterval?: Duration.DurationInput | undefined
  /** How often buckets that no window covers are deleted (default 1 minute). */
  readonly healthPruneInterval?: Duration.DurationInput | undefined
}

/** Memory held by the adapter: views and pending deltas. */
export type Footprint = HealthWindows.Footprint

/** The adapter's service: the port, plus `sync` (write and read back now) and its footprint. */
export interface SqlEndpointStatsService extends EndpointStats.EndpointStatsService {
  /** Writes the pending deltas and reads back the recent shared buckets, as the background fiber does. */
  readonly sync: Effect.Effect<void>
  readonly footprint: Effect.Effect<Footprint>
}

interface Entry extends HealthCache.HealthCache {
  readonly view: HealthWindows.HealthWindows
  pending: HealthWindows.HealthWindows | undefined
  breaker: CircuitBreaker.CircuitBreaker
  /** The latest cooldown end written to or read from the store. */
  sharedUntil: number
  lastAt: number
}

const BucketRow = Schema.Struct({
  endpoint_id: Schema.String,
  bucket_ms: Num,
  bucket_start: Num,
  metric: Num,
  idx: Num,
  n: Num
})
type BucketRow = typeof BucketRow.Type

const CooldownRow = Schema.Struct({ endpoint_id: Schema.String, cooling_until: Num })
type CooldownRow = typeof CooldownRow.Type

interface MutableBucket {
  readonly bucketMs: number
  readonly start: number
  readonly outcomes: Array<number>
  readonly ttfb: Array<number>
  readonly throughput: Array<number>
}

const OUTCOMES = 0
const TTFB = 1
const THROUGHPUT = 2

const toRows = (endpointId: string, windows: HealthWindows.HealthWindows) => {
  const rows: Array<{
    endpoint_id: string
    bucket_ms: number
    bucket_start: number
    metric: number
    idx: number
    n: number
  }> = []
  for (const bucket of HealthWindows.buckets(windows)) {
    const push = (metric: number, counts: ReadonlyArray<number> | undefined) =>
      counts?.forEach((n, idx) => {
        if (n > 0) {
          rows.push({ endpoint_id: endpointId, bucket_ms: bucket.bucketMs, bucket_start: bucket.start, metric, idx, n })
        }
      })
    push(OUTCOMES, bucket.outcomes)
    push(TTFB, bucket.ttfb)
    push(THROUGHPUT, bucket.throughput)
  }
  return rows
}

const compareRows = (
  a: { endpoint_id: string; bucket_ms: number; bucket_start: number; metric: number; idx: number },
  b: typeof a
) =>
  a.endpoint_id < b.endpoint_id
    ? -1
    : a.endpoint_id > b.endpoint_id
    ? 1
    : a.bucket_ms - b.bucket_ms || a.bucket_start - b.bucket_start || a.metric - b.metric || a.idx - b.idx

/**
 * Builds the shared endpoint statistics, loads the last day from the store and forks the sync fiber
 * into the current scope; closing the scope writes what is pending. The tables must exist (see
 * `Migrations`).
 */
export const make = (
  options: SqlEndpointStatsOptions = {}
): Effect.Effect<SqlEndpointStatsService, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const syncInterval = Duration.decode(options.healthSyncInterval ?? Duration.seconds(1))
    const fullRefreshMs = Duration.toMillis(options.healthFullRefreshInterval ?? Duration.minutes(5))
    const pruneMs = Duration.toMillis(options.healthPruneInterval ?? Duration.minutes(1))
    const cacheTtl = Duration.toMillis(options.healthCacheTtl ?? Duration.seconds(1))
    const maxEndpoints = Math.max(1, options.healthMaxEndpoints ?? 10_000)
    const breakerOptions = CircuitBreaker.options(options.breaker)
    // Buckets this recent are read back on every sync: they are the ones other processes write to.
    const lookbackMs = Math.max(60_000, 3 * Duration.toMillis(syncInterval))
    const entries = new Map<string, Entry>()
    const lock = yield* Effect.makeSemaphore(1)

    const newEntry = (): Entry =>
      Object.assign(HealthCache.emptyCache(), {
        view: HealthWindows.empty(),
        pending: undefined,
        breaker: CircuitBreaker.closed,
        sharedUntil: -Infinity,
        lastAt: -Infinity
      })

    const entryOf = (endpointId: string): Entry => {
      let entry = entries.get(endpointId)
      if (entry === undefined) {
        if (entries.size >= maxEndpoints) evictIdlest()
        entry = newEntry()
        entries.set(endpointId, entry)
      }
      return entry
    }

    const evictIdlest = () => {
      let idlest: string | undefined
      let oldest = Infinity
      for (const [id, entry] of entries) {
        const last = Math.max(entry.lastAt, HealthWindows.latest(entry.view))
        if (entry.pending === undefined && last < oldest) {
          oldest = last
          idlest = id
        }
      }
      if (idlest !== undefined) entries.delete(idlest)
    }

    // Endpoints with nothing in any window, nothing pending and no cooldown are forgotten.
    const forgetIdle = (now: number) => {
      for (const [id, entry] of entries) {
        const breaker = CircuitBreaker.view(entry.breaker, now)
        if (
          entry.pending === undefined && breaker.coolingDownUntil === null && !breaker.halfOpen &&
          HealthWindows.latest(entry.view) <= now - HealthWindows.hour.slots * HealthWindows.hour.bucketMs
        ) {
          entries.delete(id)
        }
      }
    }

    const write = (
      flushing: ReadonlyMap<string, HealthWindows.HealthWindows>,
      cooldowns: ReadonlyArray<{ endpoint_id: string; cooling_until: number; updated_at: number }>
    ) => {
      const rows: Array<ReturnType<typeof toRows>[number]> = []
      for (const [endpointId, windows] of flushing) rows.push(...toRows(endpointId, windows))
      // One order for every process, so that concurrent upserts take their row locks in the same order.
      rows.sort(compareRows)
      const sortedCooldowns = [...cooldowns].sort((a, b) => a.endpoint_id < b.endpoint_id ? -1 : 1)
      if (rows.length === 0 && sortedCooldowns.length === 0) return Effect.void
      return sql.withTransaction(Effect.gen(function*() {
        for (const chunk of fixedChunks(rows)) {
          yield* sql`INSERT INTO mg_endpoint_buckets ${sql.insert(chunk)}
            ON CONFLICT (endpoint_id, bucket_ms, bucket_start, metric, idx)
            DO UPDATE SET n = mg_endpoint_buckets.n + excluded.n`
        }
        for (const chunk of fixedChunks(sortedCooldowns)) {
          yield* sql`INSERT INTO mg_endpoint_cooldowns ${sql.insert(chunk)}
            ON CONFLICT (endpoint_id) DO UPDATE SET
              cooling_until = CASE WHEN excluded.cooling_until > mg_endpoint_cooldowns.cooling_until
                THEN excluded.cooling_until ELSE mg_endpoint_cooldowns.cooling_until END,
              updated_at = excluded.updated_at`
        }
      }))
    }

    const readBuckets = SqlSchema.findAll({
      Request: Schema.Array(Schema.Number),
      Result: BucketRow,
      execute: (cutoffs) =>
        sql`SELECT endpoint_id, bucket_ms, bucket_start, metric, idx, n FROM mg_endpoint_buckets
          WHERE (bucket_ms = ${HealthWindows.fine.bucketMs} AND bucket_start >= ${cutoffs[0]})
            OR (bucket_ms = ${HealthWindows.minute.bucketMs} AND bucket_start >= ${cutoffs[1]})
            OR (bucket_ms = ${HealthWindows.hour.bucketMs} AND bucket_start >= ${cutoffs[2]})`
    })
    const readCooldowns = SqlSchema.findAll({
      Request: Schema.Number,
      Result: CooldownRow,
      execute: (now) => sql`SELECT endpoint_id, cooling_until FROM mg_endpoint_cooldowns WHERE cooling_until > ${now}`
    })

    const read = (cutoffs: ReadonlyArray<number>, now: number) => Effect.all([readBuckets(cutoffs), readCooldowns(now)])

    // Rebuilds the buckets from `cutoffs` on: the store's totals plus what was recorded since the deltas were taken.
    const apply = (
      cutoffs: ReadonlyArray<number>,
      rows: ReadonlyArray<BucketRow>,
      cooldowns: ReadonlyArray<CooldownRow>
    ) => {
      const byEndpoint = new Map<string, Map<string, MutableBucket>>()
      for (const row of rows) {
        const bucketMs = row.bucket_ms
        const start = row.bucket_start
        let buckets = byEndpoint.get(row.endpoint_id)
        if (buckets === undefined) {
          buckets = new Map()
          byEndpoint.set(row.endpoint_id, buckets)
        }
        const key = `${bucketMs}:${start}`
        let bucket = buckets.get(key)
        if (bucket === undefined) {
          bucket = {
            bucketMs,
            start,
            outcomes: new Array(HealthWindows.outcomes.length).fill(0),
            ttfb: new Array(HealthWindows.BINS).fill(0),
            throughput: new Array(HealthWindows.BINS).fill(0)
          }
          buckets.set(key, bucket)
        }
        const target = row.metric === OUTCOMES
          ? bucket.outcomes
          : row.metric === TTFB
          ? bucket.ttfb
          : bucket.throughput
        if (row.idx >= 0 && row.idx < target.length) target[row.idx] += row.n
      }
      for (const endpointId of byEndpoint.keys()) entryOf(endpointId)
      for (const [endpointId, entry] of entries) {
        HealthWindows.granularities.forEach((g, i) => HealthWindows.clearFrom(entry.view, g.bucketMs, cutoffs[i]))
        for (const bucket of byEndpoint.get(endpointId)?.values() ?? []) HealthWindows.addBucket(entry.view, bucket)
        if (entry.pending !== undefined) {
          for (const bucket of HealthWindows.buckets(entry.pending)) {
            const i = HealthWindows.granularities.findIndex((g) => g.bucketMs === bucket.bucketMs)
            if (bucket.start >= cutoffs[i]) HealthWindows.addBucket(entry.view, bucket)
          }
        }
        entry.cached = undefined
        entry.health = undefined
      }
      for (const row of cooldowns) {
        const until = row.cooling_until
        const entry = entryOf(row.endpoint_id)
        if (until > entry.sharedUntil) {
          entry.breaker = CircuitBreaker.hold(entry.breaker, until)
          entry.health = undefined
          entry.sharedUntil = until
        }
      }
    }

    const restorePending = (flushing: ReadonlyMap<string, HealthWindows.HealthWindows>) => {
      for (const [endpointId, windows] of flushing) {
        const entry = entryOf(endpointId)
        if (entry.pending !== undefined) HealthWindows.mergeInto(windows, entry.pending)
        entry.pending = windows
      }
    }

    // Writes the deltas, then (with `readBack`) reads back the recent buckets, or all of them when `full`.
    // Uninterruptible, so that closing the layer never loses a delta that was being written.
    const syncAt = (now: number, full: boolean, readBack: boolean) =>
      lock.withPermits(1)(Effect.uninterruptible(Effect.gen(function*() {
        const flushing = new Map<string, HealthWindows.HealthWindows>()
        const cooldowns: Array<{ endpoint_id: string; cooling_until: number; updated_at: number }> = []
        for (const [endpointId, entry] of entries) {
          if (entry.pending !== undefined) {
            flushing.set(endpointId, entry.pending)
            entry.pending = undefined
          }
          const until = CircuitBreaker.view(entry.breaker, now).coolingDownUntil
          if (until !== null && until > entry.sharedUntil) {
            cooldowns.push({ endpoint_id: endpointId, cooling_until: Math.ceil(until), updated_at: Math.floor(now) })
          }
        }
        const written = yield* Effect.either(write(flushing, cooldowns))
        if (written._tag === "Left") {
          restorePending(flushing)
          return yield* Effect.logWarning("Endpoint stats: could not write to the store; will retry", written.left)
        }
        for (const cooldown of cooldowns) {
          const entry = entries.get(cooldown.endpoint_id)
          if (entry !== undefined && cooldown.cooling_until > entry.sharedUntil) {
            entry.sharedUntil = cooldown.cooling_until
          }
        }
        if (!readBack) return

        // Every bucket just written is read back, however old, so the view never counts it twice.
        const cutoffs = HealthWindows.granularities.map((g) =>
          Math.floor((full ? now - g.slots * g.bucketMs : now - lookbackMs) / g.bucketMs) * g.bucketMs
        )
        for (const windows of flushing.values()) {
          for (const bucket of HealthWindows.buckets(windows)) {
            const i = HealthWindows.granularities.findIndex((g) => g.bucketMs === bucket.bucketMs)
            if (bucket.start < cutoffs[i]) cutoffs[i] = bucket.start
          }
        }
        const result = yield* Effect.either(read(cutoffs, now))
        if (result._tag === "Left") {
          return yield* Effect.logWarning("Endpoint stats: could not read the store", result.left)
        }
        apply(cutoffs, result.right[0], result.right[1])
        if (full) forgetIdle(now)
      })))

    const prune = (now: number) =>
      Effect.gen(function*() {
        for (const g of HealthWindows.granularities) {
          yield* sql`DELETE FROM mg_endpoint_buckets
            WHERE bucket_ms = ${g.bucketMs} AND bucket_start < ${now - (g.slots + 1) * g.bucketMs}`
        }
        yield* sql`DELETE FROM mg_endpoint_cooldowns WHERE cooling_until < ${now - 24 * 3_600_000}`
      }).pipe(
        Effect.catchAll((error) => Effect.logWarning("Endpoint stats: could not prune the store", error))
      )

    const start = yield* Clock.currentTimeMillis
    yield* syncAt(start, true, true)
    let lastFull = start
    let lastPrune = start

    const loop = Effect.gen(function*() {
      yield* Effect.sleep(syncInterval)
      const now = yield* Clock.currentTimeMillis
      const full = !(now >= lastFull && now - lastFull < fullRefreshMs)
      if (full) lastFull = now
      yield* syncAt(now, full, true)
      if (!(now >= lastPrune && now - lastPrune < pruneMs)) {
        lastPrune = now
        yield* prune(now)
      }
    }).pipe(
      Effect.catchAllDefect((defect) => Effect.logError("Endpoint stats sync failed", defect)),
      Effect.forever
    )

    const fiber = yield* Effect.forkScoped(loop)
    yield* Effect.addFinalizer(() =>
      Fiber.interrupt(fiber).pipe(
        Effect.zipRight(Effect.flatMap(Clock.currentTimeMillis, (now) => syncAt(now, false, false)))
      )
    )

    const healthOf = (entry: Entry, now: number): EndpointStats.EndpointHealth =>
      HealthCache.cachedHealth(entry, entry.view, entry.breaker, now, cacheTtl)

    const record = (attempt: EndpointStats.AttemptRecord): Effect.Effect<void> =>
      Effect.sync(() => {
        const entry = entryOf(attempt.endpointId)
        HealthCache.recorded(entry)
        HealthWindows.record(entry.view, attempt)
        if (entry.pending === undefined) entry.pending = HealthWindows.empty()
        HealthWindows.record(entry.pending, attempt)
        entry.breaker = CircuitBreaker.record(entry.breaker, attempt, breakerOptions)
        if (attempt.at > entry.lastAt) entry.lastAt = attempt.at
      })

    const snapshot = EndpointStats.snapshotOf(entries, healthOf)

    const footprint = Effect.sync((): Footprint => {
      let windowBytes = 0
      for (const entry of entries.values()) {
        windowBytes += HealthWindows.byteSize(entry.view)
        if (entry.pending !== undefined) windowBytes += HealthWindows.byteSize(entry.pending)
      }
      return { endpoints: entries.size, windowBytes }
    })

    const sync = Effect.flatMap(Clock.currentTimeMillis, (now) => syncAt(now, false, true))

    return { record, snapshot, sync, footprint }
  })

/** `EndpointStats` over the `SqlClient` in context; its sync fiber lives as long as the layer. */
export const layer = (
  options: SqlEndpointStatsOptions = {}
): Layer.Layer<EndpointStats.EndpointStats, never, SqlClient.SqlClient> =>
  Layer.scoped(EndpointStats.EndpointStats, make(options))

/** The footprint of the `EndpointStats` in context, when it is this adapter (or another that reports one). */
export const footprint: Effect.Effect<Footprint | undefined, never, EndpointStats.EndpointStats> = Effect.flatMap(
  EndpointStats.EndpointStats,
  (stats) => "footprint" in stats ? (stats as SqlEndpointStatsService).footprint : Effect.succeed(undefined)
)
