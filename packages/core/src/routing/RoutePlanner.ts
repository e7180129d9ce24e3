/**
 * Route planning: a pure function of (request, catalogue snapshot, endpoint health snapshot, session affinity,
 * random source) returning an ordered list of attempts, each an endpoint with the reason it was chosen. The executor
 * consumes the plan; the steps become the `service_metadata.pipeline` steps.
 *
 * How a plan is made, in order:
 * 1. **Candidate models**: the requested `model` (unknown, or without endpoints: `NotFound`), then `models`, then
 *    `fallbacks`; an unknown id there is skipped with a `skip-model` step.
 * 2. **Filters** (`excludedBy`), each endpoint removed with a `filter` step naming the filter and the reason:
 *    capabilities always (tools, images, documents, `max_tokens` over `maxCompletionTokens`, estimated prompt plus
 *    `max_tokens` over `contextLength`), then the provider preferences `only`, `ignore`, `order` (only when
 *    `allow_fallbacks` is false: unlisted providers go), `require_parameters`, `data_collection`, `zdr`,
 *    `quantizations` and `max_price`. **Prefer, then clamp**: when none of a model's endpoints can honour the requested
 *    `max_tokens` but some would pass every filter with their own `maxCompletionTokens`, those are kept with the
 *    attempt's `maxTokens` lowered to that limit (a `clamp` step), unless the model's `maxTokensPolicy` is `strict`.
 *    Nothing left: `InvalidRequest` (400, "No endpoints found that ...") naming each filter and what it removed: the
 *    request itself rules every endpoint out, so retrying cannot help (503 is for endpoints that failed).
 * 3. **Health tiers**: a cooling-down endpoint (not yet half-open) and one with a recent outage are not dropped but
 *    go last, as a last resort (outage before cooldown); a half-open endpoint keeps its normal place, as the probe.
 *    Endpoints that miss `preferred_min_throughput` / `preferred_max_latency` go after those that meet them
 *    (preferences, not filters; an endpoint without stats meets them).
 * 4. **Order**, within each candidate model (`sort.partition: "model"`, the default: models keep their order) or
 *    over all candidate models' endpoints together (`"none"`):
 *    - `provider.order` given: the listed providers first, in that order (strictly, whatever their health), then,
 *      when `allow_fallbacks` is true, the rest as below;
 *    - `sort` given: by price (prompt + completion per token, ascending), throughput (p50 over 30 min, descending)
 *      or latency (p50 time to first byte, ascending), endpoints without stats after those with; within the tiers;
 *    - otherwise: the first endpoint is a random choice among the stable endpoints (the first non-empty of the two
 *      healthy tiers) weighted by the inverse square of the price (at $1 and $3 per million the cheaper goes first 9
 *      times in 10), the rest follow by price as fallbacks. A free endpoint (price 0) counts as costing
 *      `PRICE_FLOOR`, a large finite weight: it is chosen (almost) always.
 * 5. **Stickiness**: the session's endpoint (from the SessionAffinity port) moves to the front of its model's
 *    endpoints (of the whole plan with partition "none") while it is eligible and healthy (no recent outage, no
 *    cooldown, not half-open); it is not applied when `provider.order` is given. Without a stored endpoint the choice
 *    is still the same in every gateway process: with a session, each endpoint's random draw is derived from a hash
 *    of (session key, endpoint id), a weighted rendezvous choice that needs no shared state and that moves only the
 *    sessions of an endpoint that appears or goes.
 * 6. **`allow_fallbacks: false`** without `order`: only the first endpoint of each candidate model is kept (no other
 *    provider for the same model; model fallbacks still apply). With `order`, exactly the listed providers are kept.
 *
 * The weighted choice draws one number per stable endpoint, in price order, from the random source: a source that
 * always answers 0 makes the cheapest endpoint go first (ties in catalogue order), which example tests may use.
 */
import { Either } from "effect"
import type { CatalogueSnapshot, Endpoint, Model } from "../catalogue/Catalogue.js"
import { InvalidRequest, NotFound } from "../errors/GatewayError.js"
import type { EndpointHealth, HealthSnapshot, Percentiles } from "../health/EndpointStats.js"
import type { Partition, PercentileCutoffs, ProviderPreferences, SortBy } from "./ProviderPreferences.js"
import * as SeededRandom from "./SeededRandom.js"

export type { EndpointHealth, HealthSnapshot, Percentiles } from "../health/EndpointStats.js"
export type { ProviderPreferences, Route } from "./ProviderPreferences.js"
export { effective as effectivePreferences } from "./ProviderPreferences.js"
export type { Random } from "./SeededRandom.js"
export { make as seededRandom } from "./SeededRandom.js"

/** What the request needs of an endpoint, derived once from the body. */
export interface Requirements {
  /** The API the request was sent to (`messages`, `chat`, ...): an endpoint that lists its `apis` must list it. */
  readonly api?: string | undefined
  readonly tools: boolean
  readonly images: boolean
  readonly documents: boolean
  readonly maxTokens?: number | undefined
  /** The parameters the body uses, by their catalogue names (see `usedParameters`); read by `require_parameters`. */
  readonly parameters?: ReadonlyArray<string> | undefined
  /**
   * The prompt's size in tokens, estimated (about a quarter of the body's characters); with `maxTokens` it is checked
   * against each endpoint's context length.
   */
  readonly estimatedPromptTokens?: number | undefined
}

/** The routing fields of a request. */
export interface RouteRequest {
  readonly model: string
  readonly models?: ReadonlyArray<string> | undefined
  readonly fallbacks?: ReadonlyArray<{ readonly model: string }> | null | undefined
  readonly requirements: Requirements
  /** The effective provider preferences: `effectivePreferences(body.provider, body.route)`. */
  readonly provider?: ProviderPreferences | null | undefined
}

/** The session a request belongs to, for stickiness. */
export interface Session {
  /** The affinity key (`SessionAffinity.affinityKey(workspace, sessionId, model)`). */
  readonly key: string
  /** The endpoint id that served this session and model last (`SessionAffinity.get`), if any. */
  readonly endpointId?: string | undefined
}

/** What the planner reads besides the request and the catalogue; everything is optional. */
export interface RouteContext {
  /** Endpoint health; without it every endpoint is healthy and without stats. */
  readonly health?: HealthSnapshot | undefined
  /** The request's session; with it, the weighted choice derives from the session key instead of `random`. */
  readonly session?: Session | undefined
  /**
   * Uniform numbers in [0, 1): e.g. `seededRandom(yield* Random.nextInt)` in an Effect. Without it the plan is
   * deterministic (seeded with the model id), which is right for tests but not for spreading load.
   */
  readonly random?: SeededRandom.Random | undefined
  /** Epoch milliseconds, to tell a cooldown that has ended; without it `coolingDownUntil` alone decides. */
  readonly now?: number | undefined
}

export interface Attempt {
  readonly model: Model
  readonly endpoint: Endpoint
  /** Why this endpoint is in the plan, at this place. */
  readonly reason: string
  /** Set when the request's `max_tokens` is clamped for this endpoint: the value to send instead. */
  readonly maxTokens?: number | undefined
}

/** One step of the pipeline that `service_metadata` reports. */
export interface PipelineStep {
  readonly type: string
  readonly name: string
  readonly summary: string
}

export interface RoutePlan {
  readonly attempts: ReadonlyArray<Attempt>
  readonly steps: ReadonlyArray<PipelineStep>
}

/** Why a filter removes an endpoint: the filter (`tools`, `context_length`, `provider.zdr`, ...) and the reason. */
export interface Exclusion {
  readonly filter: string
  readonly reason: string
}

/** The price (USD per token, prompt + completion) below which an endpoint weighs as if it cost this: $0.001/M. */
export const PRICE_FLOOR = 1e-9

// -----------------------------------------------------------------------------
// preferences, resolved once per plan
// -----------------------------------------------------------------------------

interface Resolved {
  readonly order: ReadonlyArray<string> | undefined
  readonly only: ReadonlySet<string> | undefined
  readonly ignore: ReadonlySet<string>
  readonly allowFallbacks: boolean
  readonly requireParameters: boolean
  readonly denyDataCollection: boolean
  readonly zdr: boolean
  readonly quantizations: ReadonlySet<string> | undefined
  readonly sortBy: SortBy | undefined
  readonly partition: Partition
  readonly maxPrice: {
    readonly prompt?: number
    readonly completion?: number
    readonly request?: number
    readonly image?: number
  }
  readonly minThroughput: PercentileCutoffs | undefined
  readonly maxLatency: PercentileCutoffs | undefined
}

const lower = (values: ReadonlyArray<string> | null | undefined): ReadonlyArray<string> | undefined =>
  values == null || values.length === 0 ? undefined : values.map((v) => v.toLowerCase())

const cutoffs = (value: number | PercentileCutoffs | null | undefined): PercentileCutoffs | undefined =>
  value == null ? undefined : typeof value === "number" ? { p50: value } : value

const amount = (value: number | string | null | undefined): number | undefined =>
  value == null ? undefined : Number(value)

const resolve = (p: ProviderPreferences | null | undefined): Resolved => {
  const sort = p?.sort
  const only = lower(p?.only)
  const quantizations = lower(p?.quantizations)
  const max = p?.max_price
  const maxPrice: Record<string, number> = {}
  for (const key of ["prompt", "completion", "request", "image"] as const) {
    const n = amount(max?.[key])
    if (n !== undefined) maxPrice[key] = n
  }
  return {
    order: lower(p?.order),
    only: only && new Set(only),
    ignore: new Set(lower(p?.ignore)),
    allowFallbacks: p?.allow_fallbacks ?? true,
    requireParameters: p?.require_parameters ?? false,
    denyDataCollection: p?.data_collection === "deny",
    zdr: p?.zdr ?? false,
    quantizations: quantizations && new Set(quantizations),
    sortBy: sort == null ? undefined : typeof sort === "string" ? sort : sort.by ?? undefined,
    partition: sort == null || typeof sort === "string" ? "model" : sort.partition ?? "model",
    maxPrice,
    minThroughput: cutoffs(p?.preferred_min_throughput),
    maxLatency: cutoffs(p?.preferred_max_latency)
  }
}

// -----------------------------------------------------------------------------
// filters
// -----------------------------------------------------------------------------

/** USD per million tokens, to six decimals (which also hides the binary rounding of per-token prices). */
const perMillion = (perToken: number): string => `$${Math.round(perToken * 1e12) / 1e6}/M`

/** USD per token as a number; a price that is not a finite non-negative number counts as infinitely expensive. */
const priceOf = (decimal: string): number => {
  const n = Number(decimal)
  return decimal.trim() !== "" && Number.isFinite(n) && n >= 0 ? n : Infinity
}

const prices = new WeakMap<Endpoint, number>()

/** USD per token, prompt + completion; catalogue snapshots are immutable, so it is computed once per endpoint. */
const promptAndCompletion = (endpoint: Endpoint): number => {
  let price = prices.get(endpoint)
  if (price === undefined) {
    price = priceOf(endpoint.pricing.prompt) + priceOf(endpoint.pricing.completion)
    prices.set(endpoint, price)
  }
  return price
}

/** Above a ceiling, allowing for the binary rounding of per-token prices scaled to per-million. */
const above = (value: number, ceiling: number) => value > ceiling * (1 + 1e-9)

const capability = (endpoint: Endpoint, needs: Requirements, maxTokens = needs.maxTokens): Exclusion | undefined => {
  if (needs.api !== undefined && endpoint.apis !== undefined && !endpoint.apis.includes(needs.api)) {
    return { filter: "api", reason: `does not serve the ${needs.api} API` }
  }
  const params = endpoint.supportedParameters
  if (needs.tools && params !== undefined && !params.includes("tools")) {
    return { filter: "tools", reason: "does not support tools" }
  }
  const modalities = endpoint.inputModalities
  if (needs.images && modalities !== undefined && !modalities.includes("image")) {
    return { filter: "images", reason: "does not accept images" }
  }
  if (needs.documents && modalities !== undefined && !modalities.includes("file")) {
    return { filter: "documents", reason: "does not accept documents" }
  }
  if (
    maxTokens !== undefined && endpoint.maxCompletionTokens !== undefined && maxTokens > endpoint.maxCompletionTokens
  ) {
    return {
      filter: "max_tokens",
      reason: `max_tokens ${maxTokens} exceeds its limit of ${endpoint.maxCompletionTokens}`
    }
  }
  const prompt = needs.estimatedPromptTokens
  const context = endpoint.contextLength
  if (context !== undefined && (prompt !== undefined || maxTokens !== undefined)) {
    const total = (prompt ?? 0) + (maxTokens ?? 0)
    if (total > context) {
      const what = prompt === undefined ?
        `max_tokens ${maxTokens}` :
        maxTokens === undefined ?
        `an estimated prompt of ${prompt} tokens` :
        `an estimated prompt of ${prompt} tokens plus max_tokens ${maxTokens}`
      return { filter: "context_length", reason: `${what} exceeds its context length of ${context}` }
    }
  }
  return undefined
}

/**
 * The `max_tokens` an endpoint that cannot honour the request's would be sent instead (its own limit), when with it
 * the endpoint passes every capability filter; undefined otherwise.
 */
const clampFor = (endpoint: Endpoint, needs: Requirements): number | undefined => {
  const limit = endpoint.maxCompletionTokens
  if (needs.maxTokens === undefined || limit === undefined || needs.maxTokens <= limit) return undefined
  return capability(endpoint, needs, limit) === undefined ? limit : undefined
}

const preference = (endpoint: Endpoint, needs: Requirements, p: Resolved): Exclusion | undefined => {
  const provider = endpoint.provider.toLowerCase()
  if (p.only !== undefined && !p.only.has(provider)) {
    return { filter: "provider.only", reason: `${endpoint.provider} is not in provider.only` }
  }
  if (p.ignore.has(provider)) return { filter: "provider.ignore", reason: `${endpoint.provider} is in provider.ignore` }
  if (p.order !== undefined && !p.allowFallbacks && !p.order.includes(provider)) {
    return {
      filter: "provider.order",
      reason: `${endpoint.provider} is not in provider.order and allow_fallbacks is false`
    }
  }
  const used = needs.parameters ?? []
  if (p.requireParameters && used.length > 0) {
    const supported = endpoint.supportedParameters
    if (supported === undefined) {
      return { filter: "provider.require_parameters", reason: "does not list its supported parameters" }
    }
    const missing = used.filter((name) => !supported.includes(name))
    if (missing.length > 0) {
      return { filter: "provider.require_parameters", reason: `does not support ${missing.join(", ")}` }
    }
  }
  if (p.denyDataCollection && endpoint.dataCollection !== "deny") {
    return { filter: "provider.data_collection", reason: "its data policy allows data collection" }
  }
  if (p.zdr && !endpoint.zdr) return { filter: "provider.zdr", reason: "is not a zero-data-retention endpoint" }
  if (p.quantizations !== undefined) {
    const quantization = endpoint.quantization?.toLowerCase() ?? "unknown"
    if (!p.quantizations.has(quantization)) {
      return { filter: "provider.quantizations", reason: `its quantization ${quantization} is not allowed` }
    }
  }
  const { completion, image, prompt, request } = p.maxPrice
  const pricing = endpoint.pricing
  for (const [key, ceiling] of [["prompt", prompt], ["completion", completion]] as const) {
    const perToken = priceOf(pricing[key])
    if (ceiling !== undefined && above(perToken * 1e6, ceiling)) {
      return {
        filter: "provider.max_price",
        reason: `its ${key} price ${perMillion(perToken)} exceeds max_price.${key} $${ceiling}/M`
      }
    }
  }
  for (const [key, ceiling] of [["request", request], ["image", image]] as const) {
    const unit = priceOf(pricing[key])
    if (ceiling !== undefined && above(unit, ceiling)) {
      return { filter: "provider.max_price", reason: `its ${key} price $${unit} exceeds max_price.${key} $${ceiling}` }
    }
  }
  return undefined
}

/**
 * The filter that removes an endpoint for a request, or undefined when the endpoint can serve it: the capability
 * filters first, then the provider preferences (the effective ones).
 */
export const excludedBy = (
  endpoint: Endpoint,
  needs: Requirements,
  preferences?: ProviderPreferences | null | undefined
): Exclusion | undefined => capability(endpoint, needs) ?? preference(endpoint, needs, resolve(preferences))

/** Why an endpoint cannot serve the request, or undefined when it can (the reason of `excludedBy`). */
export const exclusion = (
  endpoint: Endpoint,
  needs: Requirements,
  preferences?: ProviderPreferences | null | undefined
): string | undefined => excludedBy(endpoint, needs, preferences)?.reason

/**
 * The parameters a messages body uses, by the names catalogues list in `supportedParameters`: `tools`,
 * `tool_choice`, `temperature`, `top_p`, `top_k`, `stop` (stop_sequences), `max_tokens`, `response_format`
 * (output_config.format) and `reasoning` (thinking, unless disabled).
 */
export const usedParameters = (body: { readonly [key: string]: unknown }): ReadonlyArray<string> => {
  const used: Array<string> = []
  const present = (key: string) => body[key] !== undefined && body[key] !== null
  if (Array.isArray(body.tools) && body.tools.length > 0) used.push("tools")
  if (present("tool_choice")) used.push("tool_choice")
  for (const key of ["temperature", "top_p", "top_k"]) if (present(key)) used.push(key)
  if (present("stop_sequences")) used.push("stop")
  if (present("max_tokens")) used.push("max_tokens")
  const output = body.output_config as { readonly format?: unknown } | null | undefined
  if (output?.format != null) used.push("response_format")
  const thinking = body.thinking as { readonly type?: unknown } | null | undefined
  if (thinking != null && thinking.type !== "disabled") used.push("reasoning")
  return used
}

// -----------------------------------------------------------------------------
// ordering
// -----------------------------------------------------------------------------

/** 0: stable and meets the preferences, 1: stable, misses them, 2: recent outage, 3: cooling down. */
type Tier = 0 | 1 | 2 | 3

interface Candidate {
  readonly model: Model
  readonly role: string
  readonly endpoint: Endpoint
  /** USD per token, prompt + completion. */
  readonly price: number
  readonly health: EndpointHealth | undefined
  readonly tier: Tier
  /** Why the endpoint is not in tier 0. */
  readonly note: string | undefined
  /** The clamped `max_tokens` to send to it, when clamped. */
  readonly maxTokens?: number | undefined
}

interface Ranked {
  readonly candidate: Candidate
  readonly why: string
}

const PERCENTILES = ["p50", "p75", "p90", "p99"] as const

const missed = (
  stats: Percentiles | null | undefined,
  limits: PercentileCutoffs | undefined,
  worse: (value: number, limit: number) => boolean,
  describe: (p: string, value: number, limit: number) => string
): string | undefined => {
  if (stats == null || limits === undefined) return undefined
  for (const p of PERCENTILES) {
    const limit = limits[p]
    if (limit != null && worse(stats[p], limit)) return describe(p, stats[p], limit)
  }
  return undefined
}

const tierOf = (health: EndpointHealth | undefined, p: Resolved, now: number | undefined) => {
  if (health !== undefined && !health.halfOpen) {
    const until = health.coolingDownUntil
    if (until !== null && (now === undefined || now < until)) {
      return { tier: 3 as Tier, note: "cooling down, kept as a last resort" }
    }
    if (health.recentOutage) return { tier: 2 as Tier, note: "recent outage, kept as a last resort" }
  }
  const note = missed(
    health?.throughput30m,
    p.minThroughput,
    (v, l) => v < l,
    (q, v, l) => `throughput ${q} ${v} tok/s is below preferred_min_throughput ${l}`
  ) ?? missed(
    health?.latency30m,
    p.maxLatency,
    (v, l) => v > l,
    (q, v, l) => `latency ${q} ${v} ms is above preferred_max_latency ${l}`
  )
  return note === undefined ? { tier: 0 as Tier, note } : { tier: 1 as Tier, note }
}

const healthy = (c: Candidate) => c.tier <= 1 && c.health?.halfOpen !== true

const compare = (x: number, y: number) => (x < y ? -1 : x > y ? 1 : 0)

const byPrice = (a: Candidate, b: Candidate) => compare(a.price, b.price)

/** Sorts by a statistic, endpoints without it after those with it. */
const byStat = (stat: (c: Candidate) => number | undefined, descending: boolean) => (a: Candidate, b: Candidate) => {
  const x = stat(a)
  const y = stat(b)
  if (x === undefined || y === undefined) return x === undefined ? (y === undefined ? 0 : 1) : -1
  return descending ? compare(y, x) : compare(x, y)
}

const throughput = (c: Candidate) => c.health?.throughput30m?.p50
const latency = (c: Candidate) => c.health?.latency30m?.p50

const sorts: Record<SortBy, {
  readonly compare: (a: Candidate, b: Candidate) => number
  readonly why: (c: Candidate) => string
}> = {
  price: { compare: byPrice, why: (c) => `sorted by price, ${perMillion(c.price)}` },
  throughput: {
    compare: byStat(throughput, true),
    why: (c) => {
      const t = throughput(c)
      return t === undefined ? "sorted by throughput, no stats" : `sorted by throughput, p50 ${t} tok/s`
    }
  },
  latency: {
    compare: byStat(latency, false),
    why: (c) => {
      const l = latency(c)
      return l === undefined ? "sorted by latency, no stats" : `sorted by latency, p50 ${l} ms`
    }
  }
}

const weightOf = (price: number) => (price === Infinity ? 0 : 1 / Math.max(price, PRICE_FLOOR) ** 2)

const label = (c: Candidate) => `${c.model.id} via ${c.endpoint.provider}`

const withNote = (why: string, c: Candidate) => (c.note === undefined ? why : `${why}; ${c.note}`)

const step = (name: string, summary: string): PipelineStep => ({ type: "routing", name, summary })

/** Why the weighted choice picked `chosen` among `count` stable endpoints, with its probability when it has one. */
const weightedChoice = (chosen: Candidate, count: number, p: number | undefined, session: Session | undefined) =>
  `weighted random choice by inverse square price among ${count} stable endpoint${count === 1 ? "" : "s"} (${
    perMillion(chosen.price)
  }${p === undefined ? "" : `, p=${Number(p.toPrecision(3))}`}${
    session === undefined ? "" : ", derived from the session key"
  })`

/** No provider preferences: what `resolve` makes of an absent `provider`. */
const NO_PREFERENCES = resolve(undefined)

/** The texts of the commonest plan: a single endpoint, stable and meeting the preferences, no session endpoint. */
interface Explanation {
  readonly model: Model
  readonly weighted: string
  readonly reason: string
  readonly plan: string
}

// Those texts depend only on the endpoint (and its model) and on whether the request has a session: made once each.
const explanations = new WeakMap<Endpoint, Explanation>()
const sessionExplanations = new WeakMap<Endpoint, Explanation>()

const explanationOf = (c: Candidate, weight: number, session: Session | undefined): Explanation => {
  const cache = session === undefined ? explanations : sessionExplanations
  let e = cache.get(c.endpoint)
  if (e === undefined || e.model !== c.model) {
    const how = weightedChoice(c, 1, weight > 0 ? 1 : undefined, session)
    const reason = `${c.role} ${label(c)}: ${how}`
    e = { model: c.model, weighted: `${label(c)}: ${how}`, reason, plan: `1. ${reason}` }
    cache.set(c.endpoint, e)
  }
  return e
}

/**
 * `plan` for the common case of a request for one model with a single endpoint and no provider preferences (every
 * request to a model that one provider serves): the same attempts and steps as the general path, without its
 * grouping, tiers and sorting. Undefined when that endpoint cannot serve the request, so that the general path
 * reports why.
 */
const planOne = (request: RouteRequest, model: Model, context: RouteContext): RoutePlan | undefined => {
  const endpoint = model.endpoints[0]
  if (capability(endpoint, request.requirements) !== undefined) return undefined
  const session = context.session
  const health = context.health?.get(endpoint.id)
  const { note, tier } = tierOf(health, NO_PREFERENCES, context.now)
  const c: Candidate = {
    model,
    role: "requested model",
    endpoint,
    price: promptAndCompletion(endpoint),
    health,
    tier,
    note
  }
  const steps: Array<PipelineStep> = []
  let why: string
  if (c.tier >= 2) {
    steps.push(step("health", `${label(c)}: ${c.note}`))
    why = withNote(`fallback by price, ${perMillion(c.price)}`, c)
  } else {
    const weight = weightOf(c.price)
    // The general path draws once for a stable endpoint with a weight; a caller's source advances the same way.
    if (weight !== 0 && session === undefined && context.random !== undefined) context.random()
    if (c.tier === 0 && session?.endpointId === undefined) {
      const e = explanationOf(c, weight, session)
      return {
        attempts: [{ model, endpoint, reason: e.reason }],
        steps: [step("weighted", e.weighted), step("plan", e.plan)]
      }
    }
    const how = weightedChoice(c, 1, weight > 0 ? 1 : undefined, session)
    steps.push(step("weighted", `${label(c)}: ${how}`))
    why = withNote(how, c)
  }
  const sticky = session?.endpointId
  if (sticky !== undefined) {
    if (sticky !== endpoint.id) {
      steps.push(step("sticky", `session endpoint ${sticky} is not eligible for this request`))
    } else if (!healthy(c)) {
      steps.push(step("sticky", `session endpoint ${label(c)} not applied: it is not healthy`))
    } else {
      why = withNote("sticky session endpoint", c)
      steps.push(step("sticky", `${label(c)} first: it served this session last`))
    }
  }
  const reason = `${c.role} ${label(c)}: ${why}`
  steps.push(step("plan", `1. ${reason}`))
  return { attempts: [{ model, endpoint, reason }], steps }
}

/**
 * A cooling-down endpoint (an open circuit, a provider's Retry-After still running) is a last resort for the whole
 * plan, not only among its model's endpoints: another candidate model's endpoint is tried before it, so that a held
 * endpoint is not asked again while a fallback model could answer. Endpoints placed by `provider.order` stay where
 * the order put them.
 */
const lastResortsLast = (
  ranked: ReadonlyArray<Ranked>,
  prefs: Resolved,
  steps: Array<PipelineStep>
): ReadonlyArray<Ranked> => {
  const order = prefs.order
  const held = ranked.filter((r) =>
    r.candidate.tier === 3 && (order === undefined || !order.includes(r.candidate.endpoint.provider.toLowerCase()))
  )
  if (held.length === 0 || held.length === ranked.length) return ranked
  const at = ranked.indexOf(held[0])
  if (ranked.slice(at).every((r) => held.includes(r))) return ranked
  steps.push(
    step("health", `cooling down, tried after every other candidate: ${held.map((r) => label(r.candidate)).join(", ")}`)
  )
  return [...ranked.filter((r) => !held.includes(r)), ...held]
}

/**
 * Plans the attempts for a request. See the module documentation for the rules; `context` carries health, the
 * session and the random source (all optional). Fails with `NotFound` when the requested model is unknown or has no
 * endpoint, and with `InvalidRequest` when the filters leave nothing.
 */
export const plan = (
  request: RouteRequest,
  snapshot: CatalogueSnapshot,
  context: RouteContext = {}
): Either.Either<RoutePlan, NotFound | InvalidRequest> => {
  const primary = snapshot.models.get(request.model)
  if (primary === undefined || primary.endpoints.length === 0) {
    return Either.left(new NotFound({ message: `Model '${request.model}' is not available on this gateway` }))
  }
  if (
    primary.endpoints.length === 1 && request.provider == null && (request.models ?? []).length === 0 &&
    (request.fallbacks ?? []).length === 0
  ) {
    const single = planOne(request, primary, context)
    if (single !== undefined) return Either.right(single)
  }
  const steps: Array<PipelineStep> = []
  const seen = new Set<string>([primary.id])
  const models: Array<{ model: Model; role: string }> = [{ model: primary, role: "requested model" }]
  const extra = (ids: ReadonlyArray<string>, role: string) => {
    for (const id of ids) {
      if (seen.has(id)) continue
      seen.add(id)
      const model = snapshot.models.get(id)
      if (model === undefined) steps.push(step("skip-model", `${role} '${id}' is not in the catalogue`))
      else models.push({ model, role })
    }
  }
  extra(request.models ?? [], "candidate model")
  extra((request.fallbacks ?? []).map((f) => f.model), "fallback model")

  const prefs = resolve(request.provider)
  const health = context.health
  const session = context.session

  const groups: Array<Array<Candidate>> = []
  const removed = new Map<string, Array<string>>()
  const needs = request.requirements
  for (const { model, role } of models) {
    const group: Array<Candidate> = []
    const clampable: Array<{ endpoint: Endpoint; maxTokens: number }> = []
    const candidate = (endpoint: Endpoint, maxTokens?: number): Candidate => {
      const h = health?.get(endpoint.id)
      const price = promptAndCompletion(endpoint)
      return { model, role, endpoint, price, health: h, ...tierOf(h, prefs, context.now), maxTokens }
    }
    for (const endpoint of model.endpoints) {
      const out = capability(endpoint, needs) ?? preference(endpoint, needs, prefs)
      if (out !== undefined) {
        const name = `${model.id} via ${endpoint.provider}`
        steps.push(step("filter", `${name} removed by ${out.filter}: ${out.reason}`))
        const list = removed.get(out.filter) ?? []
        list.push(`${name} (${out.reason})`)
        removed.set(out.filter, list)
        const limit = model.maxTokensPolicy === "strict" ? undefined : clampFor(endpoint, needs)
        if (limit !== undefined && preference(endpoint, needs, prefs) === undefined) {
          clampable.push({ endpoint, maxTokens: limit })
        }
        continue
      }
      group.push(candidate(endpoint))
    }
    if (group.length === 0 && clampable.length > 0) {
      for (const { endpoint, maxTokens } of clampable) {
        steps.push(step(
          "clamp",
          `${model.id} via ${endpoint.provider}: max_tokens ${needs.maxTokens} lowered to its limit of ${maxTokens}`
        ))
        group.push(candidate(endpoint, maxTokens))
      }
    }
    if (group.length > 0) {
      if (prefs.partition === "none" && groups.length > 0) groups[0].push(...group)
      else groups.push(group)
    }
  }
  if (groups.length === 0) {
    const why = Array.from(removed, ([filter, items]) => `${filter} removed ${items.join(", ")}`).join("; ")
    return Either.left(
      new InvalidRequest({
        message: `No endpoints found that can serve this request (${[...removed.keys()].join(", ")}): ${why}`
      })
    )
  }

  for (const group of groups) {
    for (const c of group) if (c.tier >= 2) steps.push(step("health", `${label(c)}: ${c.note}`))
    for (const c of group) if (c.tier === 1) steps.push(step("preference", `${label(c)}: ${c.note}, moved after`))
  }
  if (prefs.order !== undefined) {
    steps.push(step(
      "order",
      `provider.order ${prefs.order.join(", ")}${prefs.allowFallbacks ? ", then the others" : " only"}`
    ))
  }
  if (prefs.sortBy !== undefined) steps.push(step("sort", `sorted by ${prefs.sortBy}, partition ${prefs.partition}`))
  else if (prefs.partition === "none") steps.push(step("sort", "endpoints of all candidate models ranked together"))

  const draw = session === undefined ?
    (context.random ?? SeededRandom.make(request.model)) :
    (c: Candidate) => SeededRandom.uniform(`${session.key}\u0000${c.endpoint.id}`)

  const orderGroup = (group: ReadonlyArray<Candidate>): Array<Ranked> => {
    const ranked: Array<Ranked> = []
    let rest = group
    const order = prefs.order
    if (order !== undefined) {
      const position = (c: Candidate) => order.indexOf(c.endpoint.provider.toLowerCase())
      const listed = group.filter((c) => position(c) >= 0).sort((a, b) => position(a) - position(b))
      for (const c of listed) ranked.push({ candidate: c, why: `provider.order #${position(c) + 1}` })
      rest = group.filter((c) => position(c) < 0)
    }
    const tiers = ([0, 1, 2, 3] as const).map((t) => rest.filter((c) => c.tier === t))
    if (prefs.sortBy !== undefined) {
      const sort = sorts[prefs.sortBy]
      for (const tier of tiers) {
        for (const c of tier.sort(sort.compare)) ranked.push({ candidate: c, why: withNote(sort.why(c), c) })
      }
      return ranked
    }
    let picked = false
    for (const [t, tier] of tiers.entries()) {
      const sorted = tier.sort(byPrice)
      if (!picked && t <= 1 && sorted.length > 0) {
        picked = true
        const weights = sorted.map((c) => weightOf(c.price))
        const keys = sorted.map((c, i) => (weights[i] === 0 ? Infinity : -Math.log(1 - draw(c)) / weights[i]))
        let best = 0
        for (let i = 1; i < keys.length; i++) if (keys[i] < keys[best]) best = i
        const total = weights.reduce((a, b) => a + b, 0)
        const chosen = sorted[best]
        const how = weightedChoice(chosen, sorted.length, total > 0 ? weights[best] / total : undefined, session)
        steps.push(step("weighted", `${label(chosen)}: ${how}`))
        ranked.push({ candidate: chosen, why: withNote(how, chosen) })
        sorted.splice(best, 1)
      }
      for (const c of sorted) {
        ranked.push({ candidate: c, why: withNote(`fallback by price, ${perMillion(c.price)}`, c) })
      }
    }
    return ranked
  }
  const ordered = groups.map(orderGroup)

  const sticky = session?.endpointId
  if (sticky !== undefined) {
    const g = ordered.findIndex((group) => group.some((r) => r.candidate.endpoint.id === sticky))
    if (prefs.order !== undefined) {
      steps.push(step("sticky", `session endpoint ${sticky} not applied: provider.order is given`))
    } else if (g < 0) {
      steps.push(step("sticky", `session endpoint ${sticky} is not eligible for this request`))
    } else {
      const i = ordered[g].findIndex((r) => r.candidate.endpoint.id === sticky)
      const c = ordered[g][i].candidate
      if (!healthy(c)) {
        steps.push(step("sticky", `session endpoint ${label(c)} not applied: it is not healthy`))
      } else {
        ordered[g].splice(i, 1)
        ordered[g].unshift({ candidate: c, why: withNote("sticky session endpoint", c) })
        steps.push(step("sticky", `${label(c)} first: it served this session last`))
      }
    }
  }

  let final = lastResortsLast(ordered.flat(), prefs, steps)
  if (!prefs.allowFallbacks && prefs.order === undefined) {
    const models = new Set<string>()
    const dropped: Array<string> = []
    final = final.filter((r) => {
      const id = r.candidate.model.id
      if (models.has(id)) {
        dropped.push(label(r.candidate))
        return false
      }
      models.add(id)
      return true
    })
    if (dropped.length > 0) {
      steps.push(step("allow_fallbacks", `allow_fallbacks is false: not trying ${dropped.join(", ")}`))
    }
  }

  const attempts: Array<Attempt> = final.map(({ candidate: c, why }) =>
    c.maxTokens === undefined
      ? { model: c.model, endpoint: c.endpoint, reason: `${c.role} ${label(c)}: ${why}` }
      : {
        model: c.model,
        endpoint: c.endpoint,
        reason: `${c.role} ${label(c)}: ${why}; max_tokens clamped to ${c.maxTokens}`,
        maxTokens: c.maxTokens
      }
  )
  steps.push(step("plan", attempts.map((a, i) => `${i + 1}. ${a.reason}`).join("; ")))
  return Either.right({ attempts, steps })
}
