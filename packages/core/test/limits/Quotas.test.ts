import { assert, describe, it } from "@effect/vitest"
import { GatewayError, QuotaCounters, Quotas, QuotaStore } from "@model-gateway/core"
import { Effect, Either, Layer } from "effect"

// The admission step over an in-test store (core's pure steps over a Map): what its refusals tell of the limits.

const T0 = Date.UTC(2024, 0, 1, 12, 0, 0)

/** A store over core's pure steps that counts its status reads, and whose reads fail when `readable` is false. */
const testStore = () => {
  const counters = new Map<string, QuotaCounters.Counters>()
  const read = (scope: string) => counters.get(scope) ?? QuotaCounters.empty()
  const state = { reads: 0, readable: true }
  const service: QuotaStore.QuotaStoreService = {
    reserve: (request) =>
      Effect.sync(() => {
        const { next, result } = QuotaStore.reserveOn(request.scopes.map(({ scope }) => read(scope)), request)
        if (next !== undefined) request.scopes.forEach(({ scope }, i) => counters.set(scope, next[i]))
        return result
      }),
    status: (scopes, now) =>
      Effect.suspend(() => {
        state.reads++
        return state.readable
          ? Effect.succeed(scopes.map(({ limits, scope }) => QuotaCounters.status(read(scope), limits, now)))
          : Effect.fail(new GatewayError.Unavailable({ message: "down" }))
      }),
    settle: () => Effect.void,
    release: () => Effect.void
  }
  return { state, layer: Quotas.layer().pipe(Layer.provide(Layer.succeed(QuotaStore.QuotaStore, service))) }
}

const scopes = [{
  scope: "key:k",
  limits: {
    requestsPerMinute: 10,
    inputTokensPerMinute: 500,
    outputTokensPerMinute: 1_000,
    budget: { nanoUsd: 1_000_000, period: "day" as const }
  }
}]

const demand = (over: Partial<Quotas.Demand> = {}): Quotas.Demand => ({
  inputTokens: 10,
  outputTokens: 100,
  outputCapped: true,
  costNanoUsd: 1_000,
  ...over
})

const refusalOf = (quotas: Quotas.QuotasService, d: Quotas.Demand, now: number) =>
  Effect.map(Effect.either(quotas.admit(scopes, d, now)), (result) => {
    if (Either.isRight(result)) throw new Error("admitted")
    return result.left
  })

describe("Quotas.admit", () => {
  it.effect("a request that can never fit is refused with what is left of the limits, and reserves nothing", () => {
    const { layer, state } = testStore()
    return Effect.gen(function*() {
      const quotas = yield* Quotas.Quotas
      yield* quotas.admit(scopes, demand(), T0)
      assert.strictEqual(state.reads, 0)
      const tooLong = yield* refusalOf(quotas, demand({ outputTokens: 1_001 }), T0 + 1_000)
      assert.strictEqual(tooLong._tag, "InvalidRequest")
      assert.strictEqual(tooLong._tag === "InvalidRequest" && tooLong.param, "max_tokens")
      const quota = (tooLong as GatewayError.InvalidRequest).quota
      assert.deepStrictEqual(quota?.requests, { limit: 10, remaining: 9, resetsAt: T0 + 60_000 })
      assert.strictEqual(quota?.outputTokens?.remaining, 900)
      assert.strictEqual(quota?.inputTokens?.remaining, 490)
      assert.strictEqual(quota?.budget?.remaining, 999_000)
      const prompt = yield* refusalOf(quotas, demand({ inputTokens: 501 }), T0 + 1_000)
      assert.strictEqual(prompt._tag === "InvalidRequest" && prompt.quota?.inputTokens?.remaining, 490)
      const dear = yield* refusalOf(quotas, demand({ costNanoUsd: 1_000_001 }), T0 + 1_000)
      assert.strictEqual(dear._tag, "BudgetExceeded")
      assert.deepStrictEqual((dear as GatewayError.BudgetExceeded).quota?.budget?.limit, 1_000_000)
      assert.strictEqual(state.reads, 3)
      // None of them took anything.
      const next = yield* quotas.admit(scopes, demand(), T0 + 1_000)
      assert.strictEqual(next.status.requests?.remaining, 8)
    }).pipe(Effect.provide(layer))
  })

  it.effect("when the store cannot be read, the refusal stands without the status", () => {
    const { layer, state } = testStore()
    state.readable = false
    return Effect.gen(function*() {
      const quotas = yield* Quotas.Quotas
      const refused = yield* refusalOf(quotas, demand({ outputTokens: 1_001 }), T0)
      assert.strictEqual(refused._tag, "InvalidRequest")
      assert.isUndefined((refused as GatewayError.InvalidRequest).quota)
      assert.match(refused.message, /max_tokens \(1001\)/)
    }).pipe(Effect.provide(layer))
  })
})
