/**
 * `SessionAffinity` shared by every gateway process over one database (SQLite or PostgreSQL),
 * table `mg_session_affinity`. `get` reads the row (one primary-key look-up) and treats it as absent
 * once idle for `SessionAffinity.IDLE_TTL_MS`; `set` only remembers the value in memory, and a
 * background fiber upserts the waiting values every `affinityFlushInterval` (100 ms) in one
 * statement, the later `updated_at` winning when processes race. Until then this process answers
 * from memory, so it always reads its own writes; other processes see them after the flush. Expired
 * rows are deleted every `affinityPruneInterval`. A failed read answers "no affinity" (routing goes
 * on without stickiness) and logs a warning; closing the layer writes what is waiting.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { SessionAffinity } from "@model-gateway/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { Num } from "./internal/Columns.js"

export interface SqlSessionAffinityOptions {
  /** Longest a `set` waits before it is written (default 100 ms). */
  readonly affinityFlushInterval?: Duration.DurationInput | undefined
  /** How often expired sessions are deleted (default 1 minute). */
  readonly affinityPruneInterval?: Duration.DurationInput | undefined
  /** Most sessions waiting to be written; beyond, new sessions are not remembered (default 100,000). */
  readonly affinityMaxPending?: number | undefined
}

interface Pending {
  readonly endpointId: string
  readonly updatedAt: number
}

const AffinityRow = Schema.Struct({ endpoint_id: Schema.String, updated_at: Num })

const chunkSize = 500

/**
 * Builds the SQL session affinity store and forks its writer into the current scope; closing the
 * scope writes what is waiting. The tables must exist (see `Migrations`).
 */
export const make = (
  options: SqlSessionAffinityOptions = {}
): Effect.Effect<SessionAffinity.SessionAffinityService, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const flushInterval = Duration.decode(options.affinityFlushInterval ?? Duration.millis(100))
    const pruneMs = Duration.toMillis(options.affinityPruneInterval ?? Duration.minutes(1))
    const maxPending = Math.max(1, options.affinityMaxPending ?? 100_000)
    const ttl = SessionAffinity.IDLE_TTL_MS
    const pending = new Map<string, Pending>()
    let dropped = 0

    const live = (updatedAt: number, now: number) => now - updatedAt < ttl

    const findSession = SqlSchema.findOne({
      Request: Schema.String,
      Result: AffinityRow,
      execute: (key) => sql`SELECT endpoint_id, updated_at FROM mg_session_affinity WHERE session_key = ${key}`
    })

    const get = (key: string): Effect.Effect<Option.Option<string>> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const waiting = pending.get(key)
        if (waiting !== undefined) {
          return Effect.succeed(live(waiting.updatedAt, now) ? Option.some(waiting.endpointId) : Option.none())
        }
        return findSession(key).pipe(
          Effect.map((row) =>
            Option.isSome(row) && live(row.value.updated_at, now) ? Option.some(row.value.endpoint_id) : Option.none()
          ),
          Effect.catchAll((error) =>
            Effect.as(Effect.logWarning("Session affinity: could not read the store", error), Option.none())
          )
        )
      })

    const set = (key: string, endpointId: string): Effect.Effect<void> =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        // Only while the store cannot be written to for a long time.
        if (pending.size >= maxPending && !pending.has(key)) {
          dropped++
          return
        }
        pending.set(key, { endpointId, updatedAt: Math.floor(now) })
      })

    const upsert = (batch: ReadonlyArray<readonly [string, Pending]>) =>
      sql.withTransaction(
        Effect.forEach(chunks(batch), (chunk) =>
          sql`INSERT INTO mg_session_affinity ${
            sql.insert(
              chunk.map(([key, p]) => ({ session_key: key, endpoint_id: p.endpointId, updated_at: p.updatedAt }))
            )
          }
          ON CONFLICT (session_key) DO UPDATE SET
            endpoint_id = excluded.endpoint_id,
            updated_at = excluded.updated_at
          WHERE mg_session_affinity.updated_at <= excluded.updated_at`, { discard: true })
      )

    // Uninterruptible, so that closing the layer never abandons a batch half-way.
    const flush = Effect.uninterruptible(Effect.suspend(() => {
      if (pending.size === 0) return Effect.void
      // Sorted, so that concurrent upserts from several processes take their row locks in one order.
      const batch = Array.from(pending.entries()).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)
      return upsert(batch).pipe(
        Effect.zipRight(Effect.sync(() => {
          // Keep what was set again while the batch was being written.
          for (const [key, value] of batch) if (pending.get(key) === value) pending.delete(key)
        })),
        Effect.catchAll((error) =>
          Effect.logWarning("Session affinity: could not write to the store; will retry", error).pipe(
            Effect.annotateLogs({ sessions: batch.length })
          )
        )
      )
    }))

    const reportDrops = Effect.suspend(() => {
      if (dropped === 0) return Effect.void
      const count = dropped
      dropped = 0
      return Effect.logWarning("Session affinity: too many sessions waiting to be written; some were not remembered")
        .pipe(
          Effect.annotateLogs({ dropped: count, maxPending })
        )
    })

    const prune = (now: number) =>
      sql`DELETE FROM mg_session_affinity WHERE updated_at <= ${now - ttl}`.pipe(
        Effect.catchAll((error) => Effect.logWarning("Session affinity: could not prune the store", error))
      )

    let lastPrune = yield* Clock.currentTimeMillis
    const loop = Effect.gen(function*() {
      yield* Effect.sleep(flushInterval)
      yield* flush
      yield* reportDrops
      const now = yield* Clock.currentTimeMillis
      if (!(now >= lastPrune && now - lastPrune < pruneMs)) {
        lastPrune = now
        yield* prune(Math.floor(now))
      }
    }).pipe(
      Effect.catchAllDefect((defect) => Effect.logError("Session affinity writer failed", defect)),
      Effect.forever
    )

    const fiber = yield* Effect.forkScoped(loop)
    yield* Effect.addFinalizer(() => Fiber.interrupt(fiber).pipe(Effect.zipRight(flush)))

    return SessionAffinity.SessionAffinity.of({ get, set })
  })

const chunks = <A>(items: ReadonlyArray<A>): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += chunkSize) out.push(items.slice(i, i + chunkSize))
  return out
}

/** `SessionAffinity` over the `SqlClient` in context; its writer lives as long as the layer. */
export const layer = (
  options: SqlSessionAffinityOptions = {}
): Layer.Layer<SessionAffinity.SessionAffinity, never, SqlClient.SqlClient> =>
  Layer.scoped(SessionAffinity.SessionAffinity, make(options))
