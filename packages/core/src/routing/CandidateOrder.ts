/**
 * The order of a plan's candidates. Within a group (a candidate model's endpoints, or those of all candidate models
 * with `sort.partition: "none"`), `orderGroup`: the providers of `provider.order` first, in that order, then each
 * health tier in turn, sorted by `sort` (price, throughput or latency, endpoints without stats after those with) or,
 * without it, led by the weighted choice among the stable endpoints with the rest by price. Over the whole plan,
 * `lastResortsLast`: a cooling-down endpoint goes after every other candidate.
 */
import type { SortBy } from "./ProviderPreferences.js"
import type { Resolved } from "./ResolvedPreferences.js"
import type { Candidate } from "./RouteCandidates.js"
import { label, withNote } from "./RouteCandidates.js"
import { perMillion } from "./RouteFilters.js"
import type { PipelineStep, Session } from "./RouteTypes.js"
import { step } from "./RouteTypes.js"
import { choose } from "./WeightedChoice.js"

/** A candidate at its place in the plan, with why it is there. */
export interface Ranked {
  readonly candidate: Candidate
  readonly why: string
}

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

/**
 * Orders one group of candidates (see the module documentation), reporting the weighted choice in `steps`; `draw`
 * gives the weighted choice its numbers (`WeightedChoice.drawOf`).
 */
export const orderGroup = (
  group: ReadonlyArray<Candidate>,
  prefs: Resolved,
  draw: (c: Candidate) => number,
  session: Session | undefined,
  steps: Array<PipelineStep>
): Array<Ranked> => {
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
      const { how, index } = choose(sorted, draw, session)
      const chosen = sorted[index]
      steps.push(step("weighted", `${label(chosen)}: ${how}`))
      ranked.push({ candidate: chosen, why: withNote(how, chosen) })
      sorted.splice(index, 1)
    }
    for (const c of sorted) {
      ranked.push({ candidate: c, why: withNote(`fallback by price, ${perMillion(c.price)}`, c) })
    }
  }
  return ranked
}

/**
 * A cooling-down endpoint (an open circuit, a provider's Retry-After still running) is a last resort for the whole
 * plan, not only among its model's endpoints: another candidate model's endpoint is tried before it, so that a held
 * endpoint is not asked again while a fallback model could answer. Endpoints placed by `provider.order` stay where
 * the order put them.
 */
export const lastResortsLast = (
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
