/**
 * In-process `QuotaStore`: each scope's counters in a Map, changed synchronously (so every reservation is atomic
 * within the process). The single-process default: several gateway processes each keeping their own counters would
 * let N times the limits through, so they share a SQL or Redis store instead.
 */
import { QuotaCounters, QuotaStore } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** Builds an empty in-process quota store. */
export const make: Effect.Effect<QuotaStore.QuotaStoreService> = Effect.sync(() => {
  // One entry per limited key or workspace: as many as there are keys, never per request.
  const counters = new Map<string, QuotaCounters.Counters>()
  const read = (scope: string) => counters.get(scope) ?? QuotaCounters.empty()
  const write = (scopes: ReadonlyArray<{ readonly scope: string }>, next: ReadonlyArray<QuotaCounters.Counters>) =>
    scopes.forEach(({ scope }, i) => counters.set(scope, next[i]))
  const settle = (
    reservation: QuotaStore.Reservation,
    used: Parameters<QuotaStore.QuotaStoreService["settle"]>[1],
    now: number
  ) =>
    Effect.sync(() => {
      const current = reservation.scopes.map(({ scope }) => read(scope))
      write(reservation.scopes, QuotaStore.settleOn(current, reservation, used, now))
    })
  return QuotaStore.QuotaStore.of({
    reserve: (request) =>
      Effect.sync(() => {
        const { next, result } = QuotaStore.reserveOn(request.scopes.map(({ scope }) => read(scope)), request)
        if (next !== undefined) write(request.scopes, next)
        return result
      }),
    status: (scopes, now) =>
      Effect.sync(() => scopes.map(({ limits, scope }) => QuotaCounters.status(read(scope), limits, now))),
    settle,
    release: (reservation, now) =>
      settle(reservation, { requests: 0, inputTokens: 0, outputTokens: 0, costNanoUsd: 0 }, now)
  })
})

/** The in-process `QuotaStore` layer. */
export const layer: Layer.Layer<QuotaStore.QuotaStore> = Layer.effect(QuotaStore.QuotaStore, make)
