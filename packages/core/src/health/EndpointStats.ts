/**
 * The endpoint health port: every upstream attempt is recorded (time to first byte, latency, output
 * throughput, outcome), and routing reads a snapshot of percentiles, uptime, recent outages and
 * cooldowns. `snapshot` is on the hot path: adapters answer it from memory (a shared adapter syncs
 * with its store in the background), never with a query per request.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"

export type AttemptOutcome = "ok" | "rate_limited" | "overloaded" | "error" | "timeout"

export interface AttemptRecord {
  readonly endpointId: string
  /** Unix epoch milliseconds when the attempt ended. */
  readonly at: number
  /** Time to first byte (first content for streams), when the attempt got that far. */
  readonly ttfbMs: number | null
  readonly latencyMs: number
  readonly outputTokens: number
  readonly outcome: AttemptOutcome
  /** The upstream's `Retry-After`, when it sent one. */
  readonly retryAfterMs?: number | undefined
}

export interface Percentiles {
  readonly p50: number
  readonly p75: number
  readonly p90: number
  readonly p99: number
}

/** What routing knows of one endpoint at one moment. */
export interface EndpointHealth {
  /** Time to first byte, ms, over the last 30 minutes; null without data. */
  readonly latency30m: Percentiles | null
  /** Output tokens per second over the last 30 minutes; null without data. */
  readonly throughput30m: Percentiles | null
  /** Percent of attempts that succeeded; null without data. */
  readonly uptime5m: number | null
  readonly uptime30m: number | null
  readonly uptime1d: number | null
  /** Significant failures in the last 30 seconds: routing avoids the endpoint while others are fine. */
  readonly recentOutage: boolean
  /**
   * Until when (epoch ms) the endpoint is cooling down after repeated failures or a Retry-After;
   * null when it is not. After it, one half-open probe is allowed before traffic returns.
   */
  readonly coolingDownUntil: number | null
  /** True when the cooldown has passed and the next attempt is the half-open probe. */
  readonly halfOpen: boolean
}

/** Health of every known endpoint; an endpoint without records is healthy and unknown. */
export interface HealthSnapshot {
  readonly get: (endpointId: string) => EndpointHealth | undefined
}

export const emptySnapshot: HealthSnapshot = { get: () => undefined }

/**
 * `snapshot` for an adapter that keeps its entries in process: the health of each at the clock's time. The clock is
 * read synchronously, one Effect step on every request rather than three.
 */
export const snapshotOf = <E>(
  entries: ReadonlyMap<string, E>,
  healthOf: (entry: E, now: number) => EndpointHealth
): Effect.Effect<HealthSnapshot> =>
  Effect.clockWith((clock) => {
    const now = clock.unsafeCurrentTimeMillis()
    return Effect.succeed({
      get: (endpointId) => {
        const entry = entries.get(endpointId)
        return entry === undefined ? undefined : healthOf(entry, now)
      }
    })
  })

export interface EndpointStatsService {
  /** Records an attempt; never blocks on storage. */
  readonly record: (attempt: AttemptRecord) => Effect.Effect<void>
  /** The current health view (from memory). */
  readonly snapshot: Effect.Effect<HealthSnapshot>
}

/** Port: endpoint health statistics. */
export class EndpointStats extends Context.Tag("@model-gateway/core/EndpointStats")<
  EndpointStats,
  EndpointStatsService
>() {}
