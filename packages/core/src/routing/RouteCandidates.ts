/**
 * The endpoints a plan may try, as candidates (`Candidate`: the model, the endpoint, its price and health) in health
 * tiers (`tierOf`): 0 stable and meeting `preferred_min_throughput` / `preferred_max_latency` (an endpoint without
 * stats meets them), 1 stable but missing them, 2 with a recent outage, 3 cooling down (not yet half-open). Tiers 2
 * and 3 are the last resorts; a half-open endpoint keeps its tier, as the probe. With the texts that name a candidate
 * and its note (`label`, `withNote`).
 */
import type { Endpoint, Model } from "../catalogue/Catalogue.js"
import type { EndpointHealth, Percentiles } from "../health/EndpointStats.js"
import type { PercentileCutoffs } from "./ProviderPreferences.js"
import type { Resolved } from "./ResolvedPreferences.js"

/** 0: stable and meets the preferences, 1: stable, misses them, 2: recent outage, 3: cooling down. */
export type Tier = 0 | 1 | 2 | 3

export interface Candidate {
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

export const tierOf = (health: EndpointHealth | undefined, p: Resolved, now: number | undefined) => {
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

export const healthy = (c: Candidate) => c.tier <= 1 && c.health?.halfOpen !== true
export const label = (c: Candidate) => `${c.model.id} via ${c.endpoint.provider}`

export const withNote = (why: string, c: Candidate) => (c.note === undefined ? why : `${why}; ${c.note}`)
