/**
 * The `auto-router` and `auto-beta-router` plugins (spec 2.1.3), used when `model` is the router slug or the plugin
 * is given: a pure function from the plugin options, the conversation and a catalogue snapshot to a model id, the
 * classified task and the pipeline steps that say why.
 *
 * 1. Classify the task with the `TaskClassifier` port.
 * 2. Candidates: the routable models (at least one endpoint, not the router slug), filtered by `allowed_models`
 *    then `excluded_models` (see `ModelPatterns`; exclusion always wins), then to those the route planner would plan
 *    this request on (see `Candidates.servable`: an embeddings-only model is no candidate for a chat request). An
 *    empty result fails with `InvalidRequest` naming the filter that emptied it (for the last one, the planner's
 *    refusal); a catalogue with no routable model with `Unavailable`.
 * 3. `pin_model` (auto-router only): the `model` of the latest assistant message is chosen when it is a candidate.
 *    Clients echo answers back, so the raw `messages` (not the decoded ones, which drop unknown keys) must be given.
 * 4. Rank the candidates that have a score for the task (all at 0.5 when none has), with cost percentiles among
 *    them (see `Candidates`).
 * 5. `cost_tier` (wins over `cost_quality_tradeoff`): keep the candidates in that band; when it is empty, the
 *    nearest non-empty band (ties go to the cheaper band). Choose the best score, then the cheaper, then by id.
 * 6. Otherwise `cost_quality_tradeoff` t (0..10, default 9): maximise `(10 - t) * quality + t * cheapness`, where
 *    quality is the score min-max normalised over the candidates (1 when all are equal) and cheapness is
 *    `1 - percentile / 100`. t = 0 chooses the best score, t = 10 the cheapest, 5 weighs both alike. Ties: the
 *    better score, then the cheaper, then by id.
 */
import * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"
import type { CatalogueSnapshot, Model } from "../catalogue/Catalogue.js"
import { InvalidRequest, Unavailable } from "../errors/GatewayError.js"
import type { Plugin } from "../messages/MessagesRequest.js"
import type { Candidate, Choice, CostTier, Narrow, RouteFor } from "./Candidates.js"
import { byQuality, costTiers, describe, rank, round, showList, start, tierOf } from "./Candidates.js"
import { partitionModels } from "./ModelPatterns.js"
import type { TaskClassifierService } from "./TaskClassifier.js"

/** The decoded options of an `auto-router` or `auto-beta-router` plugin. */
export type AutoRouterPlugin = Extract<Plugin, { readonly id: "auto-router" | "auto-beta-router" }>

/** The default `cost_quality_tradeoff` when no cost setting is given. */
export const DEFAULT_TRADEOFF = 9

/** What `choose` reads. */
export interface ChooseInput {
  readonly plugin: AutoRouterPlugin
  /** The request's `messages` as sent (assistant turns may carry the `model` that answered them). */
  readonly messages: unknown
  readonly system: unknown
  readonly catalogue: CatalogueSnapshot
  readonly classifier: TaskClassifierService
  /** The model slug that selects the auto-router (`auto` by default); never a candidate. */
  readonly routerSlug: string
  /** The live route's route request for each model; the router chooses among the models it can be planned on. */
  readonly route: RouteFor
  /** The plugin's path in the body for error `param`s, e.g. `plugins[0]`; defaults to `plugins`. */
  readonly param?: string | undefined
}

/** The `model` of the latest assistant message, when it has one. */
export const latestAssistantModel = (messages: unknown): string | undefined => {
  if (!Array.isArray(messages)) return undefined
  for (let i = messages.length - 1; i >= 0; i--) {
    const message: unknown = messages[i]
    if (Predicate.isRecord(message) && message.role === "assistant") {
      return typeof message.model === "string" && message.model !== "" ? message.model : undefined
    }
  }
  return undefined
}

/**
 * The candidates in the band of `tier`, or in the nearest non-empty band (ties to the cheaper one), with the band
 * used. `candidates` must not be empty.
 */
export const inTier = (
  candidates: ReadonlyArray<Candidate>,
  tier: CostTier
): { readonly tier: CostTier; readonly candidates: ReadonlyArray<Candidate> } => {
  const bands: Array<Array<Candidate>> = costTiers.map(() => [])
  for (const c of candidates) bands[costTiers.indexOf(tierOf(c.percentile))].push(c)
  const wanted = costTiers.indexOf(tier)
  for (let d = 0; d < costTiers.length; d++) {
    for (const i of [wanted - d, wanted + d]) {
      if (i >= 0 && i < costTiers.length && bands[i].length > 0) return { tier: costTiers[i], candidates: bands[i] }
    }
  }
  return { tier, candidates }
}

/** The candidate that maximises `(10 - t) * quality + t * cheapness` (see the module documentation). */
export const byTradeoff = (candidates: ReadonlyArray<Candidate>, tradeoff: number): Candidate => {
  let lo = Infinity
  let hi = -Infinity
  for (const c of candidates) {
    if (c.score < lo) lo = c.score
    if (c.score > hi) hi = c.score
  }
  const utility = (c: Candidate) =>
    (10 - tradeoff) * (hi > lo ? (c.score - lo) / (hi - lo) : 1) + tradeoff * (1 - c.percentile / 100)
  let best = candidates[0]
  let bestUtility = utility(best)
  for (let i = 1; i < candidates.length; i++) {
    const c = candidates[i]
    const u = utility(c)
    if (u > bestUtility || (u === bestUtility && byQuality(c, best) < 0)) {
      best = c
      bestUtility = u
    }
  }
  return best
}

/** The routable models that `allowed_models` and `excluded_models` keep; a refusal naming the one that kept none. */
const byPatterns = (plugin: AutoRouterPlugin, param: string): Narrow => (pool, step) => {
  const name = plugin.id
  const allowed = plugin.allowed_models
  const excluded = plugin.excluded_models
  const filtered = partitionModels(pool.map((m) => m.id), allowed, excluded)
  if (filtered.kept.length === 0) {
    const byAllowed = filtered.excluded.length === 0
    const field = byAllowed ? "allowed_models" : "excluded_models"
    const message = byAllowed ?
      `allowed_models ${showList(allowed ?? [])} matches none of the ${pool.length} available models` :
      `excluded_models ${showList(excluded ?? [])} excludes every model that ${
        allowed === undefined || allowed.length === 0 ?
          `is available (${pool.length})` :
          `allowed_models ${showList(allowed)} admits (${filtered.excluded.length})`
      }`
    return Either.left(
      new InvalidRequest({
        message: `${param}.${field}: ${name} has no candidate model: ${message}`,
        param: `${param}.${field}`
      })
    )
  }
  const keptIds = new Set(filtered.kept)
  const models: ReadonlyArray<Model> = pool.filter((m) => keptIds.has(m.id))
  if (filtered.notAllowed.length > 0 || filtered.excluded.length > 0) {
    step(
      `${models.length} of ${pool.length} models are candidates` +
        (filtered.notAllowed.length > 0 ? `; ${filtered.notAllowed.length} not in allowed_models` : "") +
        (filtered.excluded.length > 0 ? `; ${filtered.excluded.length} removed by excluded_models` : "")
    )
  }
  return Either.right(models)
}

/** Chooses the model of an auto-router or auto-beta-router request; see the module documentation. */
export const choose = (input: ChooseInput): Either.Either<Choice, InvalidRequest | Unavailable> => {
  const { plugin } = input
  const name = plugin.id
  const param = input.param ?? "plugins"
  const tradeoff = plugin.cost_quality_tradeoff
  if (tradeoff !== undefined && !(Number.isInteger(tradeoff) && tradeoff >= 0 && tradeoff <= 10)) {
    return Either.left(
      new InvalidRequest({
        message: `${param}.cost_quality_tradeoff: must be an integer from 0 to 10, got ${tradeoff}`,
        param: `${param}.cost_quality_tradeoff`
      })
    )
  }
  if (plugin.cost_tier !== undefined && !costTiers.includes(plugin.cost_tier)) {
    return Either.left(
      new InvalidRequest({
        message: `${param}.cost_tier: Expected ${costTiers.map((t) => JSON.stringify(t)).join(" | ")}, actual ${
          JSON.stringify(plugin.cost_tier)
        }`,
        param: `${param}.cost_tier`
      })
    )
  }

  const started = start(name, input, byPatterns(plugin, param))
  if (Either.isLeft(started)) return Either.left(started.left)
  const { pool: models, step, steps, task } = started.right
  const keptIds = new Set(models.map((m) => m.id))

  if (plugin.id === "auto-router" && plugin.pin_model === true) {
    const pinned = latestAssistantModel(input.messages)
    if (pinned !== undefined && keptIds.has(pinned)) {
      step(`pin_model: reusing ${pinned}, the model of the latest assistant message`)
      return Either.right({ modelId: pinned, task, steps })
    }
    step(
      pinned === undefined ?
        "pin_model: no earlier assistant message names a model; choosing afresh" :
        `pin_model: ${pinned} is not a candidate; choosing afresh`
    )
  }

  const { candidates, ranked } = rank(models, task)
  step(
    ranked ?
      `${candidates.length} candidate${candidates.length === 1 ? "" : "s"} ranked for ${task}` :
      `no candidate has a score for ${task}; ranking all ${candidates.length} at the neutral score 0.5`
  )

  let chosen: Candidate
  if (plugin.cost_tier !== undefined) {
    const band = inTier(candidates, plugin.cost_tier)
    chosen = [...band.candidates].sort(byQuality)[0]
    step(
      (band.tier === plugin.cost_tier ?
        `cost_tier ${band.tier}: ${band.candidates.length} candidate${
          band.candidates.length === 1 ? "" : "s"
        } in the band` :
        `cost_tier ${plugin.cost_tier}: no candidate in the band; using the nearest band, ${band.tier} (${band.candidates.length})`) +
        `; chose the best scored, ${describe(chosen)}`
    )
  } else {
    const t = tradeoff ?? DEFAULT_TRADEOFF
    chosen = byTradeoff(candidates, t)
    step(
      `cost_quality_tradeoff ${t}${tradeoff === undefined ? " (default)" : ""}: utility = ${
        round((10 - t) / 10)
      } * quality + ${round(t / 10)} * cheapness; chose ${describe(chosen)}`
    )
  }
  return Either.right({ modelId: chosen.model.id, task, steps })
}
