import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import type { Endpoint, Model } from "../src/catalogue/Catalogue.js"
import { makeSnapshot } from "../src/catalogue/Catalogue.js"
import * as RoutePlanner from "../src/routing/RoutePlanner.js"
import { healthOf } from "./HealthFixtures.js"

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

/** Prompt and completion prices in USD per million tokens. */
const priced = (prompt: number, completion = 0, extra: Partial<Endpoint> = {}): Partial<Endpoint> => ({
  pricing: { prompt: (prompt / 1e6).toFixed(12), completion: (completion / 1e6).toFixed(12), request: "0", image: "0" },
  ...extra
})

const model = (id: string, ...endpoints: Array<Endpoint>): Model => ({ id, name: id, endpoints })

const snapshot = makeSnapshot([
  model("a/one", endpoint("a/one", "p1"), endpoint("a/one", "p2", { supportedParameters: ["temperature"] })),
  model("b/two", endpoint("b/two", "p3", { inputModalities: ["text"], maxCompletionTokens: 1000 })),
  model("c/empty")
])

const none: RoutePlanner.Requirements = { tools: false, images: false, documents: false }

/** Always 0: the weighted choice takes the cheapest endpoint (ties in catalogue order). */
const cheapest = () => 0

const ids = (
  request: RoutePlanner.RouteRequest,
  context: RoutePlanner.RouteContext = { random: cheapest },
  catalogue = snapshot
) => Either.getOrThrow(RoutePlanner.plan(request, catalogue, context)).attempts.map((a) => a.endpoint.id)

const failure = (request: RoutePlanner.RouteRequest, catalogue = snapshot) => {
  const result = RoutePlanner.plan(request, catalogue, { random: cheapest })
  if (Either.isRight(result)) throw new Error("expected the plan to fail")
  return result.left
}

const stats = (p50: number, p90 = p50) => ({ p50, p75: p50, p90, p99: p90 })

// x/m has four providers: cheap ($1/M), mid ($2/M), dear ($3/M), free ($0)
const xm = (...providers: Array<[string, number, Partial<Endpoint>?]>) =>
  makeSnapshot([model("x/m", ...providers.map(([p, price, extra]) => endpoint("x/m", p, priced(price, 0, extra))))])

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
    expect(plan.steps.some((s) => s.name === "filter" && s.summary.includes("does not support tools"))).toBe(true)
  })

  it("answers 404 for an unknown model or one with no endpoints", () => {
    for (const m of ["nope/x", "c/empty"]) {
      const result = RoutePlanner.plan({ model: m, requirements: none }, snapshot)
      expect(Either.isLeft(result) && result.left._tag).toBe("NotFound")
    }
  })

  it("answers 400 (never 503: retrying cannot help) naming each filter and what it removed when nothing is left", () => {
    const images = failure({ model: "b/two", requirements: { ...none, images: true } })
    expect(images._tag).toBe("InvalidRequest")
    expect(images.message).toBe(
      "No endpoints found that can serve this request (images): images removed b/two via p3 (does not accept images)"
    )
    expect(ids({ model: "b/two", requirements: { ...none, maxTokens: 1000 } })).toEqual(["b/two@p3"])
    const mixed = failure({ model: "a/one", requirements: { ...none, tools: true }, provider: { ignore: ["P1"] } })
    expect(mixed.message).toBe(
      "No endpoints found that can serve this request (provider.ignore, tools): provider.ignore removed a/one via p1 " +
        "(p1 is in provider.ignore); tools removed a/one via p2 (does not support tools)"
    )
  })

  it("prefers endpoints that honour max_tokens, then clamps to an endpoint's own limit (unless the model is strict)", () => {
    const catalogue = makeSnapshot([
      model(
        "m/x",
        endpoint("m/x", "small", { maxCompletionTokens: 8192 }),
        endpoint("m/x", "big", { maxCompletionTokens: 64000 })
      ),
      model("m/small", endpoint("m/small", "s1", { maxCompletionTokens: 8192, contextLength: 40000 })),
      { ...model("m/strict", endpoint("m/strict", "s2", { maxCompletionTokens: 8192 })), maxTokensPolicy: "strict" }
    ])
    const honoured = Either.getOrThrow(
      RoutePlanner.plan({ model: "m/x", requirements: { ...none, maxTokens: 32000 } }, catalogue)
    )
    expect(honoured.attempts.map((a) => [a.endpoint.provider, a.maxTokens])).toEqual([["big", undefined]])
    const clamped = Either.getOrThrow(
      RoutePlanner.plan({ model: "m/small", requirements: { ...none, maxTokens: 32000 } }, catalogue)
    )
    expect(clamped.attempts.map((a) => [a.endpoint.provider, a.maxTokens])).toEqual([["s1", 8192]])
    expect(clamped.steps).toContainEqual({
      type: "routing",
      name: "clamp",
      summary: "m/small via s1: max_tokens 32000 lowered to its limit of 8192"
    })
    // The clamped value is what the context check uses: 30,000 + 8,192 fits 40,000, 35,000 + 8,192 does not.
    expect(Either.isRight(RoutePlanner.plan({
      model: "m/small",
      requirements: { ...none, maxTokens: 32000, estimatedPromptTokens: 30000 }
    }, catalogue))).toBe(true)
    expect(
      failure({
        model: "m/small",
        requirements: { ...none, maxTokens: 32000, estimatedPromptTokens: 35000 }
      }, catalogue)._tag
    ).toBe("InvalidRequest")
    const strict = failure({ model: "m/strict", requirements: { ...none, maxTokens: 32000 } }, catalogue)
    expect(strict._tag).toBe("InvalidRequest")
    expect(strict.message).toContain("max_tokens 32000 exceeds its limit of 8192")
    // Provider preferences still apply to clamped endpoints.
    expect(
      failure({
        model: "m/small",
        requirements: { ...none, maxTokens: 32000 },
        provider: { ignore: ["s1"] }
      }, catalogue)._tag
    ).toBe("InvalidRequest")
  })

  it("skips an endpoint whose context length is too small for the estimated prompt plus max_tokens", () => {
    const catalogue = makeSnapshot([
      model("m/x", endpoint("m/x", "small", { contextLength: 8000 }), endpoint("m/x", "big", { contextLength: 200000 }))
    ])
    const plan = Either.getOrThrow(RoutePlanner.plan({
      model: "m/x",
      requirements: { ...none, maxTokens: 4000, estimatedPromptTokens: 5000 }
    }, catalogue))
    expect(plan.attempts.map((a) => a.endpoint.provider)).toEqual(["big"])
    expect(plan.steps).toContainEqual({
      type: "routing",
      name: "filter",
      summary: "m/x via small removed by context_length: an estimated prompt of 5000 tokens plus max_tokens 4000 " +
        "exceeds its context length of 8000"
    })
    expect(ids({ model: "m/x", requirements: { ...none, estimatedPromptTokens: 8000 } }, {}, catalogue)).toHaveLength(2)
    const failed = failure({ model: "m/x", requirements: { ...none, estimatedPromptTokens: 300000 } }, catalogue)
    expect(failed.message).toContain("context_length removed m/x via small")
  })

  describe("default order", () => {
    it("puts the cheaper of $1 and $3 per million first 9 times in 10 (10,000 seeded draws)", () => {
      const catalogue = xm(["dear", 3], ["cheap", 1])
      const random = RoutePlanner.seededRandom("inverse-square")
      let cheap = 0
      for (let i = 0; i < 10_000; i++) {
        const first = ids({ model: "x/m", requirements: none }, { random }, catalogue)
        if (first[0] === "x/m@cheap") cheap++
        expect(first).toHaveLength(2)
      }
      expect(cheap / 10_000).toBeGreaterThan(0.88)
      expect(cheap / 10_000).toBeLessThan(0.92)
    })

    it("follows the weighted choice with the rest by price and reports it", () => {
      const catalogue = xm(["dear", 3], ["mid", 2], ["cheap", 1])
      const plan = Either.getOrThrow(RoutePlanner.plan({ model: "x/m", requirements: none }, catalogue, {
        random: () => 0.999999
      }))
      const order = plan.attempts.map((a) => a.endpoint.provider)
      expect(order.slice(1)).toEqual(["cheap", "mid", "dear"].filter((p) => p !== order[0]))
      expect(plan.attempts[0].reason).toContain("weighted random choice by inverse square price among 3")
      expect(plan.steps.map((s) => s.name)).toEqual(["weighted", "plan"])
      expect(plan.steps.every((s) => s.type === "routing")).toBe(true)
    })

    it("treats a free endpoint as the cheapest", () => {
      const catalogue = xm(["cheap", 1], ["free", 0])
      const random = RoutePlanner.seededRandom(7)
      for (let i = 0; i < 1000; i++) {
        expect(ids({ model: "x/m", requirements: none }, { random }, catalogue)[0]).toBe("x/m@free")
      }
    })

    it("moves endpoints with a recent outage, then cooling-down ones, to the end; a half-open one keeps its place", () => {
      const catalogue = xm(["a", 1], ["b", 2], ["c", 3], ["d", 4])
      const health = healthOf({
        "x/m@a": { coolingDownUntil: 2000 },
        "x/m@b": { recentOutage: true },
        "x/m@c": { coolingDownUntil: 500, halfOpen: true }
      })
      const plan = Either.getOrThrow(
        RoutePlanner.plan({ model: "x/m", requirements: none }, catalogue, { health, random: cheapest, now: 1000 })
      )
      expect(plan.attempts.map((a) => a.endpoint.provider)).toEqual(["c", "d", "b", "a"])
      expect(plan.attempts[2].reason).toContain("recent outage, kept as a last resort")
      expect(plan.attempts[3].reason).toContain("cooling down, kept as a last resort")
      expect(plan.steps.filter((s) => s.name === "health")).toHaveLength(2)
      // once the cooldown is over, `a` is back in its place
      expect(ids({ model: "x/m", requirements: none }, { health, random: cheapest, now: 3000 }, catalogue)).toEqual([
        "x/m@a",
        "x/m@c",
        "x/m@d",
        "x/m@b"
      ])
    })

    it("tries unhealthy endpoints by price when none is stable", () => {
      const catalogue = xm(["a", 2], ["b", 1])
      const health = healthOf({ "x/m@a": { recentOutage: true }, "x/m@b": { recentOutage: true } })
      expect(ids({ model: "x/m", requirements: none }, { health }, catalogue)).toEqual(["x/m@b", "x/m@a"])
    })
  })

  describe("provider preferences", () => {
    const catalogue = makeSnapshot([
      model(
        "x/m",
        endpoint("x/m", "Alpha", priced(3, 0, { zdr: true, dataCollection: "deny", quantization: "fp8" })),
        endpoint("x/m", "beta", priced(1, 0, { supportedParameters: ["temperature", "tools"], quantization: "FP16" })),
        endpoint("x/m", "gamma", priced(2, 0, { zdr: true, dataCollection: "deny" }))
      ),
      model("y/m", endpoint("y/m", "alpha", priced(0.5)), endpoint("y/m", "delta", priced(0.1)))
    ])
    const plan = (provider: RoutePlanner.ProviderPreferences, extra: Partial<RoutePlanner.RouteRequest> = {}) =>
      ids({ model: "x/m", fallbacks: [{ model: "y/m" }], requirements: none, provider, ...extra }, {
        random: cheapest
      }, catalogue)

    it("only and ignore match provider names ignoring case", () => {
      expect(plan({ only: ["ALPHA", "Gamma"] })).toEqual(["x/m@gamma", "x/m@Alpha", "y/m@alpha"])
      expect(plan({ ignore: ["alpha", "DELTA"] })).toEqual(["x/m@beta", "x/m@gamma"])
      expect(plan({ only: [] })).toHaveLength(5)
    })

    it("order puts the listed providers first, in order, then the others; not sticky", () => {
      expect(plan({ order: ["gamma", "alpha"] })).toEqual([
        "x/m@gamma",
        "x/m@Alpha",
        "x/m@beta",
        "y/m@alpha",
        "y/m@delta"
      ])
      const sticky = Either.getOrThrow(RoutePlanner.plan(
        { model: "x/m", requirements: none, provider: { order: ["gamma"] } },
        catalogue,
        { session: { key: "s", endpointId: "x/m@beta" } }
      ))
      expect(sticky.attempts[0].endpoint.id).toBe("x/m@gamma")
      expect(sticky.steps).toContainEqual({
        type: "routing",
        name: "sticky",
        summary: "session endpoint x/m@beta not applied: provider.order is given"
      })
    })

    it("allow_fallbacks false: with order only the listed providers, without it the first endpoint of each model", () => {
      expect(plan({ order: ["gamma", "alpha"], allow_fallbacks: false })).toEqual([
        "x/m@gamma",
        "x/m@Alpha",
        "y/m@alpha"
      ])
      expect(plan({ allow_fallbacks: false })).toEqual(["x/m@beta", "y/m@delta"])
      expect(plan({ allow_fallbacks: false, sort: "price" }, { fallbacks: [] })).toEqual(["x/m@beta"])
      const failed = failure({
        model: "x/m",
        requirements: none,
        provider: { order: ["zeta"], allow_fallbacks: false }
      }, catalogue)
      expect(failed.message).toContain("provider.order removed x/m via Alpha (Alpha is not in provider.order")
    })

    it("require_parameters keeps endpoints that list every parameter the request uses", () => {
      const requirements = { ...none, parameters: ["temperature"] }
      expect(plan({ require_parameters: true }, { requirements, fallbacks: [] })).toEqual(["x/m@beta"])
      expect(plan({ require_parameters: false }, { requirements, fallbacks: [] })).toHaveLength(3)
      expect(plan({ require_parameters: true }, { fallbacks: [] })).toHaveLength(3)
      const failed = failure({
        model: "x/m",
        requirements: { ...none, parameters: ["temperature", "top_k"] },
        provider: { require_parameters: true }
      }, catalogue)
      expect(failed.message).toContain("x/m via beta (does not support top_k)")
      expect(failed.message).toContain("x/m via Alpha (does not list its supported parameters)")
    })

    it("data_collection deny, zdr and quantizations filter endpoints", () => {
      expect(plan({ data_collection: "deny" }, { fallbacks: [] })).toEqual(["x/m@gamma", "x/m@Alpha"])
      expect(plan({ data_collection: "allow" }, { fallbacks: [] })).toHaveLength(3)
      expect(plan({ zdr: true })).toEqual(["x/m@gamma", "x/m@Alpha"])
      expect(plan({ quantizations: ["fp16"] })).toEqual(["x/m@beta"])
      expect(plan({ quantizations: ["unknown"] })).toEqual(["x/m@gamma", "y/m@delta", "y/m@alpha"])
    })

    it("enforce_distillable_text keeps only the endpoints of models marked distillable; false and null do nothing", () => {
      const catalogue = makeSnapshot([
        model(
          "d/closed",
          endpoint("d/closed", "p1", priced(1)),
          endpoint("d/closed", "p2", priced(2, 0, { distillable: false }))
        ),
        model("d/open", endpoint("d/open", "p3", priced(3, 0, { distillable: true })))
      ])
      const request = (provider: RoutePlanner.ProviderPreferences, model = "d/closed") => ({
        model,
        fallbacks: [{ model: "d/open" }],
        requirements: none,
        provider
      })
      expect(ids(request({ enforce_distillable_text: true }), {}, catalogue)).toEqual(["d/open@p3"])
      for (const provider of [{ enforce_distillable_text: false }, { enforce_distillable_text: null }, {}]) {
        expect(ids(request(provider), {}, catalogue)).toEqual(["d/closed@p1", "d/closed@p2", "d/open@p3"])
      }
      const steps = Either.getOrThrow(RoutePlanner.plan(request({ enforce_distillable_text: true }), catalogue)).steps
      expect(steps).toContainEqual({
        type: "routing",
        name: "filter",
        summary: "d/closed via p1 removed by provider.enforce_distillable_text: the model is not marked distillable"
      })
      expect(steps).toContainEqual({
        type: "routing",
        name: "filter",
        summary: "d/closed via p2 removed by provider.enforce_distillable_text: the model is not marked distillable"
      })
      const alone = { model: "d/closed", requirements: none }
      const failed = failure({ ...alone, provider: { enforce_distillable_text: true } }, catalogue)
      const zdr = failure({ ...alone, provider: { zdr: true } }, catalogue)
      expect(failed._tag).toBe(zdr._tag)
      expect(failed._tag).toBe("InvalidRequest")
      expect(failed.message).toBe(
        "No endpoints found that can serve this request (provider.enforce_distillable_text): " +
          "provider.enforce_distillable_text removed d/closed via p1 (the model is not marked distillable), " +
          "d/closed via p2 (the model is not marked distillable)"
      )
      expect(
        RoutePlanner.excludedBy(catalogue.models.get("d/open")!.endpoints[0], none, { enforce_distillable_text: true })
      )
        .toBeUndefined()
    })

    it("max_price excludes endpoints above a ceiling; prompt and completion are per million tokens", () => {
      expect(plan({ max_price: { prompt: 2 } })).toEqual(["x/m@beta", "x/m@gamma", "y/m@delta", "y/m@alpha"])
      expect(plan({ max_price: { prompt: "1" } })).toEqual(["x/m@beta", "y/m@delta", "y/m@alpha"])
      expect(plan({ max_price: { completion: 0 } })).toHaveLength(5)
      const pricey = makeSnapshot([
        model(
          "z/m",
          endpoint("z/m", "a", { pricing: { prompt: "0", completion: "0.000003", request: "0.01", image: "0" } })
        )
      ])
      const request = (provider: RoutePlanner.ProviderPreferences) => ({ model: "z/m", requirements: none, provider })
      expect(failure(request({ max_price: { completion: 2.99 } }), pricey).message).toContain(
        "its completion price $3/M exceeds max_price.completion $2.99/M"
      )
      expect(failure(request({ max_price: { request: 0.001 } }), pricey).message).toContain("max_price.request")
      expect(ids(request({ max_price: { completion: 3, request: "0.01", image: 0 } }), {}, pricey)).toEqual(["z/m@a"])
    })

    it("sort by price within each model, or over all models with partition none", () => {
      expect(plan({ sort: "price" })).toEqual(["x/m@beta", "x/m@gamma", "x/m@Alpha", "y/m@delta", "y/m@alpha"])
      expect(plan({ sort: { by: "price", partition: "none" } })).toEqual([
        "y/m@delta",
        "y/m@alpha",
        "x/m@beta",
        "x/m@gamma",
        "x/m@Alpha"
      ])
    })

    it("sort by throughput and latency: p50, endpoints without stats after", () => {
      const health = healthOf({
        "x/m@Alpha": { throughput30m: stats(90), latency30m: stats(900) },
        "x/m@gamma": { throughput30m: stats(30), latency30m: stats(300) }
      })
      const run = (provider: RoutePlanner.ProviderPreferences) =>
        ids({ model: "x/m", requirements: none, provider }, { health }, catalogue)
      expect(run({ sort: "throughput" })).toEqual(["x/m@Alpha", "x/m@gamma", "x/m@beta"])
      expect(run({ sort: { by: "latency" } })).toEqual(["x/m@gamma", "x/m@Alpha", "x/m@beta"])
    })

    it("preferred_min_throughput and preferred_max_latency move endpoints that miss them after the others", () => {
      const health = healthOf({
        "x/m@beta": { throughput30m: stats(20, 10), latency30m: stats(2000, 5000) },
        "x/m@gamma": { throughput30m: stats(80, 60), latency30m: stats(500, 900) }
      })
      const run = (provider: RoutePlanner.ProviderPreferences) =>
        ids({ model: "x/m", requirements: none, provider }, { health, random: cheapest }, catalogue)
      expect(run({})).toEqual(["x/m@beta", "x/m@gamma", "x/m@Alpha"])
      expect(run({ preferred_min_throughput: 50 })).toEqual(["x/m@gamma", "x/m@Alpha", "x/m@beta"])
      expect(run({ preferred_min_throughput: { p90: 5 } })).toEqual(["x/m@beta", "x/m@gamma", "x/m@Alpha"])
      expect(run({ preferred_max_latency: { p90: 1000 } })).toEqual(["x/m@gamma", "x/m@Alpha", "x/m@beta"])
      expect(run({ preferred_max_latency: 100, sort: "price" })).toEqual(["x/m@Alpha", "x/m@beta", "x/m@gamma"])
    })

    it("maps the deprecated route: sort ranks all models together, fallback keeps them apart", () => {
      const effective = (route: RoutePlanner.Route) => RoutePlanner.effectivePreferences({ sort: "price" }, route)
      expect(plan(effective("sort")!)).toEqual(["y/m@delta", "y/m@alpha", "x/m@beta", "x/m@gamma", "x/m@Alpha"])
      expect(plan(effective("fallback")!)).toEqual(["x/m@beta", "x/m@gamma", "x/m@Alpha", "y/m@delta", "y/m@alpha"])
      expect(plan(RoutePlanner.effectivePreferences(undefined, "sort")!)[0]).toBe("y/m@delta")
    })
  })

  describe("sessions", () => {
    const catalogue = xm(["cheap", 1], ["dear", 3], ["down", 2])
    const health = healthOf({ "x/m@down": { recentOutage: true } })
    const request: RoutePlanner.RouteRequest = { model: "x/m", requirements: none }

    it("the session's endpoint goes first while it is healthy", () => {
      const plan = Either.getOrThrow(RoutePlanner.plan(request, catalogue, {
        health,
        session: { key: "w\u0000s1\u0000x/m", endpointId: "x/m@dear" }
      }))
      expect(plan.attempts.map((a) => a.endpoint.id)).toEqual(["x/m@dear", "x/m@cheap", "x/m@down"])
      expect(plan.attempts[0].reason).toContain("sticky session endpoint")
      const down = Either.getOrThrow(RoutePlanner.plan(request, catalogue, {
        health,
        session: { key: "w\u0000s1\u0000x/m", endpointId: "x/m@down" }
      }))
      expect(down.attempts[2].endpoint.id).toBe("x/m@down")
      expect(down.steps.find((s) => s.name === "sticky")?.summary).toContain("not applied: it is not healthy")
    })

    it("without a stored endpoint, the choice is derived from the session key, whatever the random source", () => {
      const firsts = new Map<string, number>()
      for (let s = 0; s < 10_000; s++) {
        const session = { key: `session-${s}` }
        const a = ids(request, { health, session, random: RoutePlanner.seededRandom(s) }, catalogue)
        const b = ids(request, { health, session, random: cheapest }, catalogue)
        expect(a).toEqual(b)
        firsts.set(a[0], (firsts.get(a[0]) ?? 0) + 1)
      }
      expect(firsts.get("x/m@cheap")! / 10_000).toBeGreaterThan(0.88)
      expect(firsts.get("x/m@cheap")! / 10_000).toBeLessThan(0.92)
      expect(firsts.get("x/m@down")).toBeUndefined()
    })
  })

  it("usedParameters names the parameters a body uses as catalogues list them", () => {
    expect(RoutePlanner.usedParameters({
      model: "m",
      max_tokens: 10,
      temperature: 0,
      top_p: 0.5,
      top_k: 3,
      stop_sequences: ["x"],
      tools: [{ name: "t" }],
      tool_choice: { type: "auto" },
      output_config: { format: { type: "json_schema", schema: {} } },
      thinking: { type: "enabled", budget_tokens: 1024 }
    })).toEqual([
      "tools",
      "tool_choice",
      "temperature",
      "top_p",
      "top_k",
      "stop",
      "max_tokens",
      "response_format",
      "reasoning"
    ])
    expect(RoutePlanner.usedParameters({ tools: [], thinking: { type: "disabled" }, output_config: {} })).toEqual([])
  })
})

describe("what a model outputs, and the API asked", () => {
  const outputs = makeSnapshot([
    { ...model("t/tts", endpoint("t/tts", "t")), outputModalities: ["audio"] },
    { ...model("e/embed", endpoint("e/embed", "e")), outputModalities: ["embeddings"] },
    model("g/gpt", endpoint("g/gpt", "g"))
  ])
  const asked = (api: string, modelId: string, extra: Partial<RoutePlanner.RouteRequest> = {}) => ({
    model: modelId,
    requirements: { ...none, api },
    ...extra
  })
  const refused = (api: string, modelId: string) => {
    const result = RoutePlanner.plan(asked(api, modelId), outputs, { random: cheapest })
    if (Either.isRight(result)) throw new Error(`expected ${modelId} on ${api} to be refused`)
    return result.left
  }

  it("refuses a speech model on embeddings with a 400 on `model` naming the speech route, before any endpoint", () => {
    const error = refused("embeddings", "t/tts")
    expect(error._tag).toBe("InvalidRequest")
    expect(error).toMatchObject({
      param: "model",
      message: "Model 't/tts' does not output embeddings (it outputs audio); send it to POST /v1/audio/speech"
    })
    expect(RoutePlanner.serves(outputs.models.get("t/tts")!, asked("embeddings", "t/tts"))).toBe(false)
  })

  it("skips a speech model as a candidate or fallback on embeddings", () => {
    const request = asked("embeddings", "g/gpt", { models: ["t/tts"], fallbacks: [{ model: "t/tts" }] })
    const planned = Either.getOrThrow(RoutePlanner.plan(request, outputs, { random: cheapest }))
    expect(planned.attempts.map((a) => a.endpoint.id)).toEqual(["g/gpt@g"])
    expect(planned.steps).toContainEqual({
      type: "routing",
      name: "skip-model",
      summary: "candidate model 't/tts' does not output embeddings"
    })
  })

  it("plans embeddings on an embeddings model and on one whose outputs are not given", () => {
    for (const id of ["e/embed", "g/gpt"]) {
      expect(ids(asked("embeddings", id), { random: cheapest }, outputs)).toEqual([`${id}@${id.split("/")[0]}`])
    }
  })

  it("refuses an embeddings model on the text APIs naming the embeddings route, a speech model naming speech", () => {
    for (const api of ["messages", "chat", "responses"]) {
      expect(refused(api, "e/embed")).toMatchObject({
        param: "model",
        message: "Model 'e/embed' does not answer in text (it outputs embeddings); send it to POST /v1/embeddings"
      })
      expect(refused(api, "t/tts")).toMatchObject({
        param: "model",
        message: "Model 't/tts' does not answer in text (it outputs audio); send it to POST /v1/audio/speech"
      })
    }
  })
})
