/**
 * An endpoint's health as adapters read it on every routing decision: memoised beside its windows, so that the
 * percentiles and uptime are recomputed at most every `ttlMs` and the outage and breaker view only when it can
 * change. A half-open endpoint is handed to one reader at a time (`PROBE_WINDOW_MS`). Pure apart from the cache it
 * is given; time is always passed in. The memory and SQL adapters keep one `HealthCache` per endpoint.
 */
import type * as CircuitBreaker from "./CircuitBreaker.js"
import type { EndpointHealth } from "./EndpointStats.js"
import type { HealthWindows, Statistics } from "./HealthWindows.js"
import { combine, fine, OUTAGE_WINDOW_MS, statistics } from "./HealthWindows.js"

/**
 * Until when (epoch ms, exclusive) `combine(stats, windows, t, breaker)` for `t` from `now` on gives the answer it
 * gives at `now`, provided nothing is recorded, the windows and the breaker are left alone and the statistics are
 * kept: the recent outage looks at whole 10-second buckets, and the breaker's view changes when its cooldown ends.
 * Adapters cache an endpoint's health until then.
 */
export const combinedUntil = (health: EndpointHealth, now: number): number => {
  const outageChanges = (Math.floor((now - OUTAGE_WINDOW_MS) / fine.bucketMs) + 1) * fine.bucketMs + OUTAGE_WINDOW_MS
  return health.coolingDownUntil === null ? outageChanges : Math.min(outageChanges, health.coolingDownUntil)
}

/** Per-endpoint memo of a computed health, kept by an adapter beside its windows. */
export interface HealthCache {
  cachedAt: number
  cached: Statistics | undefined
  /** The health last answered, valid from `healthFrom` until `healthUntil` (exclusive) unless something is recorded. */
  health: EndpointHealth | undefined
  healthFrom: number
  healthUntil: number
  /** While the endpoint is half-open: until when the reader that got the probe has it to itself. */
  probeUntil: number
}

/** A cache that holds nothing yet. */
export const emptyCache = (): HealthCache => ({
  cachedAt: 0,
  cached: undefined,
  health: undefined,
  healthFrom: 0,
  healthUntil: 0,
  probeUntil: 0
})

/** An attempt was recorded: the memo is stale, and a probe that was out has answered (or another attempt did). */
export const recorded = (cache: HealthCache): void => {
  cache.health = undefined
  cache.probeUntil = 0
}

/**
 * How long the first reader of a half-open endpoint has the probe to itself. Meanwhile every other reader sees the
 * endpoint cooling down until then (a last resort for the planner), so that a recovering endpoint, or one that still
 * hangs, gets one request at a time rather than all the traffic that draws it. A probe that takes longer (or a reader
 * that did not try the endpoint after all) lets the next reader probe after this long.
 */
export const PROBE_WINDOW_MS = 10_000

/** A half-open health as the reader sees it: the probe (and the window starts), or cooling while another has it. */
const probeOrWait = (cache: HealthCache, health: EndpointHealth, now: number): EndpointHealth => {
  // A clock set back (tests) starts over.
  if (now >= cache.probeUntil || now < cache.probeUntil - PROBE_WINDOW_MS) {
    cache.probeUntil = now + PROBE_WINDOW_MS
    return health
  }
  return {
    latency30m: health.latency30m,
    throughput30m: health.throughput30m,
    uptime5m: health.uptime5m,
    uptime30m: health.uptime30m,
    uptime1d: health.uptime1d,
    recentOutage: health.recentOutage,
    coolingDownUntil: cache.probeUntil,
    halfOpen: false
  }
}

/**
 * The health of `windows` at `now`, memoised in `cache`: percentiles and uptime are recomputed at most
 * every `ttlMs`; the outage and breaker view is reused until it can change. Clear `cache.health` on record.
 * A half-open endpoint is half-open for one reader at a time (see `PROBE_WINDOW_MS`): reading is claiming.
 */
export const cachedHealth = (
  cache: HealthCache,
  windows: HealthWindows,
  breaker: CircuitBreaker.CircuitBreaker,
  now: number,
  ttlMs: number
): EndpointHealth => {
  let health = cache.health
  if (health === undefined || !(now >= cache.healthFrom && now < cache.healthUntil)) {
    if (cache.cached === undefined || !(now >= cache.cachedAt && now - cache.cachedAt < ttlMs)) {
      cache.cached = statistics(windows, now)
      cache.cachedAt = now
    }
    health = combine(cache.cached, windows, now, breaker)
    cache.health = health
    cache.healthFrom = now
    cache.healthUntil = Math.min(cache.cachedAt + ttlMs, combinedUntil(health, now))
  }
  return health.halfOpen ? probeOrWait(cache, health, now) : health
}
