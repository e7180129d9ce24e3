/**
 * The contracts of the `EndpointStats` and `SessionAffinity` ports, run against every adapter: each
 * adapter package calls `endpointStatsContract` and `sessionAffinityContract` with its layer. Every
 * test builds its own instance of the layer (a fresh in-memory store; for a SQL store, a new
 * "process" over the same database) and uses endpoint ids and session keys of its own.
 *
 * Tests that move time use `TestClock`, set to `T` before the layer is built. `TestClock` runs every
 * wake-up of a background fiber on the way when it moves time, so the layer given for those tests
 * should have long background intervals (an hour); the `processes` layers, used on the live clock
 * or only while time stands still, should have short ones.
 */
import { assert, describe, it } from "@effect/vitest"
import { EndpointStats, HealthCache, HealthWindows, SessionAffinity } from "@model-gateway/core"
import type { Scope } from "effect"
import { Context, Duration, Effect, Layer, Option, TestClock } from "effect"

const unique = (prefix: string) => `${prefix}-${globalThis.crypto.randomUUID()}`

/** A fixed test time on an hour boundary (2025), well before the live clock. */
export const T = 1_749_999_600_000
const MIN = 60_000
const HOUR = 60 * MIN

/** An attempt with every field set; override what a test cares about. */
export const attemptRecord = (overrides: Partial<EndpointStats.AttemptRecord> = {}): EndpointStats.AttemptRecord => ({
  endpointId: "anthropic:claude-sonnet-4",
  at: T,
  ttfbMs: 250,
  latencyMs: 2_250,
  outputTokens: 100,
  outcome: "ok",
  ...overrides
})

/** The exact nearest-rank percentile of a sample. */
const exact = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.max(1, Math.ceil(p * sorted.length - 1e-9)) - 1]
}

const assertPercentiles = (actual: EndpointStats.Percentiles | null | undefined, values: ReadonlyArray<number>) => {
  assert.isDefined(actual)
  assert.isNotNull(actual)
  for (const [key, p] of [["p50", 0.5], ["p75", 0.75], ["p90", 0.9], ["p99", 0.99]] as const) {
    const want = exact(values, p)
    const got = actual![key]
    assert.isAtMost(Math.abs(got - want) / want, HealthWindows.RELATIVE_ERROR + 1e-9, `${key}: ${got}, exact ${want}`)
  }
}

const healthOf = (endpointId: string) =>
  Effect.flatMap(EndpointStats.EndpointStats, (stats) => Effect.map(stats.snapshot, (s) => s.get(endpointId)))

const recordAll = (attempts: ReadonlyArray<EndpointStats.AttemptRecord>) =>
  Effect.flatMap(EndpointStats.EndpointStats, (stats) => Effect.forEach(attempts, stats.record, { discard: true }))

/** Retries `check` (assertions included) every 25 ms on the live clock, for up to 25 s. */
const until = <A, E, R>(check: Effect.Effect<A, E, R>): Effect.Effect<A, unknown, R> => {
  // Generous: under the whole suite's load (every file in parallel on two cores, other files' PostgreSQL pools busy),
  // a background flush has once taken longer than 10 s; the tests' own time-out is 30 s.
  const deadline = Date.now() + 25_000
  const loop: Effect.Effect<A, unknown, R> = Effect.suspend(() => check).pipe(
    Effect.catchAllDefect((defect) => Effect.fail(defect)),
    Effect.catchAll((error) =>
      Date.now() > deadline ? Effect.fail(error) : Effect.zipRight(Effect.sleep(Duration.millis(25)), loop)
    )
  )
  return loop
}

const build = <I, S>(layer: Layer.Layer<I, unknown>, tag: Context.Tag<I, S>): Effect.Effect<S, unknown, Scope.Scope> =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, tag))

export interface EndpointStatsContractOptions {
  /** The bytes of windows the adapter holds, if it can tell: checked not to grow with traffic. */
  readonly footprint?: Effect.Effect<{ readonly windowBytes: number } | undefined, never, EndpointStats.EndpointStats>
  /** Two layers over one shared store, as two gateway processes would build them (shared adapters). */
  readonly processes?: {
    readonly a: Layer.Layer<EndpointStats.EndpointStats, unknown>
    readonly b: Layer.Layer<EndpointStats.EndpointStats, unknown>
  }
}

/** Defines a `describe` block that checks the `EndpointStats` contract against `layer`. */
export const endpointStatsContract = (
  name: string,
  layer: Layer.Layer<EndpointStats.EndpointStats, unknown>,
  options: EndpointStatsContractOptions = {}
): void => {
  describe(`EndpointStats contract: ${name}`, () => {
    const withStats = <A, E>(effect: Effect.Effect<A, E, EndpointStats.EndpointStats>) =>
      Effect.zipRight(TestClock.setTime(T), Effect.provide(effect, layer))

    it.effect("an endpoint without records is unknown", () =>
      withStats(Effect.gen(function*() {
        yield* TestClock.setTime(T)
        assert.isUndefined(yield* healthOf(unique("never-used")))
        assert.isUndefined(EndpointStats.emptySnapshot.get("x"))
      })), { timeout: 30_000 })

    it.effect(
      "percentiles of latency and throughput over 30 minutes are within the documented bound",
      () =>
        withStats(Effect.gen(function*() {
          const endpointId = unique("percentiles")
          const ttfbs = Array.from({ length: 1000 }, (_, i) => 20 + ((i * 7919) % 1000) * 3)
          const throughputs = Array.from({ length: 1000 }, (_, i) => 10 + 150 * Math.exp(-((i * 31) % 1000) / 200))
          yield* recordAll(ttfbs.map((ttfbMs, i) =>
            attemptRecord({
              endpointId,
              at: T - 25 * MIN + i * 1_200,
              ttfbMs,
              latencyMs: ttfbMs + 4_000,
              outputTokens: throughputs[i] * 4
            })
          ))
          // An attempt from an hour ago is out of the 30 minutes.
          yield* recordAll([attemptRecord({ endpointId, at: T - HOUR, ttfbMs: 90_000, latencyMs: 90_000 })])
          yield* TestClock.setTime(T)
          const health = yield* healthOf(endpointId)
          assertPercentiles(health?.latency30m, ttfbs)
          assertPercentiles(health?.throughput30m, throughputs)
          assert.strictEqual(health?.uptime30m, 100)
        })),
      { timeout: 30_000 }
    )

    it.effect(
      "uptime over 5 minutes, 30 minutes and a day; an old failure drops out of 5 m but stays in 1 d",
      () =>
        withStats(Effect.gen(function*() {
          const endpointId = unique("uptime")
          yield* recordAll([
            attemptRecord({ endpointId, at: T, outcome: "error", ttfbMs: null }),
            attemptRecord({ endpointId, at: T + 10 * MIN }),
            attemptRecord({ endpointId, at: T + 10 * MIN, outcome: "rate_limited", ttfbMs: null }),
            attemptRecord({ endpointId, at: T + 10 * MIN + 1, outcome: "timeout", ttfbMs: null }),
            attemptRecord({ endpointId, at: T + 10 * MIN + 2 })
          ])
          yield* TestClock.setTime(T + 10 * MIN + 5)
          const recent = yield* healthOf(endpointId)
          assert.approximately(recent!.uptime5m!, 200 / 3, 1e-9)
          assert.strictEqual(recent!.uptime30m, 50)
          assert.strictEqual(recent!.uptime1d, 50)

          yield* TestClock.setTime(T + 2 * HOUR)
          const later = yield* healthOf(endpointId)
          assert.isNull(later!.uptime5m)
          assert.isNull(later!.uptime30m)
          assert.isNull(later!.latency30m)
          assert.strictEqual(later!.uptime1d, 50)

          yield* TestClock.setTime(T + 26 * HOUR)
          assert.isNull((yield* healthOf(endpointId))?.uptime1d ?? null)
        })),
      { timeout: 30_000 }
    )

    it.effect("a recent outage shows for 30 seconds", () =>
      withStats(Effect.gen(function*() {
        const endpointId = unique("outage")
        const healthy = unique("healthy")
        yield* recordAll([
          attemptRecord({ endpointId, at: T, outcome: "ok" }),
          attemptRecord({ endpointId, at: T + 1_000, outcome: "error", ttfbMs: null }),
          attemptRecord({ endpointId, at: T + 2_000, outcome: "overloaded", ttfbMs: null }),
          attemptRecord({ endpointId, at: T + 3_000, outcome: "timeout", ttfbMs: null }),
          attemptRecord({ endpointId: healthy, at: T, outcome: "error", ttfbMs: null }),
          attemptRecord({ endpointId: healthy, at: T + 1_000, outcome: "error", ttfbMs: null }),
          ...Array.from({ length: 5 }, () => attemptRecord({ endpointId: healthy, at: T + 2_000 }))
        ])
        yield* TestClock.setTime(T + 4_000)
        assert.isTrue((yield* healthOf(endpointId))!.recentOutage)
        assert.isFalse((yield* healthOf(healthy))!.recentOutage)
        yield* TestClock.setTime(T + 45_000)
        assert.isFalse((yield* healthOf(endpointId))!.recentOutage)
      })), { timeout: 30_000 })

    it.effect(
      "repeated failures cool an endpoint down; after the cooldown one probe decides",
      () =>
        withStats(Effect.gen(function*() {
          const endpointId = unique("breaker")
          const fail = (at: number) => attemptRecord({ endpointId, at, outcome: "error", ttfbMs: null })
          yield* recordAll([fail(T), fail(T + 100), fail(T + 200)])
          yield* TestClock.setTime(T + 300)
          const open = yield* healthOf(endpointId)
          assert.strictEqual(open!.coolingDownUntil, T + 10_200)
          assert.isFalse(open!.halfOpen)

          yield* TestClock.setTime(T + 10_200)
          const halfOpen = yield* healthOf(endpointId)
          assert.isNull(halfOpen!.coolingDownUntil)
          assert.isTrue(halfOpen!.halfOpen)

          // The probe fails: twice as long.
          yield* recordAll([fail(T + 10_500)])
          yield* TestClock.setTime(T + 10_600)
          assert.strictEqual((yield* healthOf(endpointId))!.coolingDownUntil, T + 30_500)

          // The next probe succeeds: closed.
          yield* TestClock.setTime(T + 31_000)
          assert.isTrue((yield* healthOf(endpointId))!.halfOpen)
          yield* recordAll([attemptRecord({ endpointId, at: T + 31_000 })])
          const closed = yield* healthOf(endpointId)
          assert.isNull(closed!.coolingDownUntil)
          assert.isFalse(closed!.halfOpen)
        })),
      { timeout: 30_000 }
    )

    it.effect(
      "a half-open endpoint is the probe of one reader at a time; the others see it cooling meanwhile",
      () =>
        withStats(Effect.gen(function*() {
          const endpointId = unique("probe")
          // Three failures open the breaker for 10 s (as in the test above).
          yield* recordAll(
            [0, 100, 200].map((dt) => attemptRecord({ endpointId, at: T + dt, outcome: "error", ttfbMs: null }))
          )
          yield* TestClock.setTime(T + 10_200)
          const first = yield* healthOf(endpointId)
          assert.isTrue(first!.halfOpen)
          // Another request, while the first one's probe is out: a last resort until the probe window ends.
          yield* TestClock.setTime(T + 10_300)
          const second = yield* healthOf(endpointId)
          assert.isFalse(second!.halfOpen)
          assert.strictEqual(second!.coolingDownUntil, T + 10_200 + HealthCache.PROBE_WINDOW_MS)
          // The probe has not answered within the window: the next reader probes.
          yield* TestClock.setTime(T + 10_200 + HealthCache.PROBE_WINDOW_MS)
          assert.isTrue((yield* healthOf(endpointId))!.halfOpen)
          // It answers: closed, for every reader.
          yield* recordAll([attemptRecord({ endpointId, at: T + 10_200 + HealthCache.PROBE_WINDOW_MS })])
          for (let i = 0; i < 2; i++) {
            const closed = yield* healthOf(endpointId)
            assert.isFalse(closed!.halfOpen)
            assert.isNull(closed!.coolingDownUntil)
          }
        })),
      { timeout: 30_000 }
    )

    it.effect("an upstream Retry-After cools the endpoint down until then", () =>
      withStats(Effect.gen(function*() {
        const endpointId = unique("retry-after")
        yield* recordAll([
          attemptRecord({ endpointId, at: T, outcome: "rate_limited", ttfbMs: null, retryAfterMs: 45_000 })
        ])
        yield* TestClock.setTime(T + 1_000)
        const held = yield* healthOf(endpointId)
        assert.strictEqual(held!.coolingDownUntil, T + 45_000)
        assert.isFalse(held!.recentOutage)
        yield* TestClock.setTime(T + 45_000)
        assert.isTrue((yield* healthOf(endpointId))!.halfOpen)
      })), { timeout: 30_000 })

    it.effect(
      "memory does not grow with traffic: 100,000 attempts for one endpoint",
      () =>
        withStats(Effect.gen(function*() {
          const endpointId = unique("soak")
          const stats = yield* EndpointStats.EndpointStats
          const at = (i: number) => T + i * 1_728 // two days
          yield* stats.record(attemptRecord({ endpointId, at: at(0) }))
          const before = options.footprint === undefined ? undefined : yield* options.footprint
          for (let i = 1; i < 100_000; i++) {
            yield* stats.record(
              attemptRecord({ endpointId, at: at(i), ttfbMs: 100 + (i % 500), outcome: i % 20 === 0 ? "error" : "ok" })
            )
          }
          const after = options.footprint === undefined ? undefined : yield* options.footprint
          if (before !== undefined) assert.strictEqual(after?.windowBytes, before.windowBytes)
          yield* TestClock.setTime(at(100_000))
          const health = yield* healthOf(endpointId)
          assert.approximately(health!.uptime1d!, 95, 0.05)
          assert.approximately(health!.uptime30m!, 95, 0.5)
          assert.isAtMost(Math.abs(health!.latency30m!.p50 - 350) / 350, HealthWindows.RELATIVE_ERROR + 0.01)
        })),
      { timeout: 60_000 }
    )

    const processes = options.processes
    if (processes === undefined) return

    it.scopedLive(
      "two processes: an outage and a cooldown recorded in one are seen by the other",
      () =>
        Effect.gen(function*() {
          const a = yield* build(processes.a, EndpointStats.EndpointStats)
          const b = yield* build(processes.b, EndpointStats.EndpointStats)
          const endpointId = unique("shared-outage")
          const now = Date.now()
          for (let i = 0; i < 4; i++) {
            yield* a.record(attemptRecord({ endpointId, at: now + i, outcome: "error", ttfbMs: null }))
          }
          const seen = yield* until(Effect.map(b.snapshot, (s) => {
            const health = s.get(endpointId)
            assert.isTrue(health?.recentOutage)
            assert.isNotNull(health?.coolingDownUntil)
            return health!
          }))
          assert.strictEqual(seen.uptime5m, 0)
          assert.isAtLeast(seen.coolingDownUntil!, now + 10_000)
        }),
      { timeout: 30_000 }
    )

    it.scopedLive(
      "two processes: percentiles and uptime are computed over both processes' attempts",
      () =>
        Effect.gen(function*() {
          const a = yield* build(processes.a, EndpointStats.EndpointStats)
          const b = yield* build(processes.b, EndpointStats.EndpointStats)
          const endpointId = unique("shared-percentiles")
          const now = Date.now()
          for (let i = 0; i < 30; i++) {
            yield* a.record(attemptRecord({ endpointId, at: now + i, ttfbMs: 100 }))
            yield* b.record(attemptRecord({ endpointId, at: now + i, ttfbMs: 1_000 }))
          }
          yield* b.record(attemptRecord({ endpointId, at: now, outcome: "error", ttfbMs: null }))
          // 60 samples: the median is 100 ms (A's), the 75th percentile 1,000 ms (B's); uptime 60/61.
          const values = [...Array(30).fill(100), ...Array(30).fill(1_000)]
          for (const stats of [a, b]) {
            yield* until(Effect.map(stats.snapshot, (s) => {
              const health = s.get(endpointId)
              assertPercentiles(health?.latency30m, values)
              assert.approximately(health!.uptime30m!, 6_000 / 61, 1e-9)
              assert.approximately(health!.uptime5m!, 6_000 / 61, 1e-9)
              assert.approximately(health!.uptime1d!, 6_000 / 61, 1e-9)
            }))
          }
        }),
      { timeout: 30_000 }
    )
  })
}

export interface SessionAffinityContractOptions {
  /** Two layers over one shared store, as two gateway processes would build them (shared adapters). */
  readonly processes?: {
    readonly a: Layer.Layer<SessionAffinity.SessionAffinity, unknown>
    readonly b: Layer.Layer<SessionAffinity.SessionAffinity, unknown>
  }
}

const getKey = (key: string) => Effect.flatMap(SessionAffinity.SessionAffinity, (s) => s.get(key))
const setKey = (key: string, endpointId: string) =>
  Effect.flatMap(SessionAffinity.SessionAffinity, (s) => s.set(key, endpointId))

/** Defines a `describe` block that checks the `SessionAffinity` contract against `layer`. */
export const sessionAffinityContract = (
  name: string,
  layer: Layer.Layer<SessionAffinity.SessionAffinity, unknown>,
  options: SessionAffinityContractOptions = {}
): void => {
  describe(`SessionAffinity contract: ${name}`, () => {
    const withAffinity = <A, E>(effect: Effect.Effect<A, E, SessionAffinity.SessionAffinity>) =>
      Effect.zipRight(TestClock.setTime(T), Effect.provide(effect, layer))

    it.effect("an unknown session has no endpoint", () =>
      withAffinity(Effect.gen(function*() {
        yield* TestClock.setTime(T)
        assert.isTrue(Option.isNone(yield* getKey(unique("session"))))
      })), { timeout: 30_000 })

    it.effect("remembers the last endpoint of each session", () =>
      withAffinity(Effect.gen(function*() {
        yield* TestClock.setTime(T)
        const workspace = unique("ws")
        const one = SessionAffinity.affinityKey(workspace, "session-1", "anthropic/claude-sonnet-4")
        const two = SessionAffinity.affinityKey(workspace, "session-2", "anthropic/claude-sonnet-4")
        const otherModel = SessionAffinity.affinityKey(workspace, "session-1", "openai/gpt-5")
        yield* setKey(one, "anthropic:claude-sonnet-4")
        yield* setKey(two, "bedrock:claude-sonnet-4")
        assert.deepStrictEqual(yield* getKey(one), Option.some("anthropic:claude-sonnet-4"))
        assert.deepStrictEqual(yield* getKey(two), Option.some("bedrock:claude-sonnet-4"))
        assert.isTrue(Option.isNone(yield* getKey(otherModel)))
        yield* TestClock.adjust(Duration.seconds(1))
        yield* setKey(one, "vertex:claude-sonnet-4")
        assert.deepStrictEqual(yield* getKey(one), Option.some("vertex:claude-sonnet-4"))
        assert.deepStrictEqual(yield* getKey(two), Option.some("bedrock:claude-sonnet-4"))
      })), { timeout: 30_000 })

    it.effect(
      "expires after 10 minutes idle; set refreshes the idle time, get does not",
      () =>
        withAffinity(Effect.gen(function*() {
          yield* TestClock.setTime(T)
          const key = unique("idle")
          yield* setKey(key, "e1")
          yield* TestClock.adjust(Duration.millis(SessionAffinity.IDLE_TTL_MS - 1))
          assert.deepStrictEqual(yield* getKey(key), Option.some("e1"))
          yield* setKey(key, "e1")
          yield* TestClock.adjust(Duration.millis(SessionAffinity.IDLE_TTL_MS - 1))
          assert.deepStrictEqual(yield* getKey(key), Option.some("e1"))
          yield* TestClock.adjust(Duration.millis(1))
          assert.isTrue(Option.isNone(yield* getKey(key)))
          // Forgotten for good, and remembered again after a new set.
          assert.isTrue(Option.isNone(yield* getKey(key)))
          yield* setKey(key, "e2")
          assert.deepStrictEqual(yield* getKey(key), Option.some("e2"))
        })),
      { timeout: 30_000 }
    )

    const processes = options.processes
    if (processes === undefined) return

    it.scopedLive(
      "two processes: a session set in one is routed the same way by the other",
      () =>
        Effect.gen(function*() {
          const a = yield* build(processes.a, SessionAffinity.SessionAffinity)
          const b = yield* build(processes.b, SessionAffinity.SessionAffinity)
          const key = unique("shared-session")
          yield* a.set(key, "endpoint-a")
          yield* until(Effect.map(b.get(key), (found) => assert.deepStrictEqual(found, Option.some("endpoint-a"))))
          yield* b.set(key, "endpoint-b")
          yield* until(Effect.map(a.get(key), (found) => assert.deepStrictEqual(found, Option.some("endpoint-b"))))
        }),
      { timeout: 30_000 }
    )

    it.effect(
      "two processes: a session set in one expires after 10 minutes idle in the other",
      () =>
        Effect.gen(function*() {
          const key = unique("shared-idle")
          const getInB = Effect.scoped(
            Effect.flatMap(build(processes.b, SessionAffinity.SessionAffinity), (b) => b.get(key))
          )
          // The first process sets the session and stops (which writes what it holds). Time only moves
          // while no process runs, so no background fiber has to catch up.
          yield* TestClock.setTime(T)
          yield* Effect.scoped(
            Effect.flatMap(build(processes.a, SessionAffinity.SessionAffinity), (a) => a.set(key, "e1"))
          )
          yield* TestClock.setTime(T + SessionAffinity.IDLE_TTL_MS - 1)
          assert.deepStrictEqual(yield* getInB, Option.some("e1"))
          yield* TestClock.setTime(T + SessionAffinity.IDLE_TTL_MS)
          assert.isTrue(Option.isNone(yield* getInB))
        }),
      { timeout: 30_000 }
    )
  })
}
