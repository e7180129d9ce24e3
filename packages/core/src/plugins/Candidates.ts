/**
 * What the router plugins share: the routable models of a catalogue, their cost and quality for a task, the cost
 * percentile and the cost tier bands of spec 2.1.3, and the shape of a router's choice.
 *
 * - A model is routable when it has at least one endpoint, answers in text, and is not the router slug itself.
 * - A router chooses among the routable models that the route planner would plan this request on (`servable`: its
 *   filters, the API first, with the request's needs and provider preferences), never one that it would refuse; when
 *   none is left, the request gets the planner's own refusal (400 "No endpoints found that can serve this request").
 * - The cost of a model is the `prompt + completion` price per token of its cheapest endpoint; a price that is not a
 *   finite non-negative decimal makes that endpoint cost `Infinity` (ranked most expensive).
 * - The quality of a model for a task is its configured score, clamped to 0..1. A model without a score for the task
 *   is not ranked for it; when no candidate is ranked, every candidate is, at the neutral score 0.5.
 * - The cost percentile of a candidate among n candidates is `100 * r / (n - 1)`, where r is the number of
 *   candidates strictly cheaper (ties share the lower rank); a lone candidate is at 0. The cheapest is at 0, the
 *   dearest at 100.
 * - Bands: low [0,20), medium [20,40), high [40,60), xhigh [60,80), max [80,100].
 */
import * as Either from "effect/Either"
import { type CatalogueSnapshot, type Model, outputsText, type Task } from "../catalogue/Catalogue.js"
import { InvalidRequest, Unavailable } from "../errors/GatewayError.js"
import * as RoutePlanner from "../routing/RoutePlanner.js"
import type { PipelineStep, RouteRequest } from "../routing/RoutePlanner.js"
import type { TaskClassifierService } from "./TaskClassifier.js"

/** A cost tier of the router plugins. */
export type CostTier = "low" | "medium" | "high" | "xhigh" | "max"

/** The tiers from cheapest to dearest; tier i covers percentiles [20i, 20i + 20), the last one includes 100. */
export const costTiers: ReadonlyArray<CostTier> = ["low", "medium", "high", "xhigh", "max"]

/** The neutral quality of a model that has no score for any candidate's task. */
export const NEUTRAL_SCORE = 0.5

/** A model the router may choose, with its cost and quality for the classified task. */
export interface Candidate {
  readonly model: Model
  /** USD per prompt token plus per completion token, of the cheapest endpoint. */
  readonly cost: number
  /** Quality for the task, 0..1. */
  readonly score: number
  /** Cost percentile among the candidates, 0..100. */
  readonly percentile: number
}

/** What a router plugin decided: the model to route to, the task it classified and why. */
export interface Choice {
  readonly modelId: string
  readonly task: Task
  readonly steps: ReadonlyArray<PipelineStep>
}

/** The `type` of the pipeline steps router plugins report; `name` is the plugin id. */
export const STEP_TYPE = "plugin"

const price = (decimal: string): number => {
  const n = Number(decimal)
  return decimal.trim() !== "" && Number.isFinite(n) && n >= 0 ? n : Infinity
}

/** The cost of a model: the `prompt + completion` price of its cheapest endpoint (`Infinity` when none has one). */
export const modelCost = (model: Model): number => {
  let best = Infinity
  for (const endpoint of model.endpoints) {
    const cost = price(endpoint.pricing.prompt) + price(endpoint.pricing.completion)
    if (cost < best) best = cost
  }
  return best
}

/**
 * The routable models of a snapshot, in catalogue order: at least one endpoint, answering in text (not a speech-only
 * model), and not the router slug.
 */
export const routable = (snapshot: CatalogueSnapshot, routerSlug: string): ReadonlyArray<Model> => {
  const out: Array<Model> = []
  for (const model of snapshot.models.values()) {
    if (model.endpoints.length > 0 && model.id !== routerSlug && outputsText(model)) out.push(model)
  }
  return out
}

/**
 * What the live route will ask the route planner for a model, were the router to choose it: the request's API, what
 * its body needs of an endpoint, its provider preferences.
 */
export type RouteFor = (model: Model) => RouteRequest

/** What every router plugin starts from. */
export interface RouterInput {
  readonly messages: unknown
  readonly system: unknown
  readonly catalogue: CatalogueSnapshot
  readonly classifier: TaskClassifierService
  /** The model slug that selects a router; never a candidate. */
  readonly routerSlug: string
  /** The live route's route request for each model: the router chooses among the models it can be planned on. */
  readonly route: RouteFor
}

/** A router plugin's start: its steps so far, the classified task, and the models it may route to. */
export interface Start {
  readonly steps: Array<PipelineStep>
  /** Adds a step of this plugin to the pipeline. */
  readonly step: (summary: string) => void
  readonly task: Task
  /** The routable models, narrowed, that can serve the request (never empty). */
  readonly pool: ReadonlyArray<Model>
}

/** A router's own narrowing of the routable models (the auto-router's `allowed_models`), before `servable`. */
export type Narrow = (
  pool: ReadonlyArray<Model>,
  step: (summary: string) => void
) => Either.Either<ReadonlyArray<Model>, InvalidRequest>

/**
 * The models among `models` that the route planner would plan the request on (`RoutePlanner.serves`), with a step
 * when that leaves some out; when it leaves none, the planner's refusal of the request on all of them, which names
 * each endpoint its filters removed and why.
 */
export const servable = (
  input: Pick<RouterInput, "catalogue" | "route">,
  models: ReadonlyArray<Model>,
  step: (summary: string) => void
): Either.Either<ReadonlyArray<Model>, InvalidRequest> => {
  const kept = models.filter((model) => RoutePlanner.serves(model, input.route(model)))
  if (kept.length === models.length) return Either.right(models)
  if (kept.length > 0) {
    const keptSet = new Set(kept)
    const out = showList(models.filter((model) => !keptSet.has(model)).map((model) => model.id))
    step(`${kept.length} of ${models.length} models can serve this request; the route's filters leave out ${out}`)
    return Either.right(kept)
  }
  const [first, ...others] = models
  const refused = RoutePlanner.plan(
    { ...input.route(first), models: others.map((model) => model.id), fallbacks: undefined },
    input.catalogue
  )
  // `serves` and `plan` apply the same filters, so the plan is refused; the fallback only keeps the types honest.
  return Either.left(
    Either.isLeft(refused) && refused.left._tag === "InvalidRequest"
      ? refused.left
      : new InvalidRequest({ message: "No endpoints found that can serve this request" })
  )
}

/**
 * Classifies the conversation and lists the models the router may choose: the routable ones, narrowed by `narrow`
 * when given, that can serve the request (`servable`). Unavailable when the catalogue has no routable model; the
 * narrowing's or the planner's refusal when none is left.
 */
export const start = (
  name: string,
  input: RouterInput,
  narrow?: Narrow
): Either.Either<Start, InvalidRequest | Unavailable> => {
  const steps: Array<PipelineStep> = []
  const step = (summary: string) => {
    steps.push({ type: STEP_TYPE, name, summary })
  }
  const task = input.classifier.classify(input.messages, input.system)
  step(`classified the conversation as ${task}`)
  const all = routable(input.catalogue, input.routerSlug)
  if (all.length === 0) {
    return Either.left(new Unavailable({ message: `${name}: the catalogue has no model with an endpoint to route to` }))
  }
  const narrowed = narrow === undefined ? Either.right(all) : narrow(all, step)
  return Either.map(
    Either.flatMap(narrowed, (models) => servable(input, models, step)),
    (pool) => ({ steps, step, task, pool })
  )
}

/** The cost percentile of each cost among `costs` (same order): `100 * r / (n - 1)`, ties at the lower rank. */
export const percentiles = (costs: ReadonlyArray<number>): ReadonlyArray<number> => {
  const n = costs.length
  if (n <= 1) return costs.map(() => 0)
  const sorted = [...costs].sort((a, b) => a - b)
  const rankOf = new Map<number, number>()
  sorted.forEach((cost, i) => {
    if (!rankOf.has(cost)) rankOf.set(cost, i)
  })
  return costs.map((cost) => (rankOf.get(cost)! * 100) / (n - 1))
}

/** The band of a cost percentile: low [0,20), medium [20,40), high [40,60), xhigh [60,80), max [80,100]. */
export const tierOf = (percentile: number): CostTier =>
  percentile >= 80
    ? "max"
    : percentile >= 60
    ? "xhigh"
    : percentile >= 40
    ? "high"
    : percentile >= 20
    ? "medium"
    : "low"

const clamp = (score: number): number => Number.isNaN(score) ? NEUTRAL_SCORE : Math.min(1, Math.max(0, score))

/**
 * The candidates for a task among `models`: the models with a score for the task, or every model at the neutral
 * score when none has one (`ranked` false), each with its cost and cost percentile among the candidates.
 */
export const rank = (
  models: ReadonlyArray<Model>,
  task: Task
): { readonly candidates: ReadonlyArray<Candidate>; readonly ranked: boolean } => {
  let scored = models.filter((model) => model.scores?.[task] !== undefined)
  const ranked = scored.length > 0
  if (!ranked) scored = [...models]
  const costs = scored.map(modelCost)
  const pcts = percentiles(costs)
  return {
    candidates: scored.map((model, i) => ({
      model,
      cost: costs[i],
      score: ranked ? clamp(model.scores![task]!) : NEUTRAL_SCORE,
      percentile: pcts[i]
    })),
    ranked
  }
}

/** Orders candidates best first: higher score, then cheaper, then model id. */
export const byQuality = (a: Candidate, b: Candidate): number =>
  b.score - a.score || a.cost - b.cost || (a.model.id < b.model.id ? -1 : a.model.id > b.model.id ? 1 : 0)

/** Orders candidates cheapest first: cheaper, then higher score, then model id. */
export const byCost = (a: Candidate, b: Candidate): number =>
  a.cost - b.cost || b.score - a.score || (a.model.id < b.model.id ? -1 : a.model.id > b.model.id ? 1 : 0)

/** A short description of a candidate for pipeline summaries. */
export const describe = (c: Candidate): string =>
  `${c.model.id} (score ${round(c.score)}, cost percentile ${round(c.percentile)})`

/** Rounds to at most 2 decimals for display. */
export const round = (n: number): string => Number.isFinite(n) ? String(Math.round(n * 100) / 100) : String(n)

/** A short rendering of a pattern list for messages. */
export const showList = (items: ReadonlyArray<string>, max = 3): string =>
  `[${items.slice(0, max).map((s) => JSON.stringify(s.length > 64 ? `${s.slice(0, 64)}...` : s)).join(", ")}${
    items.length > max ? `, ... (${items.length} in all)` : ""
  }]`
