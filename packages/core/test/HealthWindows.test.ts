import { assert, describe, it } from "@effect/vitest"
import * as CircuitBreaker from "../src/health/CircuitBreaker.js"
import type { AttemptOutcome, AttemptRecord, Percentiles } from "../src/health/EndpointStats.js"
import * as HealthWindows from "../src/health/HealthWindows.js"

// A multiple of an hour, so bucket boundaries are easy to see.
const T = 1_750_000_000_000 - (1_750_000_000_000 % 3_600_000)
const MIN = 60_000

const attempt = (at: number, overrides: Partial<AttemptRecord> = {}): AttemptRecord => ({
  endpointId: "e",
  at,
  ttfbMs: 100,
  latencyMs: 1_100,
  outputTokens: 50,
  outcome: "ok",
  ...overrides
})

const recordAll = (windows: HealthWindows.HealthWindows, attempts: ReadonlyArray<AttemptRecord>) => {
  for (const a of attempts) HealthWindows.record(windows, a)
  return windows
}

const withOutcomes = (at: number, ...outcomes: ReadonlyArray<AttemptOutcome>) =>
  outcomes.map((outcome) => attempt(at, { outcome }))

/** The exact nearest-rank percentile of a sample. */
const exact = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.max(1, Math.ceil(p * sorted.length - 1e-9)) - 1]
}

const assertWithinBound = (actual: Percentiles | null, values: ReadonlyArray<number>) => {
  assert.isNotNull(actual)
  for (const [key, p] of [["p50", 0.5], ["p75", 0.75], ["p90", 0.9], ["p99", 0.99]] as const) {
    const want = exact(values, p)
    const got = actual![key]
    assert.isAtMost(Math.abs(got - want) / want, HealthWindows.RELATIVE_ERROR + 1e-9, `${key}: ${got} vs ${want}`)
  }
}

describe("HealthWindows", () => {
  it("empty windows know nothing", () => {
    const health = HealthWindows.health(HealthWindows.empty(), T)
    assert.deepStrictEqual(health, {
      latency30m: null,
      throughput30m: null,
      uptime5m: null,
      uptime30m: null,
      uptime1d: null,
      recentOutage: false,
      coolingDownUntil: null,
      halfOpen: false
    })
  })

  it("percentiles of known distributions are within the documented bound", () => {
    // Uniform TTFB 1..2000 ms, and a skewed (exponential-like) throughput distribution.
    const ttfbs = Array.from({ length: 2000 }, (_, i) => i + 1)
    const throughputs = Array.from({ length: 2000 }, (_, i) => 5 + 200 * Math.exp(-i / 300))
    const windows = recordAll(
      HealthWindows.empty(),
      ttfbs.map((ttfbMs, i) =>
        attempt(T - 20 * MIN + i * 500, { ttfbMs, latencyMs: ttfbMs + 2_000, outputTokens: throughputs[i] * 2 })
      )
    )
    const stats = HealthWindows.statistics(windows, T)
    assertWithinBound(stats.latency30m, ttfbs)
    assertWithinBound(stats.throughput30m, throughputs)
  })

  it("every value within the range is reported within the bound", () => {
    for (let v = 1; v < 2_000_000; v *= 1.07) {
      const windows = recordAll(HealthWindows.empty(), [attempt(T, { ttfbMs: v })])
      const p50 = HealthWindows.statistics(windows, T).latency30m!.p50
      assert.isAtMost(Math.abs(p50 - v) / v, HealthWindows.RELATIVE_ERROR + 1e-9, String(v))
    }
  })

  it("throughput is tokens per second of generation; non-streamed answers use the whole latency", () => {
    assert.strictEqual(HealthWindows.throughputOf(attempt(T, { ttfbMs: 500, latencyMs: 2_500, outputTokens: 100 })), 50)
    assert.strictEqual(HealthWindows.throughputOf(attempt(T, { ttfbMs: 800, latencyMs: 800, outputTokens: 80 })), 100)
    assert.strictEqual(HealthWindows.throughputOf(attempt(T, { ttfbMs: null, latencyMs: 2_000, outputTokens: 10 })), 5)
    assert.isNull(HealthWindows.throughputOf(attempt(T, { outcome: "error" })))
    assert.isNull(HealthWindows.throughputOf(attempt(T, { outputTokens: 0 })))
  })

  it("uptime over 5 minutes, 30 minutes and 1 day; rate limits count neither way", () => {
    const windows = recordAll(HealthWindows.empty(), [
      ...withOutcomes(T - 20 * 3_600_000, "error", "ok"),
      ...withOutcomes(T - 20 * MIN, "timeout", "ok", "ok", "ok"),
      ...withOutcomes(T - 1 * MIN, "ok", "ok", "ok", "overloaded", "rate_limited", "rate_limited")
    ])
    const stats = HealthWindows.statistics(windows, T)
    assert.strictEqual(stats.uptime5m, 75)
    assert.strictEqual(stats.uptime30m, 75)
    assert.strictEqual(stats.uptime1d, 70)
  })

  it("an old failure drops out of 5 m, then 30 m, and stays in 1 d until it is a day old", () => {
    const windows = recordAll(HealthWindows.empty(), [attempt(T, { outcome: "error" }), attempt(T + 10 * MIN)])
    const later = HealthWindows.statistics(windows, T + 10 * MIN)
    assert.strictEqual(later.uptime5m, 100)
    assert.strictEqual(later.uptime30m, 50)
    assert.strictEqual(later.uptime1d, 50)
    assert.strictEqual(HealthWindows.statistics(windows, T + 2 * 3_600_000).uptime1d, 50)
    assert.deepStrictEqual(HealthWindows.statistics(windows, T + 25 * 3_600_000), {
      latency30m: null,
      throughput30m: null,
      uptime5m: null,
      uptime30m: null,
      uptime1d: null
    })

    // Windows are widened to whole buckets: the failure's 10 s bucket ends at T + 10 s, its minute at
    // T + 1 min and its hour at T + 1 h.
    const failure = recordAll(HealthWindows.empty(), [attempt(T + 1, { outcome: "error" })])
    const at = (now: number) => HealthWindows.statistics(failure, now)
    assert.strictEqual(at(T + 5 * MIN + 9_999).uptime5m, 0)
    assert.isNull(at(T + 5 * MIN + 10_000).uptime5m)
    assert.strictEqual(at(T + 30 * MIN + 59_999).uptime30m, 0)
    assert.isNull(at(T + 31 * MIN).uptime30m)
    assert.strictEqual(at(T + 25 * 3_600_000 - 1).uptime1d, 0)
    assert.isNull(at(T + 25 * 3_600_000).uptime1d)
  })

  it("recent outage: 3 failures that are at least half of the last 30 s", () => {
    const outage = (outcomes: ReadonlyArray<AttemptOutcome>, now = T + 5_000) =>
      HealthWindows.recentOutage(recordAll(HealthWindows.empty(), withOutcomes(T, ...outcomes)), now)
    assert.isTrue(outage(["error", "timeout", "overloaded"]))
    assert.isTrue(outage(["error", "error", "error", "ok", "ok", "ok"]))
    assert.isFalse(outage(["error", "error", "error", "ok", "ok", "ok", "ok"]))
    assert.isFalse(outage(["error", "error"]))
    assert.isFalse(outage(["rate_limited", "rate_limited", "rate_limited", "rate_limited"]))
    assert.isTrue(outage(["error", "error", "error"], T + 39_999))
    assert.isFalse(outage(["error", "error", "error"], T + 40_000))
  })

  it("health combines the windows with the circuit breaker", () => {
    const windows = recordAll(HealthWindows.empty(), withOutcomes(T, "error", "error", "error"))
    const breaker = withOutcomes(T, "error", "error", "error").reduce(
      (state, a) => CircuitBreaker.record(state, a),
      CircuitBreaker.closed
    )
    const health = HealthWindows.health(windows, T + 1_000, breaker)
    assert.isTrue(health.recentOutage)
    assert.strictEqual(health.uptime5m, 0)
    assert.strictEqual(health.coolingDownUntil, T + 10_000)
    assert.isFalse(health.halfOpen)
    assert.isTrue(HealthWindows.health(windows, T + 10_000, breaker).halfOpen)
  })

  it("merging two processes' windows equals recording everything in one", () => {
    const a = recordAll(HealthWindows.empty(), [
      ...Array.from({ length: 300 }, (_, i) => attempt(T - i * 7_000, { ttfbMs: 100 + i })),
      ...withOutcomes(T - 1_000, "error", "error")
    ])
    const b = recordAll(HealthWindows.empty(), [
      ...Array.from({ length: 300 }, (_, i) => attempt(T - i * 5_000, { ttfbMs: 1_000 + i, outcome: "timeout" })),
      ...withOutcomes(T - 2 * 3_600_000, "ok")
    ])
    const both = recordAll(HealthWindows.empty(), [
      ...Array.from({ length: 300 }, (_, i) => attempt(T - i * 7_000, { ttfbMs: 100 + i })),
      ...withOutcomes(T - 1_000, "error", "error"),
      ...Array.from({ length: 300 }, (_, i) => attempt(T - i * 5_000, { ttfbMs: 1_000 + i, outcome: "timeout" })),
      ...withOutcomes(T - 2 * 3_600_000, "ok")
    ])
    const before = HealthWindows.buckets(a)
    const merged = HealthWindows.merge(a, b)
    assert.deepStrictEqual(HealthWindows.health(merged, T), HealthWindows.health(both, T))
    assert.deepStrictEqual(HealthWindows.health(HealthWindows.merge(b, a), T), HealthWindows.health(both, T))
    assert.deepStrictEqual(HealthWindows.buckets(merged), HealthWindows.buckets(both))
    // The inputs are left alone.
    assert.deepStrictEqual(HealthWindows.buckets(a), before)
  })

  it("buckets round-trip through addBucket, and clearFrom empties recent buckets", () => {
    const source = recordAll(
      HealthWindows.empty(),
      Array.from(
        { length: 500 },
        (_, i) => attempt(T - i * 13_000, { ttfbMs: 50 + i, outcome: i % 7 === 0 ? "error" : "ok" })
      )
    )
    const target = HealthWindows.empty()
    for (const bucket of HealthWindows.buckets(source)) HealthWindows.addBucket(target, bucket)
    assert.deepStrictEqual(HealthWindows.buckets(target), HealthWindows.buckets(source))
    assert.deepStrictEqual(HealthWindows.health(target, T), HealthWindows.health(source, T))

    // Buckets older than their slot holds are ignored; unknown sizes too.
    HealthWindows.addBucket(target, { bucketMs: 10_000, start: T - 3 * 3_600_000, outcomes: [100, 0, 0, 0, 0] })
    HealthWindows.addBucket(target, { bucketMs: 1_234, start: T, outcomes: [100, 0, 0, 0, 0] })
    assert.deepStrictEqual(HealthWindows.buckets(target), HealthWindows.buckets(source))

    HealthWindows.clearFrom(target, HealthWindows.fine.bucketMs, T - 60_000)
    const left = HealthWindows.buckets(target).filter((b) => b.bucketMs === HealthWindows.fine.bucketMs)
    assert.isTrue(left.length > 0)
    assert.isTrue(left.every((b) => b.start < T - 60_000))
    assert.deepStrictEqual(
      HealthWindows.buckets(target).filter((b) => b.bucketMs !== HealthWindows.fine.bucketMs),
      HealthWindows.buckets(source).filter((b) => b.bucketMs !== HealthWindows.fine.bucketMs)
    )
  })

  it("memory does not grow with traffic: 100,000 attempts over two days", () => {
    const windows = HealthWindows.empty()
    const size = HealthWindows.byteSize(windows)
    assert.isBelow(size, 20_000)
    for (let i = 0; i < 100_000; i++) {
      HealthWindows.record(
        windows,
        attempt(T + i * 1_728, { ttfbMs: 100 + (i % 900), outcome: i % 10 === 0 ? "error" : "ok" })
      )
    }
    assert.strictEqual(HealthWindows.byteSize(windows), size)
    const now = T + 100_000 * 1_728
    const stats = HealthWindows.statistics(windows, now)
    assert.approximately(stats.uptime1d!, 90, 0.01)
    assert.approximately(stats.uptime30m!, 90, 0.1)
    const firstMinute = Math.floor((now - 30 * MIN) / MIN) * MIN
    const inWindow = Array.from({ length: 100_000 }, (_, i) => i).filter((i) => T + i * 1_728 >= firstMinute)
    assertWithinBound(stats.latency30m, inWindow.map((i) => 100 + (i % 900)))
  })

  it("an attempt older than what a ring holds at its slot is left out of that ring", () => {
    // T - 310 s is 31 ten-second buckets before T: the same slot of the 10 s ring, not of the others.
    const windows = recordAll(HealthWindows.empty(), [attempt(T), attempt(T - 310_000, { outcome: "error" })])
    const starts = (bucketMs: number) =>
      HealthWindows.buckets(windows).filter((b) => b.bucketMs === bucketMs).map((b) => b.start).sort()
    assert.deepStrictEqual(starts(HealthWindows.fine.bucketMs), [T])
    assert.deepStrictEqual(starts(HealthWindows.minute.bucketMs), [T - 6 * MIN, T])
    assert.deepStrictEqual(starts(HealthWindows.hour.bucketMs), [T - 3_600_000, T])
  })
})
