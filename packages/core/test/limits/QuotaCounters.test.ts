import { assert, describe, it } from "@effect/vitest"
import { Limits, QuotaCounters, Quotas, QuotaStore } from "@model-gateway/core"

const T0 = Date.UTC(2024, 0, 1, 12, 0, 0) // a Monday, on a whole minute
const one = (over: Partial<Limits.Amounts> = {}): Limits.Amounts => ({
  requests: 1,
  inputTokens: 0,
  outputTokens: 0,
  costNanoUsd: 0,
  ...over
})

/** Reserves `amounts` at `now` if they fit; the new counters, or the refusal. */
const take = (counters: QuotaCounters.Counters, limits: Limits.Limits, amounts: Limits.Amounts, now: number) => {
  const refusal = QuotaCounters.check(counters, limits, amounts, now)
  return refusal === undefined ? QuotaCounters.add(counters, limits, amounts, now) : refusal
}

const counted = (x: QuotaCounters.Counters | QuotaCounters.Refusal): QuotaCounters.Counters => {
  if ("_tag" in x) throw new Error(`refused: ${JSON.stringify(x)}`)
  return x
}

describe("QuotaCounters", () => {
  it("takes requests up to exactly the limit, and refuses one more until its minute has passed", () => {
    const limits: Limits.Limits = { requestsPerMinute: 3 }
    let c = QuotaCounters.empty()
    for (let i = 0; i < 3; i++) c = counted(take(c, limits, one(), T0 + 250))
    assert.strictEqual(QuotaCounters.used(c, "requests", T0 + 250), 3)
    const refused = take(c, limits, one(), T0 + 250)
    assert.deepStrictEqual(refused, { _tag: "RateLimited", metric: "requests", limit: 3, retryAfterMs: 59_750 })
    assert.strictEqual((take(c, limits, one(), T0 + 59_999) as QuotaCounters.Refusal)._tag, "RateLimited")
    // The bucket of second T0 leaves the window at T0 + 60 s.
    counted(take(c, limits, one(), T0 + 60_000))
  })

  it("counts tokens to the limit: exactly at the limit passes, one over fails", () => {
    const limits: Limits.Limits = { inputTokensPerMinute: 100, outputTokensPerMinute: 50 }
    let c = counted(take(QuotaCounters.empty(), limits, one({ inputTokens: 60, outputTokens: 50 }), T0))
    c = counted(take(c, limits, one({ inputTokens: 40 }), T0 + 1000))
    const refused = take(c, limits, one({ inputTokens: 1 }), T0 + 2000) as QuotaCounters.Refusal
    assert.strictEqual(refused._tag, "RateLimited")
    assert.strictEqual((refused as { metric: string }).metric, "inputTokens")
    // One token frees when the first bucket (60 tokens) leaves: at T0 + 60 s.
    assert.strictEqual((refused as { retryAfterMs: number }).retryAfterMs, 58_000)
    const out = take(c, limits, one({ outputTokens: 1 }), T0 + 2000) as QuotaCounters.Refusal
    assert.strictEqual((out as { metric: string }).metric, "outputTokens")
  })

  it("waits only as long as the oldest buckets that free enough", () => {
    const limits: Limits.Limits = { requestsPerMinute: 10 }
    let c = counted(take(QuotaCounters.empty(), limits, one({ requests: 5 }), T0))
    c = counted(take(c, limits, one({ requests: 5 }), T0 + 30_000))
    assert.strictEqual(QuotaCounters.waitFor(c, "requests", 10, 1, T0 + 40_000), 20_000)
    assert.strictEqual(QuotaCounters.waitFor(c, "requests", 10, 6, T0 + 40_000), 50_000)
    assert.strictEqual(QuotaCounters.waitFor(c, "requests", 10, 5, T0 + 60_000), 0)
  })

  it("a zero demand is not held back by a metric over its limit", () => {
    const limits: Limits.Limits = { outputTokensPerMinute: 10 }
    const c = QuotaCounters.adjust(QuotaCounters.empty(), one({ outputTokens: 50 }), T0, null, T0)
    assert.isUndefined(QuotaCounters.check(c, limits, one(), T0))
    assert.strictEqual(QuotaCounters.check(c, limits, one({ outputTokens: 1 }), T0)?._tag, "RateLimited")
  })

  it("settles a reservation in its own bucket while it counts, and an excess at now after", () => {
    const limits: Limits.Limits = { outputTokensPerMinute: 1000 }
    const c = counted(take(QuotaCounters.empty(), limits, one({ outputTokens: 500 }), T0))
    const settled = QuotaCounters.adjust(c, one({ requests: 0, outputTokens: -450 }), T0, null, T0 + 5000)
    assert.strictEqual(QuotaCounters.used(settled, "outputTokens", T0 + 5000), 50)
    assert.strictEqual(QuotaCounters.used(settled, "outputTokens", T0 + 60_000), 0)
    // A stream that ran past the window: its excess counts from when it ended.
    const late = QuotaCounters.adjust(c, one({ requests: 0, outputTokens: 200 }), T0, null, T0 + 90_000)
    assert.strictEqual(QuotaCounters.used(late, "outputTokens", T0 + 90_000), 200)
    const refund = QuotaCounters.adjust(c, one({ requests: 0, outputTokens: -200 }), T0, null, T0 + 90_000)
    assert.strictEqual(QuotaCounters.used(refund, "outputTokens", T0 + 90_000), 0)
    // Never below zero.
    const below = QuotaCounters.adjust(c, one({ requests: -5, outputTokens: -5000 }), T0, null, T0)
    assert.strictEqual(QuotaCounters.used(below, "outputTokens", T0), 0)
    assert.strictEqual(QuotaCounters.used(below, "requests", T0), 0)
  })

  it("spends a budget to exactly its amount, one nano-USD more is refused, and a new period starts afresh", () => {
    const limits: Limits.Limits = { budget: { nanoUsd: 1_000, period: "day" } }
    let c = counted(take(QuotaCounters.empty(), limits, one({ costNanoUsd: 600 }), T0))
    c = counted(take(c, limits, one({ costNanoUsd: 400 }), T0 + 1))
    const refused = take(c, limits, one({ costNanoUsd: 1 }), T0 + 2)
    assert.deepStrictEqual(refused, {
      _tag: "OverBudget",
      limitNanoUsd: 1_000,
      spentNanoUsd: 1_000,
      resetsAt: Date.UTC(2024, 0, 2)
    })
    const tomorrow = Date.UTC(2024, 0, 2)
    assert.strictEqual(QuotaCounters.spentIn(c, limits, tomorrow), 0)
    c = counted(take(c, limits, one({ costNanoUsd: 1_000 }), tomorrow))
    assert.strictEqual(c.spent, 1_000)
    // A settlement of yesterday's reservation does not touch today's spending.
    const old = QuotaCounters.adjust(c, one({ requests: 0, costNanoUsd: -300 }), T0, "d19723", tomorrow)
    assert.strictEqual(old.spent, 1_000)
  })

  it("the budget refuses before a rate does", () => {
    const limits: Limits.Limits = { requestsPerMinute: 1, budget: { nanoUsd: 10, period: "month" } }
    const c = counted(take(QuotaCounters.empty(), limits, one({ costNanoUsd: 10 }), T0))
    assert.strictEqual(QuotaCounters.check(c, limits, one({ costNanoUsd: 1 }), T0)?._tag, "OverBudget")
  })

  it("tells what is left of each limit", () => {
    const limits: Limits.Limits = { requestsPerMinute: 10, budget: { nanoUsd: 5_000_000_000, period: "week" } }
    const c = counted(take(QuotaCounters.empty(), limits, one({ costNanoUsd: 1_500_000_000 }), T0 + 2500))
    const s = QuotaCounters.status(c, limits, T0 + 3000)
    assert.deepStrictEqual(s.requests, { limit: 10, remaining: 9, resetsAt: T0 + 62_000 })
    assert.deepStrictEqual(s.budget, { limit: 5_000_000_000, remaining: 3_500_000_000, resetsAt: Date.UTC(2024, 0, 8) })
    assert.isUndefined(s.inputTokens)
  })
})

describe("Limits", () => {
  it("budget periods are UTC days, ISO weeks from Monday, and months", () => {
    assert.deepStrictEqual(Limits.periodOf("day", Date.UTC(2024, 1, 29, 23, 59)).endsAt, Date.UTC(2024, 2, 1))
    const monday = Limits.periodOf("week", Date.UTC(2024, 0, 1))
    assert.strictEqual(monday.endsAt, Date.UTC(2024, 0, 8))
    assert.strictEqual(Limits.periodOf("week", Date.UTC(2024, 0, 7, 23, 59)).id, monday.id)
    assert.notStrictEqual(Limits.periodOf("week", Date.UTC(2023, 11, 31, 23, 59)).id, monday.id)
    assert.strictEqual(Limits.periodOf("month", Date.UTC(2024, 1, 15)).endsAt, Date.UTC(2024, 2, 1))
    assert.strictEqual(Limits.periodOf("month", Date.UTC(2024, 11, 31)).endsAt, Date.UTC(2025, 0, 1))
  })

  it("USD to nano-USD exactly, rounding a fraction of a nano up", () => {
    assert.strictEqual(Limits.nanoUsdOf("1.5"), 1_500_000_000)
    assert.strictEqual(Limits.nanoUsdOf("0.000000001"), 1)
    assert.strictEqual(Limits.nanoUsdOf("0.0000000001"), 1)
    assert.strictEqual(Limits.nanoUsdOf("0.0000000010"), 1)
    assert.strictEqual(Limits.nanoUsdOf("0"), 0)
    assert.isUndefined(Limits.nanoUsdOf("-1"))
    assert.isUndefined(Limits.nanoUsdOf("1e3"))
    assert.strictEqual(Limits.usdOf(1_500_000_000), "1.5")
    assert.strictEqual(Limits.usdOf(1), "0.000000001")
    assert.strictEqual(Limits.usdOf(0), "0")
  })

  it("limits round-trip through their stored JSON", () => {
    const limits: Limits.Limits = { requestsPerMinute: 5, budget: { nanoUsd: 7, period: "week" } }
    assert.deepStrictEqual(Limits.fromJson(JSON.parse(Limits.toJson(limits)!)), {
      requestsPerMinute: 5,
      inputTokensPerMinute: undefined,
      outputTokensPerMinute: undefined,
      budget: { nanoUsd: 7, period: "week" }
    })
    assert.isNull(Limits.toJson({}))
    assert.isUndefined(Limits.fromJson({ requestsPerMinute: -1, budget: { nanoUsd: 1, period: "year" } }))
  })
})

describe("QuotaStore.reserveOn", () => {
  it("adds to every scope or to none", () => {
    const scopes = [
      { scope: "key:a", limits: { requestsPerMinute: 10 } },
      { scope: "workspace:w", limits: { requestsPerMinute: 1 } }
    ]
    const first = QuotaStore.reserveOn([QuotaCounters.empty(), QuotaCounters.empty()], {
      scopes,
      amounts: one(),
      now: T0
    })
    assert.strictEqual(first.result._tag, "Reserved")
    const second = QuotaStore.reserveOn(first.next!, { scopes, amounts: one(), now: T0 })
    assert.strictEqual(second.result._tag, "Refused")
    assert.isUndefined(second.next)
    assert.strictEqual((second.result as { scope: string }).scope, "workspace:w")
    assert.strictEqual(QuotaCounters.used(first.next![0], "requests", T0), 1)
  })
})

describe("Quotas.amountsOf", () => {
  const scopes = [{
    scope: "key:k",
    limits: { outputTokensPerMinute: 1000, inputTokensPerMinute: 500, budget: { nanoUsd: 10, period: "day" as const } }
  }]
  const demand = (over: Partial<Quotas.Demand>): Quotas.Demand => ({
    inputTokens: 10,
    outputTokens: 100,
    outputCapped: true,
    costNanoUsd: 1,
    ...over
  })

  it("an output cap at the limit fits; above it, the request can never be served (400)", () => {
    assert.strictEqual((Quotas.amountsOf(scopes, demand({ outputTokens: 1000 })) as Limits.Amounts).outputTokens, 1000)
    const never = Quotas.amountsOf(scopes, demand({ outputTokens: 1001 }))
    assert.strictEqual((never as { _tag: string })._tag, "InvalidRequest")
    assert.strictEqual((never as { param: string }).param, "max_tokens")
  })

  it("names the field the client set its cap in, when it can never fit", () => {
    const never = Quotas.amountsOf(scopes, demand({ outputTokens: 1001, outputField: "max_output_tokens" }))
    assert.strictEqual((never as { param: string }).param, "max_output_tokens")
    assert.match(
      (never as { message: string }).message,
      /^max_output_tokens \(1001\) is more than .*lower max_output_tokens$/
    )
  })

  it("an output cap the client did not set is lowered to the limit", () => {
    const amounts = Quotas.amountsOf(scopes, demand({ outputTokens: 4096, outputCapped: false })) as Limits.Amounts
    assert.strictEqual(amounts.outputTokens, 1000)
  })

  it("a prompt above the input limit is a 400, a cost above the whole budget a 402", () => {
    assert.strictEqual(
      (Quotas.amountsOf(scopes, demand({ inputTokens: 501 })) as { _tag: string })._tag,
      "InvalidRequest"
    )
    assert.strictEqual(
      (Quotas.amountsOf(scopes, demand({ costNanoUsd: 11 })) as { _tag: string })._tag,
      "BudgetExceeded"
    )
    assert.strictEqual((Quotas.amountsOf(scopes, demand({ costNanoUsd: 10 })) as Limits.Amounts).costNanoUsd, 10)
  })
})
