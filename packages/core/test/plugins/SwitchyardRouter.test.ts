import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import type { Task } from "../../src/catalogue/Catalogue.js"
import { makeSnapshot } from "../../src/catalogue/Catalogue.js"
import * as SwitchyardRouter from "../../src/plugins/SwitchyardRouter.js"
import { always, model, routeFor } from "./RouterFixtures.js"

const catalogue = makeSnapshot([
  model("a/cheap", 1, 0.1),
  model("a/knee", 2, 0.8),
  model("a/best", 4, 1),
  model("b/long", 3, 0.5),
  model("b/tools", 3, 0.5)
])

const rules: ReadonlyArray<SwitchyardRouter.Rule> = [
  { model: "z/missing", tasks: ["code"] },
  { model: "a/best", tasks: ["code", "math"] },
  { model: "b/tools", tools: true },
  { model: "b/long", minPromptChars: 100 }
]

const run = (
  task: Task,
  options: { text?: string; tools?: unknown; policy?: SwitchyardRouter.SwitchyardPolicyService } = {}
) =>
  Either.getOrThrow(SwitchyardRouter.choose({
    plugin: { id: "switchyard-router" },
    messages: [{ role: "user", content: options.text ?? "hi" }],
    system: "sys",
    tools: options.tools,
    catalogue,
    classifier: always(task),
    policy: options.policy ?? SwitchyardRouter.fromRules(rules),
    routerSlug: "auto",
    route: routeFor()
  }))

describe("SwitchyardRouter", () => {
  it("routes by the first matching rule whose model is routable", () => {
    expect(run("code").modelId).toBe("a/best")
    expect(run("math", { tools: [{ name: "t" }] }).modelId).toBe("a/best")
    expect(run("chat", { tools: [{ name: "t" }] }).modelId).toBe("b/tools")
    expect(run("chat", { tools: [], text: "x".repeat(97) }).modelId).toBe("b/long")
    expect(run("chat").steps.at(-1)?.summary).toContain("policy named no model; using the pareto-router's pick, a/knee")
  })

  it("counts the prompt length over the system prompt and every message's text", () => {
    expect(SwitchyardRouter.promptChars([{ role: "user", content: "abc" }, {
      role: "assistant",
      content: [
        { type: "text", text: "de" },
        { type: "tool_use", id: "t", name: "n", input: {} }
      ]
    }], [{ type: "text", text: "f" }])).toBe(6)
  })

  it("falls back to the pareto pick when the policy names a model that is not routable", () => {
    const result = run("chat", { policy: { choose: () => "auto" } })
    expect(result.modelId).toBe("a/knee")
    expect(result.steps.at(-1)?.summary).toContain("policy named auto, which is not routable")
  })

  it("passes the request's features to a custom policy", () => {
    const seen: Array<SwitchyardRouter.PolicyInput> = []
    const result = run("writing", {
      tools: [{}],
      policy: {
        choose: (input) => {
          seen.push(input)
          return input.candidates.find((c) => c.percentile === 100)?.model.id
        }
      }
    })
    expect(result.modelId).toBe("a/best")
    expect(seen[0]).toMatchObject({ task: "writing", promptChars: 5, hasTools: true })
    expect(seen[0].models.map((m) => m.id)).toEqual(["a/cheap", "a/knee", "a/best", "b/long", "b/tools"])
  })

  it.effect("provides the policy through its port", () =>
    Effect.gen(function*() {
      const policy = yield* SwitchyardRouter.SwitchyardPolicy
      expect(run("code", { policy }).modelId).toBe("a/best")
    }).pipe(Effect.provide(SwitchyardRouter.layer(rules))))

  it.effect("the default layer always defers to the pareto pick", () =>
    Effect.gen(function*() {
      const policy = yield* SwitchyardRouter.SwitchyardPolicy
      expect(run("code", { policy }).modelId).toBe("a/knee")
    }).pipe(Effect.provide(SwitchyardRouter.defaultLayer)))
})
