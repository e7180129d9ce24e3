import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import type { Model } from "../../src/catalogue/Catalogue.js"
import { makeSnapshot } from "../../src/catalogue/Catalogue.js"
import * as AutoRouter from "../../src/plugins/AutoRouter.js"
import * as Candidates from "../../src/plugins/Candidates.js"
import * as ParetoRouter from "../../src/plugins/ParetoRouter.js"
import * as SwitchyardRouter from "../../src/plugins/SwitchyardRouter.js"
import * as RoutePlanner from "../../src/routing/RoutePlanner.js"
import { always, endpoint, model, routeFor } from "./RouterFixtures.js"

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

  describe("only models the route planner would plan the request on", () => {
    // The cheapest models cannot answer a text request: an embeddings-only one and a speech-only one.
    const embed: Model = {
      ...model("oa/embed", 0.000000001),
      endpoints: [{ ...endpoint("oa/embed", "0.000000001", "0", "oa"), apis: ["embeddings"] }]
    }
    const speech: Model = { ...model("loc/tts", 0), outputModalities: ["audio"] }
    const noTools: Model = {
      ...model("a/plain", 0.000001),
      endpoints: [{ ...endpoint("a/plain", "0.000001"), supportedParameters: ["temperature"] }]
    }
    const chat = model("a/chat", 0.000002)
    const dear: Model = { ...model("b/dear", 0.00001), endpoints: [endpoint("b/dear", "0.00001", "0", "q")] }
    const catalogue = makeSnapshot([embed, speech, noTools, chat, dear])
    const input = (route: Candidates.RouteFor) => ({
      messages: [{ role: "user", content: "hello" }],
      system: undefined,
      catalogue,
      classifier: always("chat"),
      routerSlug: "auto",
      route
    })
    const pool = (route: Candidates.RouteFor) => Either.getOrThrow(Candidates.start("auto-router", input(route))).pool
    const ids = (models: ReadonlyArray<Model>) => models.map((m) => m.id)

    it("keeps out the models whose endpoints do not serve the request's API, and speech-only models", () => {
      for (const api of ["chat", "responses", "messages"]) {
        expect(ids(pool(routeFor({ api })))).toEqual(["a/plain", "a/chat", "b/dear"])
      }
      expect(ids(pool(routeFor({ api: "embeddings" })))).toEqual(["oa/embed", "a/plain", "a/chat", "b/dear"])
    })

    it("applies the planner's other filters: tools, provider preferences", () => {
      expect(ids(pool(routeFor({ api: "chat", tools: true })))).toEqual(["a/chat", "b/dear"])
      expect(ids(pool(routeFor({ api: "chat" }, { only: ["Q"] })))).toEqual(["b/dear"])
    })

    it("says in a step which models the route's filters leave out", () => {
      const started = Either.getOrThrow(Candidates.start("auto-router", input(routeFor({ api: "chat" }))))
      expect(started.steps.at(-1)?.summary).toBe(
        "3 of 4 models can serve this request; the route's filters leave out [\"oa/embed\"]"
      )
    })

    it("the cheapest choice of every router is a model that can serve the request", () => {
      const route = routeFor({ api: "chat" })
      const cheapest = AutoRouter.choose({ ...input(route), plugin: { id: "auto-router", cost_quality_tradeoff: 10 } })
      expect(Either.getOrThrow(cheapest).modelId).toBe("a/plain")
      const low = AutoRouter.choose({ ...input(route), plugin: { id: "auto-router", cost_tier: "low" } })
      expect(Either.getOrThrow(low).modelId).toBe("a/plain")
      const pareto = ParetoRouter.choose({ ...input(route), plugin: { id: "pareto-router" } })
      expect(Either.getOrThrow(pareto).modelId).toBe("a/plain")
      const switchyard = SwitchyardRouter.choose({
        ...input(route),
        plugin: { id: "switchyard-router" },
        tools: undefined,
        policy: SwitchyardRouter.fromRules([{ model: "oa/embed" }])
      })
      expect(Either.getOrThrow(switchyard).modelId).toBe("a/plain")
      const pinned = AutoRouter.choose({
        ...input(route),
        messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "hey", model: "oa/embed" }, {
          role: "user",
          content: "more"
        }],
        plugin: { id: "auto-router", pin_model: true, cost_quality_tradeoff: 10 }
      })
      expect(Either.getOrThrow(pinned).modelId).toBe("a/plain")
    })

    it("refuses as the planner does when no model can serve the request", () => {
      const only = makeSnapshot([embed, speech])
      const route = routeFor({ api: "chat" })
      const result = AutoRouter.choose({ ...input(route), catalogue: only, plugin: { id: "auto-router" } })
      const planned = RoutePlanner.plan(route(embed), only)
      expect(Either.isLeft(planned)).toBe(true)
      expect(Either.isLeft(result) && result.left).toEqual(Either.isLeft(planned) && planned.left)
      expect(Either.isLeft(result) && result.left).toMatchObject({
        _tag: "InvalidRequest",
        message:
          "No endpoints found that can serve this request (api): api removed oa/embed via oa (does not serve the chat API)"
      })
    })

    it("with several models left out, the refusal names every endpoint the filters removed", () => {
      const result = ParetoRouter.choose({
        ...input(routeFor({ api: "chat", tools: true })),
        catalogue: makeSnapshot([embed, speech, noTools]),
        plugin: { id: "pareto-router" }
      })
      expect(Either.isLeft(result) && result.left).toMatchObject({
        _tag: "InvalidRequest",
        message: "No endpoints found that can serve this request (api, tools): api removed oa/embed via oa " +
          "(does not serve the chat API); tools removed a/plain via p (does not support tools)"
      })
    })

    it("allowed_models that keeps only models that cannot serve the request gets the planner's refusal", () => {
      const result = AutoRouter.choose({
        ...input(routeFor({ api: "chat" })),
        plugin: { id: "auto-router", allowed_models: ["oa/*"] }
      })
      expect(Either.isLeft(result) && result.left.message).toBe(
        "No endpoints found that can serve this request (api): api removed oa/embed via oa (does not serve the chat API)"
      )
    })
  })
})
