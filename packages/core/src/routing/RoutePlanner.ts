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
 *    `enforce_distillable_text`, `quantizations` and `max_price`. **Prefer, then clamp**: when none of a model's
 *    endpoints can honour the requested `max_tokens` but some would pass every filter with their own
 *    `maxCompletionTokens`, those are kept with the attempt's `maxTokens` lowered to that limit (a `clamp` step),
 *    unless the model's `maxTokensPolicy` is `strict`.
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
 *    **A stored response** (`previous_response_id` whose endpoint the gateway knows: `context.response`) keeps the
 *    plan to that endpoint's provider, the endpoint first while healthy, whatever `provider.order` says: no other
 *    provider holds the response (`ResponseAffinity`).
 * 6. **`allow_fallbacks: false`** without `order`: only the first endpoint of each candidate model is kept (no other
 *    provider for the same model; model fallbacks still apply). With `order`, exactly the listed providers are kept.
 *
 * The weighted choice draws one number per stable endpoint, in price order, from the random source: a source that
 * always answers 0 makes the cheapest endpoint go first (ties in catalogue order), which example tests may use.
 *
 * `serves` says, with the same filters, whether a plan of a request on one model alone would be made: the router
 * plugins choose among the models it accepts, so that the model they choose is never refused here.
 *
 * The parts live in their own modules: the types (`RouteTypes`), the preferences as the planner reads them
 * (`ResolvedPreferences`), the filters (`RouteFilters`), the candidates and their health tiers (`RouteCandidates`),
 * the weighted choice (`WeightedChoice`), the order (`CandidateOrder`) and the stored response (`ResponseAffinity`);
 * this module makes the plan of them and re-exports what callers use.
 */
import * as Either from "effect/Either"
import {
  type CatalogueSnapshot,
  type Endpoint,
  type Model,
  outputsEmbeddings,
  outputsText
} from "../catalogue/Catalogue.js"
import { InvalidRequest, NotFound } from "../errors/GatewayError.js"
import { lastResortsLast, orderGroup } from "./CandidateOrder.js"
import { NO_PREFERENCES, resolve, type Resolved } from "./ResolvedPreferences.js"
import { keepToStoredResponse } from "./ResponseAffinity.js"
import type { Candidate } from "./RouteCandidates.js"
import { healthy, label, tierOf, withNote } from "./RouteCandidates.js"
import { capability, clampFor, perMillion, preference, promptAndCompletion } from "./RouteFilters.js"
import type { Attempt, PipelineStep, Requirements, RouteContext, RoutePlan, RouteRequest } from "./RouteTypes.js"
import { step } from "./RouteTypes.js"
import { drawOf, explanationOf, weightedChoice, weightOf } from "./WeightedChoice.js"

export type { EndpointHealth, HealthSnapshot, Percentiles } from "../health/EndpointStats.js"
export type { ProviderPreferences, Route } from "./ProviderPreferences.js"
export { effective as effectivePreferences } from "./ProviderPreferences.js"
export type { Exclusion } from "./RouteFilters.js"
export { excludedBy, exclusion, usedParameters } from "./RouteFilters.js"
export type {
  Attempt,
  PipelineStep,
  Requirements,
  RouteContext,
  RoutePlan,
  RouteRequest,
  Session,
  StoredResponse
} from "./RouteTypes.js"
export type { Random } from "./SeededRandom.js"
export { make as seededRandom } from "./SeededRandom.js"
export { PRICE_FLOOR } from "./WeightedChoice.js"

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

/** The APIs whose answers are text (not embeddings, nor speech, which routes by requirements without an API). */
const TEXT_APIS: ReadonlySet<string> = new Set(["messages", "chat", "responses"])

/**
 * What `api` needs a model to output, when it needs anything: text for the text APIs, embeddings for `embeddings`
 * (speech routes by its own rules, without an API). A model that does not output it is refused as the requested
 * model (400) and skipped as a candidate or fallback: sent to its upstream, the request would fail there every time
 * (a speech-only upstream has no `/chat/completions` nor `/embeddings`), told as a 502 that clients retry.
 */
const outputNeeded = (api: string | undefined): "text" | "embeddings" | undefined =>
  api === "embeddings" ? "embeddings" : api !== undefined && TEXT_APIS.has(api) ? "text" : undefined

/** Whether `model` outputs what `needed` names (anything when nothing is needed). */
const outputs = (model: Model, needed: "text" | "embeddings" | undefined): boolean =>
  needed === "text" ? outputsText(model) : needed === "embeddings" ? outputsEmbeddings(model) : true

/**
 * The routes that serve what a model outputs other than text (audio: speech; embeddings), the advice of the 400 that
 * refuses it on a route that does not.
 */
const routesFor = (model: Model): ReadonlyArray<string> => {
  const routes: Array<string> = []
  if (model.outputModalities?.includes("audio")) routes.push("POST /v1/audio/speech")
  if (model.outputModalities?.includes("embeddings")) routes.push("POST /v1/embeddings")
  return routes
}

/** The 400 of a requested model that does not output what its API needs. */
const wrongOutput = (model: Model, needed: "text" | "embeddings"): InvalidRequest => {
  const routes = routesFor(model)
  return new InvalidRequest({
    message: `Model '${model.id}' ${needed === "text" ? "does not answer in text" : "does not output embeddings"} ` +
      `(it outputs ${(model.outputModalities ?? []).join(", ")})${
        routes.length === 0 ? "" : `; send it to ${routes.join(" or ")}`
      }`,
    param: "model"
  })
}

/** The filter that removes an endpoint from a plan (the capabilities, then the preferences), or undefined. */
const filteredBy = (endpoint: Endpoint, needs: Requirements, prefs: Resolved) =>
  capability(endpoint, needs) ?? preference(endpoint, needs, prefs)

/**
 * The `max_tokens` with which a plan keeps an endpoint the filters removed when its model has none kept as it is
 * (prefer, then clamp): its own limit, when with it the endpoint passes every filter and the model is not `strict`.
 */
const clampedTo = (model: Model, endpoint: Endpoint, needs: Requirements, prefs: Resolved): number | undefined => {
  if (model.maxTokensPolicy === "strict") return undefined
  const limit = clampFor(endpoint, needs)
  return limit !== undefined && preference(endpoint, needs, prefs) === undefined ? limit : undefined
}

/**
 * Whether `plan` would plan a request on `model` as its requested model, with no candidate or fallback models: the
 * model has an endpoint, outputs what its API needs (text, embeddings), and one of its endpoints passes the filters
 * (or would with `max_tokens` clamped). The router plugins choose among such models, so that the route of their choice is
 * never refused.
 */
export const serves = (
  model: Model,
  request: Pick<RouteRequest, "requirements" | "provider">
): boolean => {
  const needs = request.requirements
  if (!outputs(model, outputNeeded(needs.api))) return false
  const prefs = request.provider == null ? NO_PREFERENCES : resolve(request.provider)
  return model.endpoints.some((endpoint) =>
    filteredBy(endpoint, needs, prefs) === undefined || clampedTo(model, endpoint, needs, prefs) !== undefined
  )
}

/**
 * Plans the attempts for a request. See the module documentation for the rules; `context` carries health, the
 * session and the random source (all optional). Fails with `NotFound` when the requested model is unknown or has no
 * endpoint, and with `InvalidRequest` when the filters leave nothing, or when a text API (messages, chat, responses)
 * names a model that does not answer in text (a speech or embeddings model), or embeddings one that outputs no
 * embeddings (a speech model); as a candidate or fallback, such a model is skipped.
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
  const needed = outputNeeded(request.requirements.api)
  if (needed !== undefined && !outputs(primary, needed)) return Either.left(wrongOutput(primary, needed))
  if (
    primary.endpoints.length === 1 && request.provider == null && (request.models ?? []).length === 0 &&
    (request.fallbacks ?? []).length === 0 && context.response === undefined
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
      else if (!outputs(model, needed)) {
        const what = needed === "embeddings" ? "does not output embeddings" : "does not answer in text"
        steps.push(step("skip-model", `${role} '${id}' ${what}`))
      } else models.push({ model, role })
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
      const out = filteredBy(endpoint, needs, prefs)
      if (out !== undefined) {
        const name = `${model.id} via ${endpoint.provider}`
        steps.push(step("filter", `${name} removed by ${out.filter}: ${out.reason}`))
        const list = removed.get(out.filter) ?? []
        list.push(`${name} (${out.reason})`)
        removed.set(out.filter, list)
        const limit = clampedTo(model, endpoint, needs, prefs)
        if (limit !== undefined) clampable.push({ endpoint, maxTokens: limit })
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

  const draw = drawOf(context, request.model)

  const ordered = groups.map((group) => orderGroup(group, prefs, draw, session, steps))

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

  const response = context.response
  const ranked = response === undefined ? ordered.flat() : keepToStoredResponse(ordered.flat(), response, steps)
  let final = lastResortsLast(ranked, prefs, steps)
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
