import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import type { Model } from "../../src/catalogue/Catalogue.js"
import { makeSnapshot } from "../../src/catalogue/Catalogue.js"
import * as Candidates from "../../src/plugins/Candidates.js"
import { endpoint, model } from "./RouterFixtures.js"

describe("Candidates", () => {
  it("puts the band edges in the upper band", () => {
    const cases: ReadonlyArray<readonly [number, Candidates.CostTier]> = [
      [0, "low"],
      [19.99, "low"],
      [20, "medium"],
      [39.99, "medium"],
      [40, "high"],
      [59.99, "high"],
      [60, "xhigh"],
      [79.99, "xhigh"],
      [80, "max"],
      [100, "max"]
    ]
    for (const [p, tier] of cases) expect(Candidates.tierOf(p)).toBe(tier)
  })

  it("computes percentiles as 100 * r / (n - 1), ties at the lower rank, a lone candidate at 0", () => {
    expect(Candidates.percentiles([])).toEqual([])
    expect(Candidates.percentiles([5])).toEqual([0])
    expect(Candidates.percentiles([6, 1, 3, 5, 4, 2])).toEqual([100, 0, 40, 80, 60, 20])
    expect(Candidates.percentiles([1, 2, 2, 3, 3])).toEqual([0, 25, 25, 75, 75])
    expect(Candidates.percentiles([7, 7, 7])).toEqual([0, 0, 0])
  })

  it("cost tier bands are exact at their edges", () => {
    // an integer formulation: rank r of n is in band floor(5r / (n - 1)), capped at 4
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 5000 }), fc.nat(), (n, r0) => {
        const r = r0 % n
        const p = (r * 100) / (n - 1)
        const band = Math.min(4, Math.floor((5 * r) / (n - 1)))
        expect(Candidates.tierOf(p)).toBe(Candidates.costTiers[band])
      }),
      { numRuns: 5000 }
    )
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 50 }), { minLength: 1, maxLength: 40 }), (costs) => {
        const pcts = Candidates.percentiles(costs)
        costs.forEach((c, i) => {
          const r = costs.filter((d) => d < c).length
          expect(pcts[i]).toBe(costs.length === 1 ? 0 : (r * 100) / (costs.length - 1))
        })
      })
    )
  })

  it("costs a model at its cheapest endpoint's prompt + completion price", () => {
    const m: Model = {
      id: "a/m",
      name: "m",
      endpoints: [endpoint("a/m", "0.000003", "0.000015"), endpoint("a/m", "0.000001", "0.000004", "q")]
    }
    expect(Candidates.modelCost(m)).toBeCloseTo(0.000005, 12)
    expect(Candidates.modelCost({ ...m, endpoints: [endpoint("a/m", "n/a")] })).toBe(Infinity)
    expect(Candidates.modelCost({ ...m, endpoints: [] })).toBe(Infinity)
  })

  it("lists routable models: with an endpoint, answering in text, not the router slug", () => {
    const snapshot = makeSnapshot([
      model("auto", 0, 1),
      model("a/x", 1),
      { id: "a/none", name: "n", endpoints: [] },
      { ...model("a/tts", 1), outputModalities: ["audio"] },
      { ...model("a/omni", 1), outputModalities: ["text", "audio"] }
    ])
    expect(Candidates.routable(snapshot, "auto").map((m) => m.id)).toEqual(["a/x", "a/omni"])
  })

  it("ranks only the models scored for the task, or all at 0.5 when none is", () => {
    const scored: Model = { ...model("a/s", 2), scores: { code: 0.9, math: 2 } }
    const plain = model("a/p", 1)
    const code = Candidates.rank([scored, plain], "code")
    expect(code.ranked).toBe(true)
    expect(code.candidates.map((c) => [c.model.id, c.score, c.percentile])).toEqual([["a/s", 0.9, 0]])
    expect(Candidates.rank([scored, plain], "math").candidates[0].score).toBe(1)
    const chat = Candidates.rank([scored, plain], "chat")
    expect(chat.ranked).toBe(false)
    expect(chat.candidates.map((c) => [c.model.id, c.score, c.percentile])).toEqual([["a/s", 0.5, 100], [
      "a/p",
      0.5,
      0
    ]])
  })
})
