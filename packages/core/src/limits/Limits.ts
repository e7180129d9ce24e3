/**
 * What a key or a workspace may use: requests, input and output tokens per minute (a sliding window of 60 one-second
 * buckets), and a spending budget in integer nano-USD per UTC day, week or month. The amounts a request reserves, and
 * the periods a budget is counted in. Pure values and functions, shared by every quota store.
 */

/** How long a budget lasts before it starts again: a UTC day, an ISO week (from Monday 00:00 UTC) or a UTC month. */
export type BudgetPeriod = "day" | "week" | "month"

/** The periods, in the order the configuration lists them. */
export const budgetPeriods: ReadonlyArray<BudgetPeriod> = ["day", "week", "month"]

/** A spending budget: at most `nanoUsd` per `period`. */
export interface Budget {
  readonly nanoUsd: number
  readonly period: BudgetPeriod
}

/** The limits of a key or a workspace; an absent one is unlimited. */
export interface Limits {
  readonly requestsPerMinute?: number | undefined
  readonly inputTokensPerMinute?: number | undefined
  readonly outputTokensPerMinute?: number | undefined
  readonly budget?: Budget | undefined
}

/** True when the limits limit nothing. */
export const isUnlimited = (limits: Limits | undefined): boolean =>
  limits === undefined ||
  (limits.requestsPerMinute === undefined && limits.inputTokensPerMinute === undefined &&
    limits.outputTokensPerMinute === undefined && limits.budget === undefined)

/** What a request counts against the limits: reserved before its upstream call, settled with what it used. */
export interface Amounts {
  readonly requests: number
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costNanoUsd: number
}

/** Nothing. */
export const zero: Amounts = { requests: 0, inputTokens: 0, outputTokens: 0, costNanoUsd: 0 }

/** `a - b`, field by field. */
export const minus = (a: Amounts, b: Amounts): Amounts => ({
  requests: a.requests - b.requests,
  inputTokens: a.inputTokens - b.inputTokens,
  outputTokens: a.outputTokens - b.outputTokens,
  costNanoUsd: a.costNanoUsd - b.costNanoUsd
})

const NANO_DIGITS = 9
const DECIMAL = /^(\d+)(?:\.(\d+))?$/

/**
 * A USD decimal string as whole nano-USD, rounded up (a request never counts for less than it cost); undefined for a
 * string that is not a non-negative decimal.
 */
export const nanoUsdOf = (usd: string): number | undefined => {
  const match = DECIMAL.exec(usd.trim())
  if (match === null) return undefined
  const fraction = match[2] ?? ""
  const kept = fraction.slice(0, NANO_DIGITS).padEnd(NANO_DIGITS, "0")
  const roundUp = /[1-9]/.test(fraction.slice(NANO_DIGITS)) ? 1n : 0n
  const nanos = BigInt(match[1]) * 1_000_000_000n + BigInt(kept) + roundUp
  return nanos > BigInt(Number.MAX_SAFE_INTEGER) ? undefined : Number(nanos)
}

/** Nano-USD as a USD decimal string without trailing zeros: 1_500_000_000 → "1.5". */
export const usdOf = (nanoUsd: number): string => {
  const n = Math.max(0, Math.trunc(nanoUsd))
  const whole = Math.floor(n / 1_000_000_000)
  const fraction = String(n % 1_000_000_000).padStart(NANO_DIGITS, "0").replace(/0+$/, "")
  return fraction === "" ? String(whole) : `${whole}.${fraction}`
}

const DAY_MS = 86_400_000

/**
 * The budget period `now` (epoch ms) falls in: its id (`d<day>`, `w<week>`, `m<month>`, so a changed period never
 * reads another's spending) and when it ends (epoch ms).
 */
export const periodOf = (period: BudgetPeriod, now: number): { readonly id: string; readonly endsAt: number } => {
  const day = Math.floor(now / DAY_MS)
  // Every request of a day asks for the same period: the last answer, kept per period kind.
  const cached = last[period]
  if (cached !== undefined && cached.day === day) return cached.period
  const computed = compute(period, day, now)
  last[period] = { day, period: computed }
  return computed
}

const last: Partial<Record<BudgetPeriod, { readonly day: number; readonly period: { id: string; endsAt: number } }>> =
  {}

const compute = (period: BudgetPeriod, day: number, now: number): { readonly id: string; readonly endsAt: number } => {
  switch (period) {
    case "day":
      return { id: `d${day}`, endsAt: (day + 1) * DAY_MS }
    case "week": {
      // 1970-01-01 was a Thursday: weeks counted from Monday 1969-12-29.
      const week = Math.floor((day + 3) / 7)
      return { id: `w${week}`, endsAt: ((week + 1) * 7 - 3) * DAY_MS }
    }
    case "month": {
      const date = new Date(now)
      const year = date.getUTCFullYear()
      const month = date.getUTCMonth()
      return { id: `m${year * 12 + month}`, endsAt: Date.UTC(year, month + 1, 1) }
    }
  }
}

const count = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined

/**
 * Limits read back from storage (JSON written from a `Limits`): what is not a count or a known period is left out;
 * undefined when nothing is left.
 */
export const fromJson = (value: unknown): Limits | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const v = value as Record<string, unknown>
  const budget = v.budget as Record<string, unknown> | null | undefined
  const nanoUsd = count(budget?.nanoUsd)
  const period = budgetPeriods.find((p) => p === budget?.period)
  const limits: Limits = {
    requestsPerMinute: count(v.requestsPerMinute),
    inputTokensPerMinute: count(v.inputTokensPerMinute),
    outputTokensPerMinute: count(v.outputTokensPerMinute),
    budget: nanoUsd === undefined || period === undefined ? undefined : { nanoUsd, period }
  }
  return isUnlimited(limits) ? undefined : limits
}

/** Limits as the JSON text stores keep (null when unlimited). */
export const toJson = (limits: Limits | undefined): string | null =>
  limits === undefined || isUnlimited(limits) ? null : JSON.stringify(limits)
