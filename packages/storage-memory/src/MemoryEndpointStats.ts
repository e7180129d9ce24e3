/**
 * In-process `EndpointStats` adapter: per endpoint, fixed-size `HealthWindows` and a
 * `CircuitBreaker`. Recording is a few counter increments. `snapshot` is cheap: each endpoint's
 * percentiles and uptime are computed when first asked for and reused for `healthCacheTtl`
 * (1 s by default); the recent outage and the breaker are always current. The health answered is
 * itself reused until an attempt is recorded, the statistics expire, the 30-second outage window
 * moves on to the next bucket or a cooldown ends. Time comes from the attempts and from Effect's
 * `Clock`.
 */
import { CircuitBreaker, EndpointStats, HealthCache, HealthWindows } from "@model-gateway/core"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

export type MemoryEndpointStatsOptions = HealthWindows.WindowOptions

/** Memory held by the adapter. */
export type Footprint = HealthWindows.Footprint

/** The adapter's service: the port, plus its footprint for tests and diagnostics. */
export interface MemoryEndpointStatsService extends EndpointStats.EndpointStatsService {
  readonly footprint: Effect.Effect<Footprint>
}

interface Entry extends HealthCache.HealthCache {
  readonly windows: HealthWindows.HealthWindows
  breaker: CircuitBreaker.CircuitBreaker
  lastAt: number
}

/** Builds an empty in-memory endpoint statistics store. */
export const make = (options: MemoryEndpointStatsOptions = {}): Effect.Effect<MemoryEndpointStatsService> =>
  Effect.sync(() => {
    const cacheTtl = Duration.toMillis(options.healthCacheTtl ?? Duration.seconds(1))
    const maxEndpoints = Math.max(1, options.healthMaxEndpoints ?? 10_000)
    const breakerOptions = CircuitBreaker.options(options.breaker)
    const entries = new Map<string, Entry>()

    const evictIdlest = () => {
      let idlest: string | undefined
      let oldest = Infinity
      for (const [id, entry] of entries) {
        if (entry.lastAt < oldest) {
          oldest = entry.lastAt
          idlest = id
        }
      }
      if (idlest !== undefined) entries.delete(idlest)
    }

    const entryOf = (endpointId: string): Entry => {
      let entry = entries.get(endpointId)
      if (entry === undefined) {
        if (entries.size >= maxEndpoints) evictIdlest()
        entry = Object.assign(HealthCache.emptyCache(), {
          windows: HealthWindows.empty(),
          breaker: CircuitBreaker.closed,
          lastAt: -Infinity
        })
        entries.set(endpointId, entry)
      }
      return entry
    }

    const healthOf = (entry: Entry, now: number): EndpointStats.EndpointHealth =>
      HealthCache.cachedHealth(entry, entry.windows, entry.breaker, now, cacheTtl)

    const record = (attempt: EndpointStats.AttemptRecord): Effect.Effect<void> =>
      Effect.sync(() => {
        const entry = entryOf(attempt.endpointId)
        HealthCache.recorded(entry)
        HealthWindows.record(entry.windows, attempt)
        entry.breaker = CircuitBreaker.record(entry.breaker, attempt, breakerOptions)
        if (attempt.at > entry.lastAt) entry.lastAt = attempt.at
      })

    const snapshot = EndpointStats.snapshotOf(entries, healthOf)

    const footprint = Effect.sync((): Footprint => {
      let windowBytes = 0
      for (const entry of entries.values()) windowBytes += HealthWindows.byteSize(entry.windows)
      return { endpoints: entries.size, windowBytes }
    })

    return { record, snapshot, footprint }
  })

/** The in-memory `EndpointStats` layer. */
export const layer = (options: MemoryEndpointStatsOptions = {}): Layer.Layer<EndpointStats.EndpointStats> =>
  Layer.effect(EndpointStats.EndpointStats, make(options))

/** The footprint of the `EndpointStats` in context, when it is this adapter (or another that reports one). */
export const footprint: Effect.Effect<Footprint | undefined, never, EndpointStats.EndpointStats> = Effect.flatMap(
  EndpointStats.EndpointStats,
  (stats) => "footprint" in stats ? (stats as MemoryEndpointStatsService).footprint : Effect.succeed(undefined)
)
