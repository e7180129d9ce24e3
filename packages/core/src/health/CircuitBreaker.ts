/**
 * A pure circuit breaker for one endpoint, fed with attempt outcomes and explicit times.
 *
 * - Closed: traffic flows. `failureThreshold` consecutive failures (by default every outcome but
 *   `ok`, rate limits included) open it.
 * - Open (cooling down): for `baseCooldownMs`, doubled on each reopening without a success in
 *   between, up to `maxCooldownMs`.
 * - Half-open: once the cooldown has passed, the next attempt is the probe. A success closes the
 *   breaker (and forgets the reopenings); a failure reopens it with the next, longer cooldown.
 *
 * Independently of the failure count, an upstream `Retry-After` (429, 529, 503) holds the endpoint
 * until then (capped at `maxRetryAfterMs`), and so does a cooldown learnt from another gateway
 * process (`hold`). After a hold the endpoint is half-open too. A success that ends while a hold is
 * still running (a request already in flight) closes the breaker but keeps the hold: the upstream
 * asked us to wait.
 *
 * The state is plain data; `record` and `hold` return a new state.
 */
import type { AttemptOutcome } from "./EndpointStats.js"

export interface Options {
  /** Consecutive failures that open the breaker (default 3). */
  readonly failureThreshold: number
  /** The first cooldown (default 10 s); doubled on every reopening without a success in between. */
  readonly baseCooldownMs: number
  /** The longest cooldown (default 5 minutes). */
  readonly maxCooldownMs: number
  /** The longest `Retry-After` honoured (default 1 hour). */
  readonly maxRetryAfterMs: number
  /**
   * The outcomes that count as failures (default: every outcome but `ok`). Outcomes that are
   * neither `ok` nor listed change nothing but still honour their `Retry-After`.
   */
  readonly failureOutcomes: ReadonlyArray<AttemptOutcome>
}

export const defaultOptions: Options = {
  failureThreshold: 3,
  baseCooldownMs: 10_000,
  maxCooldownMs: 5 * 60_000,
  maxRetryAfterMs: 60 * 60_000,
  failureOutcomes: ["rate_limited", "overloaded", "error", "timeout"]
}

/** The default options with some replaced. */
export const options = (overrides: Partial<Options> = {}): Options => ({ ...defaultOptions, ...overrides })

export interface CircuitBreaker {
  /** Consecutive failures since the last success. */
  readonly failures: number
  /** Openings since the last success: the next cooldown is `cooldownMs(opens + 1)`. */
  readonly opens: number
  /** End of the breaker's own cooldown; stays set (in the past) while half-open, null when closed. */
  readonly openUntil: number | null
  /** End of a `Retry-After` or of a cooldown learnt from another process; stays set while half-open. */
  readonly holdUntil: number | null
}

/** The state of an endpoint with no failures. */
export const closed: CircuitBreaker = { failures: 0, opens: 0, openUntil: null, holdUntil: null }

/** What the breaker needs of an attempt (an `AttemptRecord` is one). */
export interface Outcome {
  /** Epoch ms when the attempt ended. */
  readonly at: number
  readonly outcome: AttemptOutcome
  readonly retryAfterMs?: number | undefined
}

/** The cooldown after the `opens`-th consecutive opening (1 = first). */
export const cooldownMs = (opens: number, options: Options = defaultOptions): number =>
  Math.min(options.baseCooldownMs * 2 ** Math.max(0, opens - 1), options.maxCooldownMs)

const later = (a: number | null, b: number | null): number | null => a === null ? b : b === null ? a : Math.max(a, b)

/** The state after an attempt that ended at `attempt.at`. */
export const record = (
  state: CircuitBreaker,
  attempt: Outcome,
  options: Options = defaultOptions
): CircuitBreaker => {
  const at = attempt.at
  const retryAfter = attempt.outcome !== "ok" && attempt.retryAfterMs !== undefined && attempt.retryAfterMs > 0
    ? at + Math.min(attempt.retryAfterMs, options.maxRetryAfterMs)
    : null
  const runningHold = state.holdUntil !== null && state.holdUntil > at ? state.holdUntil : null

  if (attempt.outcome === "ok") {
    return { failures: 0, opens: 0, openUntil: null, holdUntil: runningHold }
  }
  if (!options.failureOutcomes.includes(attempt.outcome)) {
    return retryAfter === null ? state : { ...state, holdUntil: later(state.holdUntil, retryAfter) }
  }

  const failures = state.failures + 1
  // A hold that has passed ends with this attempt: it was the probe, and it failed.
  const holdUntil = later(runningHold, retryAfter)
  if (state.openUntil !== null) {
    if (at < state.openUntil) return { ...state, failures, holdUntil: later(state.holdUntil, retryAfter) }
    const opens = state.opens + 1
    return { failures, opens, openUntil: at + cooldownMs(opens, options), holdUntil }
  }
  if (failures >= options.failureThreshold) {
    const opens = state.opens + 1
    return { failures, opens, openUntil: at + cooldownMs(opens, options), holdUntil }
  }
  return { failures, opens: state.opens, openUntil: null, holdUntil }
}

/** Holds the endpoint until `until` (a cooldown decided by another gateway process). */
export const hold = (state: CircuitBreaker, until: number): CircuitBreaker =>
  state.holdUntil !== null && state.holdUntil >= until ? state : { ...state, holdUntil: until }

/** What routing sees of the breaker at `now`. */
export interface View {
  /** Until when the endpoint cools down; null when it does not. */
  readonly coolingDownUntil: number | null
  /** The cooldown has passed and no attempt has ended since: the next attempt is the probe. */
  readonly halfOpen: boolean
}

/** The breaker as routing sees it at `now`. */
export const view = (state: CircuitBreaker, now: number): View => {
  const until = later(state.openUntil, state.holdUntil)
  if (until === null) return { coolingDownUntil: null, halfOpen: false }
  return until > now ? { coolingDownUntil: until, halfOpen: false } : { coolingDownUntil: null, halfOpen: true }
}
