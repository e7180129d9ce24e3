import { assert, describe, it } from "@effect/vitest"
import * as CircuitBreaker from "../src/health/CircuitBreaker.js"
import type { AttemptOutcome } from "../src/health/EndpointStats.js"

const T = 1_750_000_000_000

const run = (
  events: ReadonlyArray<readonly [at: number, outcome: AttemptOutcome, retryAfterMs?: number]>,
  options: CircuitBreaker.Options = CircuitBreaker.defaultOptions,
  from: CircuitBreaker.CircuitBreaker = CircuitBreaker.closed
) =>
  events.reduce(
    (state, [at, outcome, retryAfterMs]) => CircuitBreaker.record(state, { at, outcome, retryAfterMs }, options),
    from
  )

const closedView = { coolingDownUntil: null, halfOpen: false }

describe("CircuitBreaker", () => {
  it("stays closed below the threshold, and a success resets the count", () => {
    const state = run([[T, "error"], [T + 1, "timeout"], [T + 2, "ok"], [T + 3, "overloaded"], [T + 4, "error"]])
    assert.strictEqual(state.failures, 2)
    assert.deepStrictEqual(CircuitBreaker.view(state, T + 5), closedView)
  })

  it("opens after 3 consecutive failures for 10 s, then lets one half-open probe through", () => {
    const state = run([[T, "error"], [T + 100, "timeout"], [T + 200, "overloaded"]])
    assert.deepStrictEqual(CircuitBreaker.view(state, T + 200), { coolingDownUntil: T + 10_200, halfOpen: false })
    assert.deepStrictEqual(CircuitBreaker.view(state, T + 10_199), { coolingDownUntil: T + 10_200, halfOpen: false })
    assert.deepStrictEqual(CircuitBreaker.view(state, T + 10_200), { coolingDownUntil: null, halfOpen: true })
    assert.deepStrictEqual(CircuitBreaker.view(state, T + 99_000), { coolingDownUntil: null, halfOpen: true })
  })

  it("a failed probe reopens with a doubled cooldown, up to 5 minutes; a successful probe closes", () => {
    let state = run([[T, "error"], [T, "error"], [T, "error"]])
    let now = T
    const cooldowns: Array<number> = []
    for (let i = 0; i < 8; i++) {
      const until = CircuitBreaker.view(state, now).coolingDownUntil!
      cooldowns.push(until - now)
      now = until
      assert.isTrue(CircuitBreaker.view(state, now).halfOpen)
      state = CircuitBreaker.record(state, { at: now, outcome: "error" })
    }
    assert.deepStrictEqual(cooldowns, [10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000])
    now = CircuitBreaker.view(state, now).coolingDownUntil!
    state = CircuitBreaker.record(state, { at: now, outcome: "ok" })
    assert.deepStrictEqual(state, CircuitBreaker.closed)
    assert.deepStrictEqual(CircuitBreaker.view(state, now), closedView)
    // After a success the next opening starts again at the base cooldown.
    state = run([[now + 1, "error"], [now + 2, "error"], [now + 3, "error"]], undefined, state)
    assert.strictEqual(CircuitBreaker.view(state, now + 3).coolingDownUntil, now + 3 + 10_000)
  })

  it("failures while open (requests already in flight) do not extend the cooldown", () => {
    const state = run([[T, "error"], [T, "error"], [T, "error"], [T + 5_000, "error"], [T + 9_000, "timeout"]])
    assert.strictEqual(CircuitBreaker.view(state, T + 9_000).coolingDownUntil, T + 10_000)
    assert.strictEqual(state.opens, 1)
  })

  it("honours Retry-After, capped at an hour, and the endpoint is half-open after it", () => {
    const state = run([[T, "rate_limited", 30_000]])
    assert.deepStrictEqual(CircuitBreaker.view(state, T + 1), { coolingDownUntil: T + 30_000, halfOpen: false })
    assert.deepStrictEqual(CircuitBreaker.view(state, T + 30_000), { coolingDownUntil: null, halfOpen: true })
    const probed = CircuitBreaker.record(state, { at: T + 31_000, outcome: "ok" })
    assert.deepStrictEqual(CircuitBreaker.view(probed, T + 31_000), closedView)

    const capped = run([[T, "overloaded", 7 * 24 * 3_600_000]])
    assert.strictEqual(CircuitBreaker.view(capped, T).coolingDownUntil, T + 3_600_000)
  })

  it("a success in flight during a Retry-After keeps the hold; a longer Retry-After extends it", () => {
    const state = run([[T, "rate_limited", 30_000], [T + 1_000, "ok"], [T + 2_000, "overloaded", 60_000]])
    assert.strictEqual(CircuitBreaker.view(state, T + 2_000).coolingDownUntil, T + 62_000)
    const shorter = CircuitBreaker.record(state, { at: T + 3_000, outcome: "rate_limited", retryAfterMs: 1_000 })
    assert.strictEqual(CircuitBreaker.view(shorter, T + 3_000).coolingDownUntil, T + 62_000)
  })

  it("Retry-After and the breaker combine: the later end wins", () => {
    const state = run([[T, "error"], [T, "error"], [T, "rate_limited", 60_000]])
    assert.strictEqual(CircuitBreaker.view(state, T).coolingDownUntil, T + 60_000)
    assert.isTrue(CircuitBreaker.view(state, T + 60_000).halfOpen)
  })

  it("rate limits can be left out of the failures; their Retry-After still counts", () => {
    const options = CircuitBreaker.options({ failureOutcomes: ["error", "timeout", "overloaded"] })
    const state = run([[T, "rate_limited"], [T, "rate_limited"], [T, "rate_limited"], [T, "rate_limited"]], options)
    assert.deepStrictEqual(CircuitBreaker.view(state, T), closedView)
    const held = run([[T, "rate_limited", 5_000]], options)
    assert.strictEqual(CircuitBreaker.view(held, T).coolingDownUntil, T + 5_000)
  })

  it("a cooldown from another process holds the endpoint, then allows a probe", () => {
    const state = CircuitBreaker.hold(CircuitBreaker.closed, T + 20_000)
    assert.deepStrictEqual(CircuitBreaker.view(state, T), { coolingDownUntil: T + 20_000, halfOpen: false })
    assert.strictEqual(CircuitBreaker.hold(state, T + 10_000), state)
    assert.isTrue(CircuitBreaker.view(state, T + 20_000).halfOpen)
    const failedProbe = CircuitBreaker.record(state, { at: T + 21_000, outcome: "error" })
    assert.deepStrictEqual(CircuitBreaker.view(failedProbe, T + 21_000), closedView)
    assert.strictEqual(failedProbe.failures, 1)
  })

  it("honours the options", () => {
    const options = CircuitBreaker.options({ failureThreshold: 1, baseCooldownMs: 1_000, maxCooldownMs: 3_000 })
    assert.deepStrictEqual([1, 2, 3, 4].map((n) => CircuitBreaker.cooldownMs(n, options)), [1_000, 2_000, 3_000, 3_000])
    const state = run([[T, "timeout"]], options)
    assert.strictEqual(CircuitBreaker.view(state, T).coolingDownUntil, T + 1_000)
  })
})
