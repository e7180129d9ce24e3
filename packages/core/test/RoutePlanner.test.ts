import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import type { Endpoint, Model } from "../src/catalogue/Catalogue.js"
import { makeSnapshot } from "../src/catalogue/Catalogue.js"
import * as RoutePlanner from "../src/routing/RoutePlanner.js"

const endpoint = (modelId: string, provider: string, extra: Partial<Endpoint> = {}): Endpoint => ({
  id: `${modelId}@${provider}`,
  modelId,
  provider,
  upstreamModel: modelId.split("/")[1],
  pricing: { prompt: "0.000001", completion: "0.000002", request: "0", image: "0" },
  zdr: false,
  dataCollection: "allow",
  supportsVoiceCloning: false,
  supportsMultipleAudioReferences: false,
  supportsImageReference: false,
  ...extra
})

const model = (id: string, ...endpoints: Array<Endpoint>): Model => ({ id, name: id, endpoints })

const snapshot = makeSnapshot([
  model("a/one", endpoint("a/one", "p1"), endpoint("a/one", "p2", { supportedParameters: ["temperature"] })),
  model("b/two", endpoint("b/two", "p3", { inputModalities: ["text"], maxCompletionTokens: 1000 })),
  model("c/empty")
])

const none = { tools: false, images: false, documents: false }

const ids = (request: RoutePlanner.RouteRequest) =>
  Either.getOrThrow(RoutePlanner.plan(request, snapshot)).attempts.map((a) => a.endpoint.id)

describe("RoutePlanner", () => {
  it("orders the primary model's endpoints, then models, then fallbacks", () => {
    expect(ids({ model: "a/one", fallbacks: [{ model: "b/two" }], requirements: none })).toEqual([
      "a/one@p1",
      "a/one@p2",
      "b/two@p3"
    ])
    expect(ids({ model: "b/two", models: ["a/one", "b/two"], requirements: none })).toEqual([
      "b/two@p3",
      "a/one@p1",
      "a/one@p2"
    ])
  })

  it("drops endpoints that cannot serve the request and says why", () => {
    const plan = Either.getOrThrow(
      RoutePlanner.plan({ model: "a/one", requirements: { ...none, tools: true } }, snapshot)
    )
    expect(plan.attempts.map((a) => a.endpoint.id)).toEqual(["a/one@p1"])
    expect(plan.steps.some((s) => s.summary.includes("does not support tools"))).toBe(true)
  })

  it("answers 404 for an unknown model or one with no endpoints", () => {
    for (const m of ["nope/x", "c/empty"]) {
      const result = RoutePlanner.plan({ model: m, requirements: none }, snapshot)
      expect(Either.isLeft(result) && result.left._tag).toBe("NotFound")
    }
  })

  it("answers 503 naming the filter when nothing is left", () => {
    const result = RoutePlanner.plan({ model: "b/two", requirements: { ...none, images: true } }, snapshot)
    expect(Either.isLeft(result) && result.left._tag).toBe("Unavailable")
    expect(Either.isLeft(result) && result.left.message).toContain("does not accept images")
    const tooMany = RoutePlanner.plan({ model: "b/two", requirements: { ...none, maxTokens: 1001 } }, snapshot)
    expect(Either.isLeft(tooMany) && tooMany.left.message).toContain("max_tokens 1001 exceeds its limit of 1000")
    expect(ids({ model: "b/two", requirements: { ...none, maxTokens: 1000 } })).toEqual(["b/two@p3"])
  })
})
