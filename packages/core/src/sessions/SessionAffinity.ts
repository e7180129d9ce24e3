/**
 * The session affinity port: a session key → the endpoint that served it last, expiring after 10
 * minutes idle. With a shared adapter, every gateway process routes a session the same way.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"

/** Idle time after which a session forgets its endpoint. */
export const IDLE_TTL_MS = 10 * 60 * 1000

/** The affinity key of a request: workspace, session and model (unit-separated; PostgreSQL text cannot hold NUL). */
export const affinityKey = (workspace: string, sessionId: string, modelId: string): string =>
  `${workspace}\u001f${sessionId}\u001f${modelId}`

export interface SessionAffinityService {
  /** The endpoint id the session used last, unless it has been idle past the TTL. */
  readonly get: (key: string) => Effect.Effect<Option.Option<string>>
  /** Remembers the endpoint and refreshes the idle TTL. */
  readonly set: (key: string, endpointId: string) => Effect.Effect<void>
}

/** Port: session stickiness. */
export class SessionAffinity extends Context.Tag("@model-gateway/core/SessionAffinity")<
  SessionAffinity,
  SessionAffinityService
>() {}
