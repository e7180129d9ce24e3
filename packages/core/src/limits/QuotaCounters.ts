/**
 * The counters of one scope (a key or a workspace), as pure functions: a sliding window of 60 one-second buckets for
 * requests, input tokens and output tokens, and the spending of the current budget period. A bucket is counted while
 * its second is one of the last 60 (`now - 59` .. `now`); slot `second % 60` holds it. The in-process and SQL quota
 * stores run these functions; the Redis store runs the same rules in its Lua scripts.
 */
import type { Amounts, Limits } from "./Limits.js"
import { periodOf } from "./Limits.js"

/** Seconds in the window, and slots in a scope's ring of buckets. */
export const WINDOW_SECONDS = 60

/** A scope's counters. Slot `i` holds the bucket of second `stamps[i]` (0: never used). */
export interface Counters {
  readonly stamps: ReadonlyArray<number>
  readonly requests: ReadonlyArray<number>
  readonly inputTokens: ReadonlyArray<number>
  readonly outputTokens: ReadonlyArray<number>
  /** The budget period (`Limits.periodOf(...).id`) whose spending `spent` is; null before any. */
  readonly period: string | null
  /** Nano-USD spent in `period`. */
  readonly spent: number
}

const zeros = (): Array<number> => new Array<number>(WINDOW_SECONDS).fill(0)

/** Counters that have counted nothing. */
export const empty = (): Counters => ({
  stamps: zeros(),
  requests: zeros(),
  inputTokens: zeros(),
  outputTokens: zeros(),
  period: null,
  spent: 0
})

/** The windowed metrics, by their names in `Amounts` and `Limits`. */
export type Metric = "requests" | "inputTokens" | "outputTokens"

export const metrics: ReadonlyArray<Metric> = ["requests", "inputTokens", "outputTokens"]

/** The limit of a metric. */
export const limitOf = (limits: Limits, metric: Metric): number | undefined =>
  metric === "requests"
    ? limits.requestsPerMinute
    : metric === "inputTokens"
    ? limits.inputTokensPerMinute
    : limits.outputTokensPerMinute

/** The second of an epoch-ms time. */
export const secondOf = (now: number): number => Math.floor(now / 1000)

/** Whether the bucket of `stamp` is still counted at second `second` (a stamp ahead of it, another clock's, is). */
const live = (stamp: number, second: number): boolean => stamp > 0 && stamp > second - WINDOW_SECONDS

/** What a metric has used in the window at `now`. */
export const used = (counters: Counters, metric: Metric, now: number): number => {
  const second = secondOf(now)
  const amounts = counters[metric]
  let sum = 0
  for (let i = 0; i < WINDOW_SECONDS; i++) if (live(counters.stamps[i], second)) sum += amounts[i]
  return sum
}

/** Nano-USD spent in the current period of `limits.budget` at `now` (0 in a new period). */
export const spentIn = (counters: Counters, limits: Limits, now: number): number =>
  limits.budget !== undefined && counters.period === periodOf(limits.budget.period, now).id ? counters.spent : 0

/** Why a scope cannot take a reservation now. */
export type Refusal =
  | {
    readonly _tag: "RateLimited"
    readonly metric: Metric
    readonly limit: number
    /** How long until enough of the window has passed for the reservation to fit. */
    readonly retryAfterMs: number
  }
  | {
    readonly _tag: "OverBudget"
    readonly limitNanoUsd: number
    readonly spentNanoUsd: number
    /** When the budget starts again (epoch ms). */
    readonly resetsAt: number
  }

/**
 * How long until a metric has room for `amount` more: 0 when it has now; else the time until the oldest buckets
 * whose expiry frees enough have left the window. `amount` must not exceed the limit.
 */
export const waitFor = (counters: Counters, metric: Metric, limit: number, amount: number, now: number): number => {
  const sum = used(counters, metric, now)
  if (sum + amount <= limit) return 0
  // Only a refusal pays for sorting the buckets.
  const second = secondOf(now)
  const amounts = counters[metric]
  const buckets: Array<readonly [number, number]> = []
  for (let i = 0; i < WINDOW_SECONDS; i++) {
    const stamp = counters.stamps[i]
    if (live(stamp, second) && amounts[i] !== 0) buckets.push([stamp, amounts[i]])
  }
  buckets.sort((a, b) => a[0] - b[0])
  let freed = 0
  for (const [stamp, n] of buckets) {
    freed += n
    if (sum - freed + amount <= limit) return Math.max(1, (stamp + WINDOW_SECONDS) * 1000 - now)
  }
  return WINDOW_SECONDS * 1000
}

/**
 * Why `amounts` does not fit in a scope's limits now, or undefined when it does: the budget first (waiting a minute
 * would not help), then the rate that frees last.
 */
export const check = (counters: Counters, limits: Limits, amounts: Amounts, now: number): Refusal | undefined => {
  const budget = limits.budget
  if (budget !== undefined) {
    const spent = spentIn(counters, limits, now)
    if (spent + amounts.costNanoUsd > budget.nanoUsd) {
      return {
        _tag: "OverBudget",
        limitNanoUsd: budget.nanoUsd,
        spentNanoUsd: spent,
        resetsAt: periodOf(budget.period, now).endsAt
      }
    }
  }
  let refusal: Extract<Refusal, { readonly _tag: "RateLimited" }> | undefined
  for (const metric of metrics) {
    const limit = limitOf(limits, metric)
    // A request that asks nothing of a metric is not held back by it (an embedding by the output tokens).
    if (limit === undefined || amounts[metric] === 0) continue
    const wait = waitFor(counters, metric, limit, amounts[metric], now)
    if (wait > 0 && (refusal === undefined || wait > refusal.retryAfterMs)) {
      refusal = { _tag: "RateLimited", metric, limit, retryAfterMs: wait }
    }
  }
  return refusal
}

const withSlot = (counters: Counters, second: number) => {
  const slot = second % WINDOW_SECONDS
  const fresh = counters.stamps[slot] !== second
  const stamps = [...counters.stamps]
  const requests = [...counters.requests]
  const inputTokens = [...counters.inputTokens]
  const outputTokens = [...counters.outputTokens]
  if (fresh) {
    stamps[slot] = second
    requests[slot] = 0
    inputTokens[slot] = 0
    outputTokens[slot] = 0
  }
  return { slot, stamps, requests, inputTokens, outputTokens }
}

/**
 * The counters with `amounts` added at `now`: the windowed metrics in the bucket of its second, the cost to the
 * current period of `limits.budget` (a new period starts from nothing). Without a budget, spending is not kept.
 */
export const add = (counters: Counters, limits: Limits, amounts: Amounts, now: number): Counters => {
  const { inputTokens, outputTokens, requests, slot, stamps } = withSlot(counters, secondOf(now))
  requests[slot] += amounts.requests
  inputTokens[slot] += amounts.inputTokens
  outputTokens[slot] += amounts.outputTokens
  const budget = limits.budget
  const period = budget === undefined ? counters.period : periodOf(budget.period, now).id
  const spent = budget === undefined
    ? counters.spent
    : (period === counters.period ? counters.spent : 0) + amounts.costNanoUsd
  return { stamps, requests, inputTokens, outputTokens, period, spent }
}

/**
 * The counters with a reservation made at `reservedAt` (in budget period `period`) corrected by `delta` (what was used
 * less what was reserved). The window's metrics change in the reservation's bucket while it is counted; once it has
 * left the window, only an excess is counted, at `now`. The spending changes only while its period lasts. No counter
 * goes below zero.
 */
export const adjust = (
  counters: Counters,
  delta: Amounts,
  reservedAt: number,
  period: string | null,
  now: number
): Counters => {
  const reservedSecond = secondOf(reservedAt)
  const second = secondOf(now)
  const slot = reservedSecond % WINDOW_SECONDS
  const inWindow = counters.stamps[slot] === reservedSecond && live(reservedSecond, second)
  let next: Counters = counters
  if (inWindow || delta.requests > 0 || delta.inputTokens > 0 || delta.outputTokens > 0) {
    const target = inWindow ? reservedSecond : second
    const s = withSlot(counters, target)
    const change = (values: Array<number>, d: number) => {
      if (inWindow || d > 0) values[s.slot] = Math.max(0, values[s.slot] + d)
    }
    change(s.requests, delta.requests)
    change(s.inputTokens, delta.inputTokens)
    change(s.outputTokens, delta.outputTokens)
    next = {
      ...counters,
      stamps: s.stamps,
      requests: s.requests,
      inputTokens: s.inputTokens,
      outputTokens: s.outputTokens
    }
  }
  if (period !== null && counters.period === period && delta.costNanoUsd !== 0) {
    next = { ...next, spent: Math.max(0, counters.spent + delta.costNanoUsd) }
  }
  return next
}

/** What a client is told of one limit: the limit, what is left of it, and when it is whole again (epoch ms). */
export interface Remaining {
  readonly limit: number
  readonly remaining: number
  readonly resetsAt: number
}

/** What is left of a scope's limits at `now`, by metric; the budget in nano-USD. */
export interface ScopeStatus {
  readonly requests?: Remaining | undefined
  readonly inputTokens?: Remaining | undefined
  readonly outputTokens?: Remaining | undefined
  readonly budget?: Remaining | undefined
}

/** What a metric has used at `now`, and when its window is empty again: a minute after its newest counted bucket. */
const remainingOf = (counters: Counters, metric: Metric, limit: number, now: number): Remaining => {
  const second = secondOf(now)
  const amounts = counters[metric]
  let sum = 0
  let newest = 0
  for (let i = 0; i < WINDOW_SECONDS; i++) {
    const stamp = counters.stamps[i]
    if (live(stamp, second) && amounts[i] !== 0) {
      sum += amounts[i]
      if (stamp > newest) newest = stamp
    }
  }
  return {
    limit,
    remaining: Math.max(0, limit - sum),
    resetsAt: newest === 0 ? now : (newest + WINDOW_SECONDS) * 1000
  }
}

/** What is left of each limit of a scope at `now`. */
export const status = (counters: Counters, limits: Limits, now: number): ScopeStatus => {
  const of = (metric: Metric): Remaining | undefined => {
    const limit = limitOf(limits, metric)
    return limit === undefined ? undefined : remainingOf(counters, metric, limit, now)
  }
  const budget = limits.budget
  return {
    requests: of("requests"),
    inputTokens: of("inputTokens"),
    outputTokens: of("outputTokens"),
    budget: budget === undefined ? undefined : {
      limit: budget.nanoUsd,
      remaining: Math.max(0, budget.nanoUsd - spentIn(counters, limits, now)),
      resetsAt: periodOf(budget.period, now).endsAt
    }
  }
}
