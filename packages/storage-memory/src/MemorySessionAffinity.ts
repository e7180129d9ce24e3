/**
 * In-process `SessionAffinity` adapter: a bounded map (100,000 sessions by default) from session
 * key to endpoint. A session idle for `SessionAffinity.IDLE_TTL_MS` (10 minutes) is forgotten; when
 * the map is full, the session idle the longest is evicted. Time comes from Effect's `Clock`.
 */
import { SessionAffinity } from "@model-gateway/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { LruMap } from "./internal/LruMap.js"

export interface MemorySessionAffinityOptions {
  /** Most sessions remembered (default 100,000). */
  readonly affinityCapacity?: number | undefined
}

interface Entry {
  readonly endpointId: string
  readonly updatedAt: number
}

/** Builds an empty in-memory session affinity store. */
export const make = (
  options: MemorySessionAffinityOptions = {}
): Effect.Effect<SessionAffinity.SessionAffinityService> =>
  Effect.sync(() => {
    const capacity = Math.max(1, options.affinityCapacity ?? 100_000)
    // Ordered by the last `set`: the oldest entry is the one idle the longest.
    const entries = new LruMap<Entry>()

    const expired = (entry: Entry, now: number) => now - entry.updatedAt >= SessionAffinity.IDLE_TTL_MS

    const dropExpired = (now: number) => {
      for (
        let oldest = entries.oldest();
        oldest !== undefined && expired(oldest.value, now);
        oldest = entries.oldest()
      ) {
        entries.delete(oldest.key)
      }
    }

    return SessionAffinity.SessionAffinity.of({
      get: (key) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const entry = entries.get(key)
          if (entry === undefined) return Option.none()
          if (expired(entry, now)) {
            entries.delete(key)
            return Option.none()
          }
          return Option.some(entry.endpointId)
        }),
      set: (key, endpointId) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          dropExpired(now)
          entries.set(key, { endpointId, updatedAt: now })
          if (entries.size > capacity) entries.delete(entries.oldest()!.key)
        })
    })
  })

/** The in-memory `SessionAffinity` layer. */
export const layer = (options: MemorySessionAffinityOptions = {}): Layer.Layer<SessionAffinity.SessionAffinity> =>
  Layer.effect(SessionAffinity.SessionAffinity, make(options))
