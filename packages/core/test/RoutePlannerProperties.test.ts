/**
 * Property tests of the route planner over generated catalogues, health, sessions and preferences. The filters are
 * checked against an oracle written from the rules, not against the planner's own `excludedBy`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import type { Endpoint, Model } from "../src/catalogue/Catalogue.js"
import { makeSnapshot } from "../src/catalogue/Catalogue.js"
import type { EndpointHealth } from "../src/health/EndpointStats.js"
import * as RoutePlanner from "../src/routing/RoutePlanner.js"

const PROVIDERS = ["alpha", "Beta", "gamma", "DELTA", "eps"] as const
const PARAMETERS = ["tools", "temperature", "top_k", "stop", "max_tokens"] as const
const NOW = 1000

interface Generated {
  readonly endpoint: Endpoint
  /** Prompt and completion price, whole USD per million tokens. */
  readonly prompt: number
  readonly completion: number
  readonly health: EndpointHealth | undefined
}

const perToken = (perMillion: number) => (perMillion / 1e6).toFixed(8)

const stats = fc.option(
  fc.integer({ min: 1, max: 200 }).map((p50) => ({ p50, p75: p50 + 1, p90: p50 + 2, p99: p50 + 3 })),
  { nil: null }
)

const healthArb: fc.Arbitrary<EndpointHealth | undefined> = fc.option(
  fc.record({
    latency30m: stats,
    throughput30m: stats,
    uptime5m: fc.constant(null),
    uptime30m: fc.constant(null),
    uptime1d: fc.constant(null),
    recentOutage: fc.boolean(),
    coolingDownUntil: fc.constantFrom(null, null, 500, 2000),
    halfOpen: fc.boolean()
  }),
  { nil: undefined }
)

const endpointArb = (modelId: string, index: number): fc.Arbitrary<Generated> =>
  fc.record({
    provider: fc.constantFrom(...PROVIDERS),
    prompt: fc.integer({ min: 0, max: 20 }),
    completion: fc.integer({ min: 0, max: 20 }),
    zdr: fc.boolean(),
    dataCollection: fc.constantFrom("allow" as const, "deny" as const),
    distillable: fc.constantFrom(undefined, false, true),
    quantization: fc.constantFrom(undefined, "fp8", "FP16", "int4"),
    supportedParameters: fc.option(fc.subarray([...PARAMETERS]), { nil: undefined }),
    inputModalities: fc.option(fc.subarray(["text", "image", "file"]), { nil: undefined }),
    maxCompletionTokens: fc.option(fc.integer({ min: 100, max: 10_000 }), { nil: undefined }),
    contextLength: fc.option(fc.integer({ min: 1000, max: 100_000 }), { nil: undefined }),
    health: healthArb
  }).map(({ completion, health, prompt, provider, ...rest }) => ({
    prompt,
    completion,
    health,
    endpoint: {
      id: `${modelId}@${provider}#${index}`,
      modelId,
      provider,
      upstreamModel: modelId,
      pricing: { prompt: perToken(prompt), completion: perToken(completion), request: "0", image: "0" },
      supportsVoiceCloning: false,
      supportsMultipleAudioReferences: false,
      supportsImageReference: false,
      ...rest
    }
  }))

const modelArb = (id: string) =>
  fc.integer({ min: 1, max: 8 }).chain((n) =>
    fc.tuple(...Array.from({ length: n }, (_, i) => endpointArb(id, i))).map((endpoints) => ({ id, endpoints }))
  )

const catalogueArb = fc.integer({ min: 1, max: 3 }).chain((n) =>
  fc.tuple(...Array.from({ length: n }, (_, i) => modelArb(`m${i}`)))
)

const slugs = fc.subarray([...PROVIDERS, "zeta"]).chain((names) =>
  fc.tuple(...names.map((name) => fc.constantFrom(name, name.toUpperCase(), name.toLowerCase())))
)

const cutoff = fc.oneof(
  fc.integer({ min: 1, max: 200 }),
  fc.record({ p50: fc.integer({ min: 1, max: 200 }), p90: fc.integer({ min: 1, max: 200 }) }, { requiredKeys: [] })
)

/** Absent four times in five, so that a scenario rarely stacks many filters and most plans are not empty. */
const rarely = <A>(arb: fc.Arbitrary<A>) =>
  fc.oneof({ arbitrary: fc.constant(undefined), weight: 4 }, { arbitrary: arb, weight: 1 })

const defined = <A extends object>(record: A): A =>
  Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined)) as A

const sortBy = fc.constantFrom("price" as const, "throughput" as const, "latency" as const)

const preferencesArb: fc.Arbitrary<RoutePlanner.ProviderPreferences> = fc.record({
  order: fc.oneof(fc.constant(undefined), slugs),
  only: rarely(slugs),
  ignore: rarely(slugs),
  allow_fallbacks: fc.constantFrom(undefined, null, true, false),
  require_parameters: rarely(fc.boolean()),
  data_collection: rarely(fc.constantFrom("allow" as const, "deny" as const)),
  zdr: rarely(fc.boolean()),
  enforce_distillable_text: rarely(fc.constantFrom(null, false, true)),
  quantizations: rarely(
    fc.subarray(["fp8" as const, "fp16" as const, "int4" as const, "bf16" as const, "unknown" as const])
  ),
  sort: fc.oneof(
    fc.constant(undefined),
    sortBy,
    fc.record({ by: sortBy, partition: fc.constantFrom("model" as const, "none" as const) }, { requiredKeys: [] })
  ),
  max_price: rarely(
    fc.record({ prompt: fc.integer({ min: 0, max: 20 }), completion: fc.integer({ min: 0, max: 20 }) }, {
      requiredKeys: []
    })
  ),
  preferred_min_throughput: rarely(cutoff),
  preferred_max_latency: rarely(cutoff)
}).map(defined)

const requirementsArb: fc.Arbitrary<RoutePlanner.Requirements> = fc.record({
  tools: fc.boolean(),
  images: rarely(fc.constant(true)).map((b) => b === true),
  documents: rarely(fc.constant(true)).map((b) => b === true),
  maxTokens: rarely(fc.integer({ min: 1, max: 20_000 })),
  parameters: fc.subarray([...PARAMETERS]),
  estimatedPromptTokens: rarely(fc.integer({ min: 0, max: 50_000 }))
}).map(defined)

const scenarioArb = catalogueArb.chain((models) => {
  const all = models.flatMap((m) => m.endpoints)
  return fc.record({
    models: fc.constant(models),
    fallbacks: fc.subarray(models.slice(1).map((m) => m.id)),
    requirements: requirementsArb,
    provider: preferencesArb,
    session: fc.option(
      fc.record({
        key: fc.string({ maxLength: 12 }),
        endpointId: fc.option(fc.constantFrom(...all.map((g) => g.endpoint.id)), { nil: undefined })
      }),
      { nil: undefined }
    ),
    seed: fc.integer()
  })
})

type Scenario = typeof scenarioArb extends fc.Arbitrary<infer S> ? S : never

const run = (s: Scenario, random = RoutePlanner.seededRandom(s.seed)) => {
  const byId = new Map(s.models.flatMap((m) => m.endpoints).map((g) => [g.endpoint.id, g]))
  const snapshot = makeSnapshot(
    s.models.map((m): Model => ({ id: m.id, name: m.id, endpoints: m.endpoints.map((g) => g.endpoint) }))
  )
  const request: RoutePlanner.RouteRequest = {
    model: "m0",
    fallbacks: s.fallbacks.map((model) => ({ model })),
    requirements: s.requirements,
    provider: s.provider
  }
  const health: RoutePlanner.HealthSnapshot = { get: (id) => byId.get(id)?.health }
  return RoutePlanner.plan(request, snapshot, { health, session: s.session, random, now: NOW })
}

const lower = (names: ReadonlyArray<string> | null | undefined) => (names ?? []).map((n) => n.toLowerCase())

/** The filters, written from the rules. */
const allowed = (g: Generated, needs: RoutePlanner.Requirements, p: RoutePlanner.ProviderPreferences): boolean => {
  const e = g.endpoint
  const provider = e.provider.toLowerCase()
  const params = e.supportedParameters
  const modalities = e.inputModalities
  if (needs.tools && params !== undefined && !params.includes("tools")) return false
  if (needs.images && modalities !== undefined && !modalities.includes("image")) return false
  if (needs.documents && modalities !== undefined && !modalities.includes("file")) return false
  if (needs.maxTokens !== undefined && e.maxCompletionTokens !== undefined && needs.maxTokens > e.maxCompletionTokens) {
    return false
  }
  if (e.contextLength !== undefined && (needs.estimatedPromptTokens ?? 0) + (needs.maxTokens ?? 0) > e.contextLength) {
    return false
  }
  const only = lower(p.only)
  if (only.length > 0 && !only.includes(provider)) return false
  if (lower(p.ignore).includes(provider)) return false
  const order = lower(p.order)
  if (order.length > 0 && p.allow_fallbacks === false && !order.includes(provider)) return false
  const used = needs.parameters ?? []
  if (p.require_parameters === true && used.length > 0 && !used.every((x) => params?.includes(x))) return false
  if (p.data_collection === "deny" && e.dataCollection !== "deny") return false
  if (p.zdr === true && !e.zdr) return false
  if (p.enforce_distillable_text === true && e.distillable !== true) return false
  const quantizations = p.quantizations ?? []
  if (quantizations.length > 0 && !quantizations.includes((e.quantization?.toLowerCase() ?? "unknown") as any)) {
    return false
  }
  if (p.max_price?.prompt != null && g.prompt > Number(p.max_price.prompt)) return false
  if (p.max_price?.completion != null && g.completion > Number(p.max_price.completion)) return false
  return true
}

const candidateModels = (s: Scenario) => [s.models[0], ...s.models.filter((m) => s.fallbacks.includes(m.id))]

/**
 * The endpoints a plan holds, with the `max_tokens` each is sent when clamped: per model, those the filters keep;
 * when none, those they keep with `max_tokens` lowered to the endpoint's own limit (prefer, then clamp).
 */
const eligibleOf = (s: Scenario): Array<{ g: Generated; maxTokens: number | undefined }> =>
  candidateModels(s).flatMap((m): Array<{ g: Generated; maxTokens: number | undefined }> => {
    const kept = m.endpoints.filter((g) => allowed(g, s.requirements, s.provider))
    if (kept.length > 0) return kept.map((g) => ({ g, maxTokens: undefined }))
    const wanted = s.requirements.maxTokens
    return m.endpoints.flatMap((g) => {
      const limit = g.endpoint.maxCompletionTokens
      if (wanted === undefined || limit === undefined || limit >= wanted) return []
      return allowed(g, { ...s.requirements, maxTokens: limit }, s.provider) ? [{ g, maxTokens: limit }] : []
    })
  })

const partitionOf = (p: RoutePlanner.ProviderPreferences) =>
  p.sort != null && typeof p.sort !== "string" ? p.sort.partition ?? "model" : "model"

/** The attempts grouped as the planner orders them: per model, or all together with partition "none". */
const groupsOf = (s: Scenario, attempts: ReadonlyArray<RoutePlanner.Attempt>) => {
  if (partitionOf(s.provider) === "none") return [attempts]
  const groups = new Map<string, Array<RoutePlanner.Attempt>>()
  for (const a of attempts) groups.set(a.model.id, [...(groups.get(a.model.id) ?? []), a])
  return [...groups.values()]
}

/** The health tier the rules give an endpoint: 0 stable, 1 below a preference, 2 recent outage, 3 cooling down. */
const tierOf = (g: Generated, p: RoutePlanner.ProviderPreferences): number => {
  const h = g.health
  if (h !== undefined && !h.halfOpen) {
    if (h.coolingDownUntil !== null && NOW < h.coolingDownUntil) return 3
    if (h.recentOutage) return 2
  }
  const limit = (c: RoutePlanner.ProviderPreferences["preferred_min_throughput"]) =>
    c == null ? {} : typeof c === "number" ? { p50: c } : c
  const min = limit(p.preferred_min_throughput)
  const max = limit(p.preferred_max_latency)
  for (const q of ["p50", "p75", "p90", "p99"] as const) {
    const t = h?.throughput30m
    const l = h?.latency30m
    if (t != null && min[q] != null && t[q] < min[q]) return 1
    if (l != null && max[q] != null && l[q] > max[q]) return 1
  }
  return 0
}

const property = <A>(arb: fc.Arbitrary<A>, check: (a: A) => void, numRuns = 500) =>
  fc.assert(fc.property(arb, (a) => check(a)), { numRuns })

describe("RoutePlanner properties", () => {
  it("the plan holds exactly the endpoints the filters keep (all of them unless allow_fallbacks is false)", () => {
    property(scenarioArb, (s) => {
      const eligible = eligibleOf(s)
      const result = run(s)
      if (eligible.length === 0) {
        expect(Either.isLeft(result) && result.left._tag).toBe("InvalidRequest")
        return
      }
      const attempts = Either.getOrThrow(result).attempts
      const ids = attempts.map((a) => a.endpoint.id)
      expect(new Set(ids).size).toBe(ids.length)
      const keep = new Map(eligible.map(({ g, maxTokens }) => [g.endpoint.id, maxTokens]))
      for (const a of attempts) {
        expect(keep.has(a.endpoint.id)).toBe(true)
        expect(a.maxTokens).toBe(keep.get(a.endpoint.id))
        const needs = a.maxTokens === undefined ? s.requirements : { ...s.requirements, maxTokens: a.maxTokens }
        expect(RoutePlanner.excludedBy(a.endpoint, needs, s.provider)).toBeUndefined()
      }
      if (s.provider.allow_fallbacks !== false) expect(new Set(ids)).toEqual(new Set(keep.keys()))
    })
  })

  it("serves says whether a plan of the request on the model alone is made (APIs, speech, strict max_tokens too)", () => {
    const extras = fc.record({
      api: fc.constantFrom(undefined, "messages", "chat", "responses", "embeddings"),
      apis: fc.array(fc.option(fc.subarray(["messages", "chat", "embeddings"]), { nil: undefined }), {
        minLength: 24,
        maxLength: 24
      }),
      outputModalities: fc.constantFrom(undefined, ["text"], ["audio"], ["text", "audio"], ["embeddings"]),
      strict: fc.boolean()
    })
    property(fc.tuple(scenarioArb, extras), ([s, x]) => {
      let i = 0
      const models = s.models.map((m): Model => ({
        id: m.id,
        name: m.id,
        outputModalities: x.outputModalities,
        maxTokensPolicy: x.strict ? "strict" : "clamp",
        endpoints: m.endpoints.map((g) => ({ ...g.endpoint, apis: x.apis[i++] }))
      }))
      const snapshot = makeSnapshot(models)
      const request = { requirements: { ...s.requirements, api: x.api }, provider: s.provider }
      for (const model of models) {
        const planned = RoutePlanner.plan({ ...request, model: model.id }, snapshot)
        expect(RoutePlanner.serves(model, request)).toBe(Either.isRight(planned))
      }
    })
  })

  it("only and ignore are honoured, ignoring case", () => {
    property(scenarioArb, (s) => {
      const result = run(s)
      if (Either.isLeft(result)) return
      const only = lower(s.provider.only)
      const ignore = lower(s.provider.ignore)
      for (const a of result.right.attempts) {
        const provider = a.endpoint.provider.toLowerCase()
        if (only.length > 0) expect(only).toContain(provider)
        expect(ignore).not.toContain(provider)
      }
    })
  })

  it("order: listed providers first, in the listed order; with allow_fallbacks false nothing else", () => {
    property(scenarioArb, (s) => {
      const result = run(s)
      const order = lower(s.provider.order)
      if (Either.isLeft(result) || order.length === 0) return
      for (const group of groupsOf(s, result.right.attempts)) {
        const positions = group.map((a) => order.indexOf(a.endpoint.provider.toLowerCase()))
        const listed = positions.filter((p) => p >= 0)
        expect(positions.slice(0, listed.length)).toEqual(listed)
        expect(listed).toEqual([...listed].sort((a, b) => a - b))
        if (s.provider.allow_fallbacks === false) expect(listed).toHaveLength(positions.length)
      }
    })
  })

  it("allow_fallbacks false without order: one endpoint per model; models keep their order with partition model", () => {
    property(scenarioArb, (s) => {
      const result = run(s)
      if (Either.isLeft(result)) return
      const attempts = result.right.attempts
      const models = attempts.map((a) => a.model.id)
      if (s.provider.allow_fallbacks === false && lower(s.provider.order).length === 0) {
        expect(new Set(models).size).toBe(models.length)
      }
      if (partitionOf(s.provider) === "model") {
        // Cooling-down endpoints (those provider.order does not place) are the whole plan's last resorts: models keep
        // their order before them, and among them.
        const byId = new Map(s.models.flatMap((m) => m.endpoints).map((g) => [g.endpoint.id, g]))
        const order = lower(s.provider.order)
        const lastResort = (a: RoutePlanner.Attempt) =>
          tierOf(byId.get(a.endpoint.id)!, s.provider) === 3 && !order.includes(a.endpoint.provider.toLowerCase())
        const rest = attempts.filter((a) => !lastResort(a))
        const last = attempts.filter(lastResort)
        if (rest.length > 0) expect(attempts.slice(rest.length).every(lastResort)).toBe(true)
        for (const part of [rest, last]) {
          const rank = part.map((a) => (a.model.id === "m0" ? -1 : s.fallbacks.indexOf(a.model.id)))
          expect(rank).toEqual([...rank].sort((a, b) => a - b))
        }
      }
    })
  })

  it("without order or a sticky endpoint: health tiers never go backwards, and sort by price is ascending within one", () => {
    property(scenarioArb, (raw) => {
      const s = { ...raw, provider: { ...raw.provider, order: null }, session: undefined }
      const result = run(s)
      if (Either.isLeft(result)) return
      const byId = new Map(s.models.flatMap((m) => m.endpoints).map((g) => [g.endpoint.id, g]))
      const by = s.provider.sort == null
        ? undefined
        : typeof s.provider.sort === "string"
        ? s.provider.sort
        : s.provider.sort.by
      for (const group of groupsOf(s, result.right.attempts)) {
        const generated = group.map((a) => byId.get(a.endpoint.id)!)
        const tiers = generated.map((g) => tierOf(g, s.provider))
        expect(tiers).toEqual([...tiers].sort((a, b) => a - b))
        if (by === "price") {
          for (let i = 1; i < generated.length; i++) {
            if (tiers[i] !== tiers[i - 1]) continue
            const price = (g: Generated) => g.prompt + g.completion
            expect(price(generated[i])).toBeGreaterThanOrEqual(price(generated[i - 1]))
          }
        }
      }
    })
  })

  it("a healthy, eligible sticky endpoint goes first among its model's endpoints unless order is given", () => {
    property(scenarioArb, (s) => {
      const result = run(s)
      const sticky = s.session?.endpointId
      if (Either.isLeft(result) || sticky === undefined) return
      const steps = result.right.steps.filter((st) => st.name === "sticky")
      expect(steps).toHaveLength(1)
      const group = groupsOf(s, result.right.attempts).find((g) => g.some((a) => a.endpoint.id === sticky))
      const generated = s.models.flatMap((m) => m.endpoints).find((g) => g.endpoint.id === sticky)!
      const healthy = tierOf(generated, s.provider) <= 1 && generated.health?.halfOpen !== true
      if (lower(s.provider.order).length > 0) expect(steps[0].summary).toContain("provider.order is given")
      else if (group !== undefined && healthy) expect(group[0].endpoint.id).toBe(sticky)
      else expect(steps[0].summary).toContain("not")
    })
  })

  it("is deterministic for a seed, and with a session does not depend on the random source at all", () => {
    property(scenarioArb, (s) => {
      const first = run(s)
      expect(run(s)).toEqual(first)
      if (s.session !== undefined) expect(run(s, () => 0.5)).toEqual(first)
    }, 200)
  })

  it("the first endpoint is chosen with probability proportional to 1/price² (10,000 seeded draws)", () => {
    const pricesArb = fc.uniqueArray(fc.integer({ min: 1, max: 10 }), { minLength: 2, maxLength: 4 })
    property(fc.tuple(pricesArb, fc.integer()), ([prices, seed]) => {
      const snapshot = makeSnapshot([{
        id: "m",
        name: "m",
        endpoints: prices.map((price, i): Endpoint => ({
          id: `m@p${i}`,
          modelId: "m",
          provider: `p${i}`,
          upstreamModel: "m",
          pricing: { prompt: perToken(price), completion: "0", request: "0", image: "0" },
          zdr: false,
          dataCollection: "allow",
          supportsVoiceCloning: false,
          supportsMultipleAudioReferences: false,
          supportsImageReference: false
        }))
      }])
      const random = RoutePlanner.seededRandom(seed)
      const counts = prices.map(() => 0)
      const draws = 10_000
      const request = { model: "m", requirements: { tools: false, images: false, documents: false } }
      for (let i = 0; i < draws; i++) {
        const first = Either.getOrThrow(RoutePlanner.plan(request, snapshot, { random })).attempts[0]
        counts[Number(first.endpoint.provider.slice(1))]++
      }
      const weights = prices.map((p) => 1 / p ** 2)
      const total = weights.reduce((a, b) => a + b, 0)
      weights.forEach((w, i) => expect(Math.abs(counts[i] / draws - w / total)).toBeLessThan(0.025))
    }, 15)
  })
})
