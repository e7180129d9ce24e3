/**
 * The quota store port: counters of requests, tokens and spending per scope (a key, a workspace), shared by every
 * gateway process that uses the same store. A reservation is checked and added atomically over all its scopes (a
 * burst of concurrent requests cannot overspend), then settled with what the request used, or released. Adapters:
 * in-process (one process), SQL (PostgreSQL row locks), Redis (one Lua script per operation). The pure steps over a
 * set of scopes are here, for the adapters that run them on counters they hold (in memory, or locked rows).
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as GatewayError from "../errors/GatewayError.js"
import type { Amounts, Limits } from "./Limits.js"
import { minus, periodOf } from "./Limits.js"
import * as QuotaCounters from "./QuotaCounters.js"

/** A scope and its limits: `key:<keyId>` or `workspace:<name>`. */
export interface ScopeLimits {
  readonly scope: string
  readonly limits: Limits
}

export interface ReserveRequest {
  /** The scopes to count against, each with its limits; all or none take the reservation. */
  readonly scopes: ReadonlyArray<ScopeLimits>
  readonly amounts: Amounts
  /** Epoch ms, by the gateway's clock. */
  readonly now: number
}

/** A reservation taken: what was counted, when, and in which budget period of each scope. */
export interface Reservation {
  readonly scopes: ReadonlyArray<{ readonly scope: string; readonly period: string | null }>
  readonly amounts: Amounts
  readonly at: number
}

export type ReserveResult =
  | {
    readonly _tag: "Reserved"
    readonly reservation: Reservation
    /** Each scope's status after the reservation, in the order of the request's scopes. */
    readonly status: ReadonlyArray<QuotaCounters.ScopeStatus>
  }
  | {
    readonly _tag: "Refused"
    /** The scope that refused. */
    readonly scope: string
    readonly refusal: QuotaCounters.Refusal
    /** Each scope's status, nothing reserved. */
    readonly status: ReadonlyArray<QuotaCounters.ScopeStatus>
  }

export interface QuotaStoreService {
  /** Checks every scope and adds the amounts to all of them, atomically; or refuses and adds nothing. */
  readonly reserve: (request: ReserveRequest) => Effect.Effect<ReserveResult, GatewayError.Unavailable>
  /**
   * What is left of each scope's limits at `now` (in the order of `scopes`), read without reserving or creating
   * anything: for a refusal decided before `reserve` (a request that can never fit), told in the same headers.
   */
  readonly status: (
    scopes: ReadonlyArray<ScopeLimits>,
    now: number
  ) => Effect.Effect<ReadonlyArray<QuotaCounters.ScopeStatus>, GatewayError.Unavailable>
  /**
   * Corrects a reservation to what the request used (its usage record's tokens and cost). Never fails: a store that
   * cannot be reached loses the correction (logged), it does not fail a request that is answered already.
   */
  readonly settle: (reservation: Reservation, used: Amounts, now: number) => Effect.Effect<void>
  /** Takes a reservation back entirely: the request was never answered. Never fails, as `settle`. */
  readonly release: (reservation: Reservation, now: number) => Effect.Effect<void>
}

/** Port: the shared counters of the limits. */
export class QuotaStore extends Context.Tag("@model-gateway/core/QuotaStore")<QuotaStore, QuotaStoreService>() {}

/**
 * A reservation over counters held by the caller (`counters[i]` is `request.scopes[i]`'s): the result, and the new
 * counters to keep when it was reserved. The budget refusal wins over a rate's, and among rates the longest wait.
 */
export const reserveOn = (
  counters: ReadonlyArray<QuotaCounters.Counters>,
  request: ReserveRequest
): { readonly result: ReserveResult; readonly next: ReadonlyArray<QuotaCounters.Counters> | undefined } => {
  const { amounts, now, scopes } = request
  let refused: { scope: string; refusal: QuotaCounters.Refusal } | undefined
  scopes.forEach(({ limits, scope }, i) => {
    const refusal = QuotaCounters.check(counters[i], limits, amounts, now)
    if (refusal === undefined) return
    if (
      refused === undefined ||
      (refusal._tag === "OverBudget" && refused.refusal._tag === "RateLimited") ||
      (refusal._tag === "RateLimited" && refused.refusal._tag === "RateLimited" &&
        refusal.retryAfterMs > refused.refusal.retryAfterMs)
    ) refused = { scope, refusal }
  })
  if (refused !== undefined) {
    const status = scopes.map(({ limits }, i) => QuotaCounters.status(counters[i], limits, now))
    return { result: { _tag: "Refused", ...refused, status }, next: undefined }
  }
  const next = scopes.map(({ limits }, i) => QuotaCounters.add(counters[i], limits, amounts, now))
  return {
    result: {
      _tag: "Reserved",
      reservation: {
        scopes: scopes.map(({ limits, scope }) => ({
          scope,
          period: limits.budget === undefined ? null : periodOf(limits.budget.period, now).id
        })),
        amounts,
        at: now
      },
      status: scopes.map(({ limits }, i) => QuotaCounters.status(next[i], limits, now))
    },
    next
  }
}

/** The counters of a reservation's scopes (`counters[i]` is `reservation.scopes[i]`'s) corrected to `used`. */
export const settleOn = (
  counters: ReadonlyArray<QuotaCounters.Counters>,
  reservation: Reservation,
  used: Amounts,
  now: number
): ReadonlyArray<QuotaCounters.Counters> => {
  const delta = minus(used, reservation.amounts)
  return reservation.scopes.map(({ period }, i) =>
    QuotaCounters.adjust(counters[i], delta, reservation.at, period, now)
  )
}
