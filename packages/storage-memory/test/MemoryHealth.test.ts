import { assert, describe, it } from "@effect/vitest"
import { EndpointStats, HealthWindows, SessionAffinity } from "@model-gateway/core"
import { Duration, Effect, Option, TestClock } from "effect"
import {
  attemptRecord,
  endpointStatsContract,
  sessionAffinityContract,
  T
} from "../../core/test/contract/HealthContract.js"
import { MemoryEndpointStats, MemorySessionAffinity, StorageMemory } from "../src/index.js"

endpointStatsContract("memory", MemoryEndpointStats.layer(), { footprint: MemoryEndpointStats.footprint })
endpointStatsContract("StorageMemory.layer", StorageMemory.layer(), { footprint: MemoryEndpointStats.footprint })
sessionAffinityContract("memory", MemorySessionAffinity.layer())
sessionAffinityContract("StorageMemory.layer", StorageMemory.layer())

const healthOf = (endpointId: string) =>
  Effect.flatMap(EndpointStats.EndpointStats, (stats) => Effect.map(stats.snapshot, (s) => s.get(endpointId)))

describe("MemoryEndpointStats", () => {
  it.effect("reuses computed percentiles for healthCacheTtl; outage and breaker are always current", () =>
    Effect.gen(function*() {
      const stats = yield* EndpointStats.EndpointStats
      yield* TestClock.setTime(T)
      yield* stats.record(attemptRecord({ endpointId: "e", at: T, ttfbMs: 100 }))
      assert.strictEqual((yield* healthOf("e"))!.uptime5m, 100)
      for (let i = 0; i < 3; i++) yield* stats.record(attemptRecord({ endpointId: "e", at: T, outcome: "error" }))
      const cached = (yield* healthOf("e"))!
      assert.strictEqual(cached.uptime5m, 100)
      assert.isTrue(cached.recentOutage)
      assert.strictEqual(cached.coolingDownUntil, T + 10_000)
      yield* TestClock.adjust(Duration.millis(999))
      assert.strictEqual((yield* healthOf("e"))!.uptime5m, 100)
      yield* TestClock.adjust(Duration.millis(1))
      assert.strictEqual((yield* healthOf("e"))!.uptime5m, 25)
    }).pipe(Effect.provide(MemoryEndpointStats.layer())))

  it.effect("healthCacheTtl 0 computes on every read", () =>
    Effect.gen(function*() {
      const stats = yield* EndpointStats.EndpointStats
      yield* TestClock.setTime(T)
      yield* stats.record(attemptRecord({ endpointId: "e", at: T }))
      assert.strictEqual((yield* healthOf("e"))!.uptime5m, 100)
      yield* stats.record(attemptRecord({ endpointId: "e", at: T, outcome: "timeout" }))
      assert.strictEqual((yield* healthOf("e"))!.uptime5m, 50)
    }).pipe(Effect.provide(MemoryEndpointStats.layer({ healthCacheTtl: 0 }))))

  it.effect("tracks at most healthMaxEndpoints endpoints, forgetting the one idle the longest", () =>
    Effect.gen(function*() {
      const stats = yield* EndpointStats.EndpointStats
      yield* stats.record(attemptRecord({ endpointId: "a", at: T + 2 }))
      yield* stats.record(attemptRecord({ endpointId: "b", at: T + 1 }))
      yield* stats.record(attemptRecord({ endpointId: "c", at: T + 3 }))
      yield* TestClock.setTime(T + 10)
      assert.isDefined(yield* healthOf("a"))
      assert.isUndefined(yield* healthOf("b"))
      assert.isDefined(yield* healthOf("c"))
      assert.deepStrictEqual(yield* MemoryEndpointStats.footprint, {
        endpoints: 2,
        windowBytes: 2 * HealthWindows.byteSize(HealthWindows.empty())
      })
    }).pipe(Effect.provide(MemoryEndpointStats.layer({ healthMaxEndpoints: 2 }))))

  it.effect("takes its breaker settings from the options", () =>
    Effect.gen(function*() {
      const stats = yield* EndpointStats.EndpointStats
      yield* TestClock.setTime(T)
      yield* stats.record(attemptRecord({ endpointId: "e", at: T, outcome: "error" }))
      assert.strictEqual((yield* healthOf("e"))!.coolingDownUntil, T + 1_000)
    }).pipe(Effect.provide(MemoryEndpointStats.layer({ breaker: { failureThreshold: 1, baseCooldownMs: 1_000 } }))))
})

describe("MemorySessionAffinity", () => {
  const get = (key: string) => Effect.flatMap(SessionAffinity.SessionAffinity, (s) => s.get(key))
  const set = (key: string, endpointId: string) =>
    Effect.flatMap(SessionAffinity.SessionAffinity, (s) => s.set(key, endpointId))

  it.effect("keeps at most affinityCapacity sessions, evicting the one idle the longest", () =>
    Effect.gen(function*() {
      yield* set("a", "1")
      yield* set("b", "2")
      yield* set("c", "3")
      yield* set("a", "1") // a is fresh again: b is now the idlest
      yield* set("d", "4")
      assert.deepStrictEqual(yield* get("a"), Option.some("1"))
      assert.isTrue(Option.isNone(yield* get("b")))
      assert.deepStrictEqual(yield* get("c"), Option.some("3"))
      assert.deepStrictEqual(yield* get("d"), Option.some("4"))
    }).pipe(Effect.provide(MemorySessionAffinity.layer({ affinityCapacity: 3 }))))

  it.effect("stays bounded, in constant time per set, with 300,000 sessions", () =>
    Effect.gen(function*() {
      const started = Date.now()
      for (let i = 0; i < 300_000; i++) yield* set(`session-${i}`, "e")
      assert.isBelow(Date.now() - started, 15_000)
      assert.deepStrictEqual(yield* get("session-299999"), Option.some("e"))
      assert.isTrue(Option.isNone(yield* get("session-0")))
      assert.isTrue(Option.isNone(yield* get("session-199999")))
      assert.deepStrictEqual(yield* get("session-200000"), Option.some("e"))
    }).pipe(Effect.provide(MemorySessionAffinity.layer())), { timeout: 60_000 })

  it.effect("forgets idle sessions as time passes", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      yield* set("old", "1")
      yield* TestClock.adjust(Duration.minutes(11))
      yield* set("new", "2")
      assert.isTrue(Option.isNone(yield* get("old")))
      assert.deepStrictEqual(yield* get("new"), Option.some("2"))
    }).pipe(Effect.provide(MemorySessionAffinity.layer())))
})
