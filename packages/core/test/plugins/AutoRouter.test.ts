import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import type { CatalogueSnapshot, Model } from "../../src/catalogue/Catalogue.js"
import { makeSnapshot } from "../../src/catalogue/Catalogue.js"
import * as AutoRouter from "../../src/plugins/AutoRouter.js"
import type { CostTier } from "../../src/plugins/Candidates.js"
import * as TaskClassifier from "../../src/plugins/TaskClassifier.js"
import { always, model, routeFor } from "./RouterFixtures.js"

const run = (
  catalogue: CatalogueSnapshot,
  plugin: AutoRouter.AutoRouterPlugin = { id: "auto-router" },
  messages: unknown = [{ role: "user", content: "hello" }]
) =>
  AutoRouter.choose({
    plugin,
    messages,
    system: undefined,
    catalogue,
    classifier: always("chat"),
    routerSlug: "auto",
    route: routeFor()
  })

const chosen = (...args: Parameters<typeof run>) => Either.getOrThrow(run(...args)).modelId

/** n models `m<i>` with distinct costs i, so that model i sits at percentile 100 * i / (n - 1). */
const ladder = (n: number, score: (i: number) => number): CatalogueSnapshot =>
  makeSnapshot(Array.from({ length: n }, (_, i) => model(`v/m${i}`, i + 1, score(i))))

const tiered = (catalogue: CatalogueSnapshot, cost_tier: CostTier) =>
  chosen(catalogue, { id: "auto-router", cost_tier })

describe("AutoRouter", () => {
  it("reports the classified task and names the chosen model", () => {
    const catalogue = makeSnapshot([{ ...model("a/coder", 5), scores: { code: 0.9 } }, model("b/other", 1, 0.5)])
    const result = Either.getOrThrow(
      AutoRouter.choose({
        plugin: { id: "auto-beta-router", cost_quality_tradeoff: 0 },
        messages: [{ role: "user", content: "```js\nconsole.log(1)\n```" }],
        system: undefined,
        catalogue,
        classifier: TaskClassifier.keywords,
        routerSlug: "auto",
        route: routeFor()
      })
    )
    expect(result.task).toBe("code")
    expect(result.modelId).toBe("a/coder")
    expect(result.steps[0]).toEqual({
      type: "plugin",
      name: "auto-beta-router",
      summary: "classified the conversation as code"
    })
    expect(result.steps.at(-1)?.summary).toContain("cost_quality_tradeoff 0")
  })

  it("never routes to the router slug itself or to a model without endpoints", () => {
    const catalogue = makeSnapshot([
      model("auto", 0, 1),
      { id: "z/none", name: "z", endpoints: [] },
      model("a/x", 9, 0.1)
    ])
    expect(chosen(catalogue)).toBe("a/x")
  })

  describe("cost_tier", () => {
    it("chooses within the band, exact at 0, 20, 40, 60, 80 and 100", () => {
      // six models at percentiles 0, 20, 40, 60, 80, 100
      const better = ladder(6, (i) => i / 10)
      expect(tiered(better, "low")).toBe("v/m0")
      expect(tiered(better, "medium")).toBe("v/m1")
      expect(tiered(better, "high")).toBe("v/m2")
      expect(tiered(better, "xhigh")).toBe("v/m3")
      expect(tiered(better, "max")).toBe("v/m5")
      const worse = ladder(6, (i) => 1 - i / 10)
      expect(tiered(worse, "max")).toBe("v/m4")
    })

    it("puts 19.99 in low and 20 in medium", () => {
      // 10001 models: model i at percentile i / 100
      const better = ladder(10001, (i) => i / 10000)
      expect(tiered(better, "low")).toBe("v/m1999")
      expect(tiered(better, "medium")).toBe("v/m3999")
      const worse = ladder(10001, (i) => 1 - i / 10000)
      expect(tiered(worse, "medium")).toBe("v/m2000")
      expect(tiered(worse, "max")).toBe("v/m8000")
    })

    it("falls back to the nearest non-empty band, ties to the cheaper, and says so", () => {
      const two = ladder(2, (i) => i)
      const result = Either.getOrThrow(run(two, { id: "auto-router", cost_tier: "medium" }))
      expect(result.modelId).toBe("v/m0")
      expect(result.steps.at(-1)?.summary).toContain("using the nearest band, low")
      expect(tiered(two, "xhigh")).toBe("v/m1")
      const three = ladder(3, (i) => i / 10) // percentiles 0, 50, 100
      expect(tiered(three, "medium")).toBe("v/m0")
      expect(tiered(three, "xhigh")).toBe("v/m1")
    })

    it("wins over cost_quality_tradeoff", () => {
      const catalogue = ladder(6, (i) => i / 10)
      expect(chosen(catalogue, { id: "auto-router", cost_tier: "max", cost_quality_tradeoff: 10 })).toBe("v/m5")
      expect(chosen(catalogue, { id: "auto-router", cost_tier: "low", cost_quality_tradeoff: 0 })).toBe("v/m0")
    })

    it("always chooses a candidate of the requested band when it is not empty", () => {
      fc.assert(
        fc.property(
          fc.array(fc.tuple(fc.integer({ min: 0, max: 20 }), fc.double({ min: 0, max: 1, noNaN: true })), {
            minLength: 1,
            maxLength: 30
          }),
          fc.constantFrom<CostTier>("low", "medium", "high", "xhigh", "max"),
          (specs, tier) => {
            const models = specs.map(([cost, score], i) => model(`v/m${i}`, cost, score))
            const costs = specs.map(([cost]) => cost)
            const n = costs.length
            const pct = (c: number) => n === 1 ? 0 : (costs.filter((d) => d < c).length * 100) / (n - 1)
            const lo = ["low", "medium", "high", "xhigh", "max"].indexOf(tier) * 20
            const inBand = (c: number) => pct(c) >= lo && (tier === "max" ? pct(c) <= 100 : pct(c) < lo + 20)
            const id = chosen(makeSnapshot(models), { id: "auto-router", cost_tier: tier })
            const i = Number(id.slice(3))
            if (costs.some(inBand)) {
              expect(inBand(costs[i])).toBe(true)
              for (const [j, [c, s]] of specs.entries()) {
                if (j !== i && inBand(c)) expect(s).toBeLessThanOrEqual(specs[i][1])
              }
            }
          }
        )
      )
    })
  })

  describe("cost_quality_tradeoff", () => {
    const catalogue = makeSnapshot([
      model("a/cheap", 1, 0.2),
      model("a/mid", 5, 0.7),
      model("a/best", 20, 0.95),
      model("a/best-dear", 40, 0.95)
    ])

    it("chooses the best score at 0 and the cheapest at 10", () => {
      expect(chosen(catalogue, { id: "auto-router", cost_quality_tradeoff: 0 })).toBe("a/best")
      expect(chosen(catalogue, { id: "auto-router", cost_quality_tradeoff: 10 })).toBe("a/cheap")
    })

    it("defaults to 9", () => {
      const result = Either.getOrThrow(run(catalogue))
      expect(result.steps.at(-1)?.summary).toContain("cost_quality_tradeoff 9 (default)")
      expect(result.modelId).toBe(chosen(catalogue, { id: "auto-router", cost_quality_tradeoff: 9 }))
    })

    it("extremes: 0 maximises the score, 10 minimises the cost", () => {
      fc.assert(
        fc.property(
          fc.array(fc.tuple(fc.integer({ min: 0, max: 10 }), fc.integer({ min: 0, max: 10 })), {
            minLength: 1,
            maxLength: 20
          }),
          (specs) => {
            const models: Array<Model> = specs.map(([cost, score], i) => model(`v/m${i}`, cost, score / 10))
            const snap = makeSnapshot(models)
            const q = Number(chosen(snap, { id: "auto-router", cost_quality_tradeoff: 0 }).slice(3))
            const c = Number(chosen(snap, { id: "auto-router", cost_quality_tradeoff: 10 }).slice(3))
            const maxScore = Math.max(...specs.map(([, s]) => s))
            const minCost = Math.min(...specs.map(([cost]) => cost))
            expect(specs[q][1]).toBe(maxScore)
            expect(specs[q][0]).toBe(Math.min(...specs.filter(([, s]) => s === maxScore).map(([cost]) => cost)))
            expect(specs[c][0]).toBe(minCost)
            expect(specs[c][1]).toBe(Math.max(...specs.filter(([cost]) => cost === minCost).map(([, s]) => s)))
          }
        )
      )
    })
  })

  describe("allowed_models and excluded_models", () => {
    const catalogue = makeSnapshot([
      model("openai/gpt", 10, 0.9),
      model("openai/gpt-mini", 1, 0.5),
      model("x/y", 2, 0.8)
    ])

    it("filters by allowed then excluded", () => {
      expect(chosen(catalogue, { id: "auto-router", allowed_models: ["openai/*"], cost_quality_tradeoff: 0 })).toBe(
        "openai/gpt"
      )
      expect(
        chosen(catalogue, {
          id: "auto-router",
          allowed_models: ["openai/*"],
          excluded_models: ["openai/gpt"],
          cost_quality_tradeoff: 0
        })
      ).toBe("openai/gpt-mini")
    })

    it("names allowed_models when it matches nothing", () => {
      const error = Either.getLeft(run(catalogue, { id: "auto-router", allowed_models: ["anthropic/*"] }))
      expect(error._tag === "Some" && error.value).toMatchObject({
        _tag: "InvalidRequest",
        param: "plugins.allowed_models"
      })
      expect(error._tag === "Some" && error.value.message).toContain(
        "allowed_models [\"anthropic/*\"] matches none of the 3 available models"
      )
    })

    it("names excluded_models when it removes every allowed model", () => {
      const result = AutoRouter.choose({
        plugin: { id: "auto-router", allowed_models: ["openai/*"], excluded_models: ["*gpt*"] },
        messages: [],
        system: undefined,
        catalogue,
        classifier: always("chat"),
        routerSlug: "auto",
        route: routeFor(),
        param: "plugins[1]"
      })
      expect(Either.isLeft(result) && result.left).toMatchObject({
        _tag: "InvalidRequest",
        param: "plugins[1].excluded_models"
      })
      expect(Either.isLeft(result) && result.left.message).toContain("excludes every model that allowed_models")
    })

    it("fails with Unavailable when the catalogue has nothing to route to", () => {
      const result = run(makeSnapshot([model("auto", 1, 1)]))
      expect(Either.isLeft(result) && result.left._tag).toBe("Unavailable")
    })

    it("exclusion always beats allowance", () => {
      fc.assert(
        fc.property(
          fc.uniqueArray(fc.constantFrom("a/1", "a/2", "b/1", "b/2", "c/x"), { minLength: 1 }),
          fc.subarray(["a/*", "b/*", "*", "*1", "c/x", "a/1"]),
          fc.subarray(["a/*", "b/*", "*2", "c/x", "a/1"], { minLength: 1 }),
          fc.integer({ min: 0, max: 10 }),
          (ids, allowed, excluded, t) => {
            const snap = makeSnapshot(ids.map((id, i) => model(id, i + 1, 0.1 * i)))
            const result = run(snap, {
              id: "auto-router",
              allowed_models: allowed,
              excluded_models: excluded,
              cost_quality_tradeoff: t
            })
            if (Either.isRight(result)) {
              for (const pattern of excluded) {
                expect(new RegExp(`^${pattern.replace("*", ".*")}$`).test(result.right.modelId)).toBe(false)
              }
            } else expect(result.left._tag).toBe("InvalidRequest")
          }
        )
      )
    })
  })

  describe("pin_model", () => {
    const catalogue = makeSnapshot([model("a/best", 10, 0.9), model("a/cheap", 1, 0.1), model("b/other", 5, 0.5)])
    const conversation = (pinned: string | undefined) => [
      { role: "user", content: "hi" },
      { role: "assistant", content: "hello", ...(pinned === undefined ? {} : { model: pinned }) },
      { role: "user", content: "and now?" }
    ]

    it("reuses the model of the latest assistant message when it is a candidate", () => {
      const result = Either.getOrThrow(run(catalogue, { id: "auto-router", pin_model: true }, conversation("b/other")))
      expect(result.modelId).toBe("b/other")
      expect(result.steps.at(-1)?.summary).toBe("pin_model: reusing b/other, the model of the latest assistant message")
    })

    it("chooses afresh when the pinned model is excluded, unknown or absent, or pin_model is off", () => {
      const excluded = run(
        catalogue,
        { id: "auto-router", pin_model: true, excluded_models: ["b/*"], cost_quality_tradeoff: 10 },
        conversation("b/other")
      )
      expect(Either.getOrThrow(excluded).modelId).toBe("a/cheap")
      expect(Either.getOrThrow(excluded).steps.map((s) => s.summary)).toContain(
        "pin_model: b/other is not a candidate; choosing afresh"
      )
      expect(chosen(catalogue, { id: "auto-router", pin_model: true, cost_quality_tradeoff: 0 }, conversation("zz/q")))
        .toBe("a/best")
      expect(
        chosen(catalogue, { id: "auto-router", pin_model: true, cost_quality_tradeoff: 0 }, conversation(undefined))
      )
        .toBe("a/best")
      expect(chosen(catalogue, { id: "auto-router", cost_quality_tradeoff: 0 }, conversation("b/other"))).toBe("a/best")
    })

    it("only looks at the latest assistant message", () => {
      const messages = [
        { role: "assistant", content: "x", model: "b/other" },
        { role: "assistant", content: "y" },
        { role: "user", content: "z" }
      ]
      expect(AutoRouter.latestAssistantModel(messages)).toBeUndefined()
      expect(AutoRouter.latestAssistantModel(messages.slice(0, 1))).toBe("b/other")
    })

    it("is not applied by auto-beta-router", () => {
      const plugin = {
        id: "auto-beta-router",
        pin_model: true,
        cost_quality_tradeoff: 0
      } as unknown as AutoRouter.AutoRouterPlugin
      expect(chosen(catalogue, plugin, conversation("b/other"))).toBe("a/best")
    })
  })
})
