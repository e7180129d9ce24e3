/**
 * The contract of the `QuotaStore` port, run against every adapter (in-process, SQLite, PostgreSQL, Redis): each
 * adapter's test calls `quotaStoreContract` with its layer. Every test uses scopes of its own, so the layer is shared.
 */
import { assert, describe, layer as layerTest } from "@effect/vitest"
import type { Limits } from "@model-gateway/core"
import { QuotaCounters, QuotaStore } from "@model-gateway/core"
import type { Layer } from "effect"
import { Effect } from "effect"

const T0 = Date.UTC(2024, 0, 1, 12, 0, 0)

const unique = (prefix: string) => `${prefix}:${globalThis.crypto.randomUUID()}`

const amounts = (over: Partial<Limits.Amounts> = {}): Limits.Amounts => ({
  requests: 1,
  inputTokens: 0,
  outputTokens: 0,
  costNanoUsd: 0,
  ...over
})

const reserved = (result: QuotaStore.ReserveResult): QuotaStore.Reservation => {
  if (result._tag !== "Reserved") throw new Error(`refused: ${JSON.stringify(result)}`)
  return result.reservation
}

/** Defines a `describe` block that checks the `QuotaStore` contract against `layer`. */
export const quotaStoreContract = (name: string, layer: Layer.Layer<QuotaStore.QuotaStore, unknown>): void =>
  layerTest(layer, { excludeTestServices: true, timeout: "60 seconds" })(`quota store contract: ${name}`, (it) => {
    describe("reserve", () => {
      it.effect("takes requests up to exactly the limit, then refuses with the time until the window has room", () =>
        Effect.gen(function*() {
          const store = yield* QuotaStore.QuotaStore
          const scopes = [{ scope: unique("key"), limits: { requestsPerMinute: 3 } }]
          for (let i = 0; i < 3; i++) {
            const result = yield* store.reserve({ scopes, amounts: amounts(), now: T0 + 250 })
            assert.strictEqual(result._tag, "Reserved")
            assert.strictEqual(result.status[0].requests?.remaining, 2 - i)
          }
          const refused = yield* store.reserve({ scopes, amounts: amounts(), now: T0 + 250 })
          assert.strictEqual(refused._tag, "Refused")
          if (refused._tag !== "Refused") return
          assert.deepStrictEqual(refused.refusal, {
            _tag: "RateLimited",
            metric: "requests",
            limit: 3,
            retryAfterMs: 59_750
          })
          assert.strictEqual(refused.status[0].requests?.remaining, 0)
          assert.strictEqual((yield* store.reserve({ scopes, amounts: amounts(), now: T0 + 60_000 }))._tag, "Reserved")
        }))

      it.effect("concurrent reservations never take more than the limit", () =>
        Effect.gen(function*() {
          const store = yield* QuotaStore.QuotaStore
          const scopes = [
            { scope: unique("key"), limits: { requestsPerMinute: 20 } },
            { scope: unique("workspace"), limits: { outputTokensPerMinute: 100_000 } }
          ]
          const results = yield* Effect.forEach(
            Array.from({ length: 60 }, () => 0),
            () => store.reserve({ scopes, amounts: amounts({ outputTokens: 10 }), now: T0 }),
            { concurrency: "unbounded" }
          )
          assert.strictEqual(results.filter((r) => r._tag === "Reserved").length, 20)
          const after = yield* store.reserve({ scopes: [scopes[1]], amounts: amounts(), now: T0 })
          assert.strictEqual(after._tag === "Reserved" && after.status[0].outputTokens?.remaining, 100_000 - 200)
        }))

      it.effect("a refusal by one scope adds nothing to the others", () =>
        Effect.gen(function*() {
          const store = yield* QuotaStore.QuotaStore
          const key = { scope: unique("key"), limits: { requestsPerMinute: 5 } }
          const workspace = { scope: unique("workspace"), limits: { requestsPerMinute: 1 } }
          reserved(yield* store.reserve({ scopes: [key, workspace], amounts: amounts(), now: T0 }))
          const refused = yield* store.reserve({ scopes: [key, workspace], amounts: amounts(), now: T0 })
          assert.strictEqual(refused._tag === "Refused" && refused.scope, workspace.scope)
          const alone = yield* store.reserve({ scopes: [key], amounts: amounts(), now: T0 })
          assert.strictEqual(alone._tag === "Reserved" && alone.status[0].requests?.remaining, 3)
        }))

      it.effect("spends a budget to exactly its amount", () =>
        Effect.gen(function*() {
          const store = yield* QuotaStore.QuotaStore
          const scopes = [{ scope: unique("key"), limits: { budget: { nanoUsd: 3_000, period: "day" as const } } }]
          for (let i = 0; i < 3; i++) {
            reserved(yield* store.reserve({ scopes, amounts: amounts({ costNanoUsd: 1_000 }), now: T0 + i }))
          }
          const refused = yield* store.reserve({ scopes, amounts: amounts({ costNanoUsd: 1 }), now: T0 + 5 })
          assert.strictEqual(refused._tag === "Refused" && refused.refusal._tag, "OverBudget")
          // The next day starts afresh.
          reserved(
            yield* store.reserve({ scopes, amounts: amounts({ costNanoUsd: 3_000 }), now: Date.UTC(2024, 0, 2) })
          )
        }))
    })

    describe("status", () => {
      it.effect("tells what is left as a reservation's status does, without reserving anything", () =>
        Effect.gen(function*() {
          const store = yield* QuotaStore.QuotaStore
          const key = {
            scope: unique("key"),
            limits: {
              requestsPerMinute: 5,
              outputTokensPerMinute: 1_000,
              budget: { nanoUsd: 10_000, period: "day" as const }
            }
          }
          const workspace = { scope: unique("workspace"), limits: { inputTokensPerMinute: 100 } }
          const scopes = [key, workspace]
          assert.deepStrictEqual(
            yield* store.status(scopes, T0 + 500),
            scopes.map(({ limits }) => QuotaCounters.status(QuotaCounters.empty(), limits, T0 + 500))
          )
          const result = yield* store.reserve({
            scopes,
            amounts: amounts({ inputTokens: 40, outputTokens: 300, costNanoUsd: 2_500 }),
            now: T0 + 1_000
          })
          assert.strictEqual(result._tag, "Reserved")
          assert.deepStrictEqual(yield* store.status(scopes, T0 + 1_000), result.status)
          // Reading took nothing: the same again, and a reservation after it sees only the first.
          assert.deepStrictEqual(yield* store.status(scopes, T0 + 1_000), result.status)
          const next = yield* store.reserve({ scopes, amounts: amounts(), now: T0 + 1_000 })
          assert.strictEqual(next._tag === "Reserved" && next.status[0].requests?.remaining, 3)
          // A minute on, the window is empty again; the day's spending is not.
          const later = yield* store.status(scopes, T0 + 62_000)
          assert.strictEqual(later[0].requests?.remaining, 5)
          assert.strictEqual(later[0].outputTokens?.remaining, 1_000)
          assert.strictEqual(later[0].budget?.remaining, 7_500)
          assert.strictEqual(later[1].inputTokens?.remaining, 100)
        }))
    })

    describe("settle and release", () => {
      it.effect("settling to less usage gives the rest back", () =>
        Effect.gen(function*() {
          const store = yield* QuotaStore.QuotaStore
          const scopes = [{
            scope: unique("key"),
            limits: { outputTokensPerMinute: 1_000, budget: { nanoUsd: 1_000_000, period: "month" as const } }
          }]
          const reservation = reserved(
            yield* store.reserve({ scopes, amounts: amounts({ outputTokens: 1_000, costNanoUsd: 900_000 }), now: T0 })
          )
          const full = yield* store.reserve({ scopes, amounts: amounts({ outputTokens: 1 }), now: T0 + 10 })
          assert.strictEqual(full._tag, "Refused")
          yield* store.settle(reservation, amounts({ outputTokens: 100, costNanoUsd: 100_000 }), T0 + 1_000)
          const after = yield* store.reserve({
            scopes,
            amounts: amounts({ outputTokens: 900, costNanoUsd: 900_000 }),
            now: T0 + 2_000
          })
          assert.strictEqual(after._tag, "Reserved")
          assert.strictEqual(after.status[0].budget?.remaining, 0)
          assert.strictEqual(after.status[0].outputTokens?.remaining, 0)
        }))

      it.effect("settling to more usage counts the excess", () =>
        Effect.gen(function*() {
          const store = yield* QuotaStore.QuotaStore
          const scopes = [{ scope: unique("key"), limits: { inputTokensPerMinute: 100 } }]
          const reservation = reserved(yield* store.reserve({ scopes, amounts: amounts({ inputTokens: 10 }), now: T0 }))
          yield* store.settle(reservation, amounts({ inputTokens: 95 }), T0 + 500)
          const refused = yield* store.reserve({ scopes, amounts: amounts({ inputTokens: 10 }), now: T0 + 1_000 })
          assert.strictEqual(refused._tag, "Refused")
          assert.strictEqual(refused.status[0].inputTokens?.remaining, 5)
        }))

      it.effect("a release gives everything back, the request included", () =>
        Effect.gen(function*() {
          const store = yield* QuotaStore.QuotaStore
          const scopes = [{
            scope: unique("key"),
            limits: { requestsPerMinute: 1, budget: { nanoUsd: 10, period: "week" as const } }
          }]
          const reservation = reserved(yield* store.reserve({ scopes, amounts: amounts({ costNanoUsd: 10 }), now: T0 }))
          yield* store.release(reservation, T0 + 100)
          const again = yield* store.reserve({ scopes, amounts: amounts({ costNanoUsd: 10 }), now: T0 + 200 })
          assert.strictEqual(again._tag, "Reserved")
        }))
    })
  })
