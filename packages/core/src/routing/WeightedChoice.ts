/**
 * The weighted random choice of a plan's first endpoint among the stable ones (the first non-empty of the two healthy
 * tiers): each endpoint weighs the inverse square of its price (at $1 and $3 per million the cheaper goes first 9
 * times in 10; a free endpoint weighs as if it cost `PRICE_FLOOR`, so it is chosen almost always). `choose` draws one
 * number per endpoint with a weight, in price order, from the draw of `drawOf`: the request's random source, or, with
 * a session, a hash of (session key, endpoint id), a weighted rendezvous choice every gateway process makes alike.
 * With the texts that explain the choice; those of the commonest plan are made once per endpoint (`explanationOf`).
 */
import type { Endpoint, Model } from "../catalogue/Catalogue.js"
import type { Candidate } from "./RouteCandidates.js"
import { label } from "./RouteCandidates.js"
import { perMillion } from "./RouteFilters.js"
import type { RouteContext, Session } from "./RouteTypes.js"
import * as SeededRandom from "./SeededRandom.js"

/** The price (USD per token, prompt + completion) below which an endpoint weighs as if it cost this: $0.001/M. */
export const PRICE_FLOOR = 1e-9

export const weightOf = (price: number) => (price === Infinity ? 0 : 1 / Math.max(price, PRICE_FLOOR) ** 2)

/** Why the weighted choice picked `chosen` among `count` stable endpoints, with its probability when it has one. */
export const weightedChoice = (chosen: Candidate, count: number, p: number | undefined, session: Session | undefined) =>
  `weighted random choice by inverse square price among ${count} stable endpoint${count === 1 ? "" : "s"} (${
    perMillion(chosen.price)
  }${p === undefined ? "" : `, p=${Number(p.toPrecision(3))}`}${
    session === undefined ? "" : ", derived from the session key"
  })`

/**
 * The uniform numbers of a plan's weighted choices: without a session, the context's random source (seeded with the
 * requested model id when there is none); with one, a number derived from the session key and the endpoint id.
 */
export const drawOf = (context: RouteContext, model: string): (c: Candidate) => number => {
  const session = context.session
  return session === undefined ?
    (context.random ?? SeededRandom.make(model)) :
    (c: Candidate) => SeededRandom.uniform(`${session.key}\u0000${c.endpoint.id}`)
}

/**
 * The weighted choice among `sorted`, stable endpoints in price order: each endpoint with a weight draws a number `u`
 * and the smallest `-ln(1 - u) / weight` wins (the first when none has a weight). The index of the chosen endpoint in
 * `sorted`, and why it was chosen.
 */
export const choose = (
  sorted: ReadonlyArray<Candidate>,
  draw: (c: Candidate) => number,
  session: Session | undefined
): { readonly index: number; readonly how: string } => {
  const weights = sorted.map((c) => weightOf(c.price))
  const keys = sorted.map((c, i) => (weights[i] === 0 ? Infinity : -Math.log(1 - draw(c)) / weights[i]))
  let best = 0
  for (let i = 1; i < keys.length; i++) if (keys[i] < keys[best]) best = i
  const total = weights.reduce((a, b) => a + b, 0)
  const how = weightedChoice(sorted[best], sorted.length, total > 0 ? weights[best] / total : undefined, session)
  return { index: best, how }
}

/** The texts of the commonest plan: a single endpoint, stable and meeting the preferences, no session endpoint. */
export interface Explanation {
  readonly model: Model
  readonly weighted: string
  readonly reason: string
  readonly plan: string
}

// Those texts depend only on the endpoint (and its model) and on whether the request has a session: made once each.
const explanations = new WeakMap<Endpoint, Explanation>()
const sessionExplanations = new WeakMap<Endpoint, Explanation>()

export const explanationOf = (c: Candidate, weight: number, session: Session | undefined): Explanation => {
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
