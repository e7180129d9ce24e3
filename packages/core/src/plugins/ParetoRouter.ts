/**
 * The `pareto-router` plugin: choose a model on the cost/quality Pareto frontier for the classified task.
 *
 * The plugin has no fields besides `id` and `enabled` (spec 2.1.3 shows none). Candidates are the routable models
 * that can serve the request, ranked for the task, exactly as the auto-router ranks them (see `Candidates`). A
 * candidate is dominated when another one is at least as good in score and at least as cheap, and strictly better in
 * one of the two; the frontier is the undominated candidates, cheapest first (their scores then rise strictly).
 *
 * The pick is the knee of the frontier: the point that maximises `quality - cost`, where quality is the score
 * min-max normalised over the frontier and cost is the point's rank on the frontier divided by (frontier size - 1)
 * (scale free: prices that differ by orders of magnitude do not flatten the cheap end). Ties go to the cheaper
 * point, so a two-point frontier yields its cheaper end. A lone frontier point is chosen as is.
 */
import * as Either from "effect/Either"
import type { CatalogueSnapshot } from "../catalogue/Catalogue.js"
import type { InvalidRequest, Unavailable } from "../errors/GatewayError.js"
import type { Plugin } from "../messages/MessagesRequest.js"
import type { Candidate, Choice, RouteFor } from "./Candidates.js"
import { byCost, describe, rank, start } from "./Candidates.js"
import type { TaskClassifierService } from "./TaskClassifier.js"

/** The decoded options of a `pareto-router` plugin. */
export type ParetoRouterPlugin = Extract<Plugin, { readonly id: "pareto-router" }>

/** What `choose` reads. */
export interface ChooseInput {
  readonly plugin: ParetoRouterPlugin
  readonly messages: unknown
  readonly system: unknown
  readonly catalogue: CatalogueSnapshot
  readonly classifier: TaskClassifierService
  /** The model slug that selects a router; never a candidate. */
  readonly routerSlug: string
  /** The live route's route request for each model; the router chooses among the models it can be planned on. */
  readonly route: RouteFor
}

/** True when `a` dominates `b`: at least as good and as cheap, strictly better in one. */
export const dominates = (a: Candidate, b: Candidate): boolean =>
  a.score >= b.score && a.cost <= b.cost && (a.score > b.score || a.cost < b.cost)

/**
 * The undominated candidates, cheapest first. Candidates equal in score and cost are all kept (none dominates
 * the other); the order among them is by model id.
 */
export const frontier = (candidates: ReadonlyArray<Candidate>): ReadonlyArray<Candidate> => {
  const sorted = [...candidates].sort(byCost)
  const out: Array<Candidate> = []
  let bestScore = -Infinity
  let bestCost = Infinity
  for (const c of sorted) {
    if (c.score > bestScore) {
      out.push(c)
      bestScore = c.score
      bestCost = c.cost
    } else if (c.score === bestScore && c.cost === bestCost) out.push(c)
  }
  return out
}

/** The knee of a frontier (cheapest first, not empty): see the module documentation. */
export const knee = (points: ReadonlyArray<Candidate>): Candidate => {
  const m = points.length
  const lo = points[0].score
  const hi = points[m - 1].score
  let best = points[0]
  let bestValue = -Infinity
  points.forEach((c, i) => {
    const value = (hi > lo ? (c.score - lo) / (hi - lo) : 0) - (m > 1 ? i / (m - 1) : 0)
    if (value > bestValue) {
      best = c
      bestValue = value
    }
  })
  return best
}

const listIds = (points: ReadonlyArray<Candidate>, max = 8): string =>
  points.slice(0, max).map((c) => c.model.id).join(", ") +
  (points.length > max ? `, ... (${points.length} in all)` : "")

/** Chooses the model of a pareto-router request; see the module documentation. */
export const choose = (input: ChooseInput): Either.Either<Choice, InvalidRequest | Unavailable> => {
  const started = start(input.plugin.id, input)
  if (Either.isLeft(started)) return Either.left(started.left)
  const { pool, step, steps, task } = started.right
  const { candidates, ranked } = rank(pool, task)
  const points = frontier(candidates)
  const chosen = knee(points)
  step(
    `${ranked ? "" : `no model has a score for ${task} (all at 0.5); `}${points.length} of ${candidates.length} ` +
      `candidates on the cost/quality frontier (${listIds(points)}); ` +
      `chose the knee, ${describe(chosen)}`
  )
  return Either.right({ modelId: chosen.model.id, task, steps })
}
