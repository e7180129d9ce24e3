import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import type { CatalogueSnapshot } from "../../src/catalogue/Catalogue.js"
import { makeSnapshot } from "../../src/catalogue/Catalogue.js"
import * as Candidates from "../../src/plugins/Candidates.js"
import * as ParetoRouter from "../../src/plugins/ParetoRouter.js"
import { always, model, routeFor } from "./RouterFixtures.js"

const run = (catalogue: CatalogueSnapshot) =>
  ParetoRouter.choose({
    plugin: { id: "pareto-router" },
    messages: [],
    system: undefined,
    catalogue,
    classifier: always("analysis"),
    routerSlug: "auto",
    route: routeFor()
  })

const specs = fc.array(fc.tuple(fc.integer({ min: 0, max: 12 }), fc.integer({ min: 0, max: 12 })), {
  minLength: 1,
  maxLength: 25
})

const candidatesOf = (pairs: ReadonlyArray<readonly [number, number]>) =>
  Candidates.rank(pairs.map(([cost, score], i) => model(`v/m${i}`, cost, score / 12)), "analysis").candidates

describe("ParetoRouter", () => {
  it("keeps the undominated candidates, cheapest first", () => {
    const frontier = ParetoRouter.frontier(candidatesOf([[1, 2], [2, 1], [3, 6], [4, 6], [5, 9], [5, 8], [9, 12]]))
    expect(frontier.map((c) => c.model.id)).toEqual(["v/m0", "v/m2", "v/m4", "v/m6"])
  })

  it("chooses the knee of the frontier", () => {
    // frontier: (1, 0.1) (2, 0.8) (3, 0.9) (4, 1): normalised quality 0, 0.78, 0.89, 1 against rank 0, 1/3, 2/3, 1
    const catalogue = makeSnapshot([
      model("a/cheap", 1, 0.1),
      model("a/knee", 2, 0.8),
      model("a/good", 3, 0.9),
      model("a/best", 4, 1),
      model("a/dominated", 3.5, 0.5),
      model("auto", 0, 1)
    ])
    const result = Either.getOrThrow(run(catalogue))
    expect(result.modelId).toBe("a/knee")
    expect(result.task).toBe("analysis")
    expect(result.steps.at(-1)?.summary).toContain("4 of 5 candidates on the cost/quality frontier")
  })

  it("takes the cheaper end of a two-point frontier and a lone point as is", () => {
    expect(Either.getOrThrow(run(makeSnapshot([model("a/x", 1, 0.1), model("a/y", 2, 0.9)]))).modelId).toBe("a/x")
    expect(Either.getOrThrow(run(makeSnapshot([model("a/x", 1, 0.9), model("a/y", 2, 0.1)]))).modelId).toBe("a/x")
  })

  it("fails with Unavailable when nothing is routable", () => {
    const result = run(makeSnapshot([]))
    expect(Either.isLeft(result) && result.left._tag).toBe("Unavailable")
  })

  it("never chooses a dominated model", () => {
    fc.assert(
      fc.property(specs, (pairs) => {
        const candidates = candidatesOf(pairs)
        const id = Either.getOrThrow(run(makeSnapshot(candidates.map((c) => c.model)))).modelId
        const chosen = candidates.find((c) => c.model.id === id)!
        for (const other of candidates) expect(ParetoRouter.dominates(other, chosen)).toBe(false)
      }),
      { numRuns: 500 }
    )
  })

  it("the frontier is exactly the undominated candidates", () => {
    fc.assert(
      fc.property(specs, (pairs) => {
        const candidates = candidatesOf(pairs)
        const frontier = new Set(ParetoRouter.frontier(candidates))
        for (const c of candidates) {
          const dominated = candidates.some((o) => ParetoRouter.dominates(o, c))
          expect(frontier.has(c)).toBe(!dominated)
        }
      }),
      { numRuns: 500 }
    )
  })
})
