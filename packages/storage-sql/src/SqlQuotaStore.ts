/**
 * `QuotaStore` over @effect/sql, table `mg_quota_counters`: one row per scope (a key, a workspace) holding its
 * counters as JSON. A reservation is one transaction: the rows of its scopes are created if missing, locked in scope
 * order (`SELECT ... FOR UPDATE` on PostgreSQL; SQLite serialises transactions), checked and written with core's pure
 * steps (`QuotaStore.reserveOn`, `settleOn`). So gateway processes sharing one PostgreSQL database share exact limits.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { GatewayError, QuotaCounters, QuotaStore } from "@model-gateway/core"
import type { Limits } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

const NOTHING: Limits.Amounts = { requests: 0, inputTokens: 0, outputTokens: 0, costNanoUsd: 0 }

const parse = (state: string): QuotaCounters.Counters => {
  const value = JSON.parse(state) as QuotaCounters.Counters
  return Array.isArray(value?.stamps) && value.stamps.length === QuotaCounters.WINDOW_SECONDS
    ? value
    : QuotaCounters.empty()
}

/** Builds the SQL quota store; the table must exist (see `Migrations`). */
export const make: Effect.Effect<QuotaStore.QuotaStoreService, never, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const forUpdate = sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE"), orElse: () => sql.literal("") })
  const empty = JSON.stringify(QuotaCounters.empty())

  /** The counters of `scopes` (in their order), their rows created if missing and locked until the transaction ends. */
  const locked = (scopes: ReadonlyArray<string>, now: number) =>
    Effect.gen(function*() {
      // Always in the same order, so that two transactions never wait on each other's rows.
      const sorted = [...new Set(scopes)].sort()
      yield* sql`INSERT INTO mg_quota_counters ${
        sql.insert(sorted.map((scope) => ({ scope, state: empty, updated_at: now })))
      } ON CONFLICT (scope) DO NOTHING`
      const rows = yield* sql<{ readonly scope: string; readonly state: string }>`SELECT scope, state
        FROM mg_quota_counters WHERE ${sql.in("scope", sorted)} ORDER BY scope ${forUpdate}`
      const byScope = new Map(rows.map((row) => [row.scope, parse(row.state)]))
      return scopes.map((scope) => byScope.get(scope) ?? QuotaCounters.empty())
    })

  const save = (
    scopes: ReadonlyArray<{ readonly scope: string }>,
    next: ReadonlyArray<QuotaCounters.Counters>,
    now: number
  ) =>
    Effect.forEach(
      scopes,
      ({ scope }, i) =>
        sql`UPDATE mg_quota_counters SET state = ${JSON.stringify(next[i])}, updated_at = ${now}
          WHERE scope = ${scope}`,
      { discard: true }
    )

  const unavailable = (error: SqlError) =>
    new GatewayError.Unavailable({ message: `the limits store (database) cannot be reached: ${error.message}` })

  const reserve = (request: QuotaStore.ReserveRequest) =>
    Effect.gen(function*() {
      const counters = yield* locked(request.scopes.map((s) => s.scope), request.now)
      const { next, result } = QuotaStore.reserveOn(counters, request)
      if (next !== undefined) yield* save(request.scopes, next, request.now)
      return result
    }).pipe(sql.withTransaction, Effect.mapError(unavailable))

  // A plain read: no row is created or locked, and a scope without one has counted nothing.
  const status = (scopes: ReadonlyArray<QuotaStore.ScopeLimits>, now: number) =>
    Effect.gen(function*() {
      if (scopes.length === 0) return []
      const rows = yield* sql<{ readonly scope: string; readonly state: string }>`SELECT scope, state
        FROM mg_quota_counters WHERE ${sql.in("scope", [...new Set(scopes.map((s) => s.scope))])}`
      const byScope = new Map(rows.map((row) => [row.scope, parse(row.state)]))
      return scopes.map(({ limits, scope }) =>
        QuotaCounters.status(byScope.get(scope) ?? QuotaCounters.empty(), limits, now)
      )
    }).pipe(Effect.mapError(unavailable))

  const settle = (reservation: QuotaStore.Reservation, used: Limits.Amounts, now: number) =>
    Effect.gen(function*() {
      const counters = yield* locked(reservation.scopes.map((s) => s.scope), now)
      yield* save(reservation.scopes, QuotaStore.settleOn(counters, reservation, used, now), now)
    }).pipe(
      sql.withTransaction,
      Effect.catchAll((error) => Effect.logWarning(`limits: a reservation could not be settled: ${error.message}`))
    )

  return QuotaStore.QuotaStore.of({
    reserve,
    status,
    settle,
    release: (reservation, now) => settle(reservation, NOTHING, now)
  })
})

/** `QuotaStore` over the `SqlClient` in context. */
export const layer: Layer.Layer<QuotaStore.QuotaStore, never, SqlClient.SqlClient> = Layer.effect(
  QuotaStore.QuotaStore,
  make
)
