/**
 * The session affinity port: a session key → the endpoint that served it last, expiring after 10
 * minutes idle. With a shared adapter, every gateway process routes a session the same way. The same store keeps
 * the endpoint that stored each Responses answer (`responseKey`), so that a `previous_response_id` goes back to it.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"

/** Idle time after which a session forgets its endpoint. */
export const IDLE_TTL_MS = 10 * 60 * 1000

/** The affinity key of a request: workspace, session and model (unit-separated; PostgreSQL text cannot hold NUL). */
export const affinityKey = (workspace: string, sessionId: string, modelId: string): string =>
  `${workspace}\u001f${sessionId}\u001f${modelId}`

/** The longest response id the gateway keys (real ones are about 50 characters); a longer one routes as unknown. */
export const MAX_RESPONSE_ID_LENGTH = 256

/**
 * The affinity key of a stored Responses answer: `response:`, the workspace, a unit separator and the response id.
 * It holds exactly one unit separator, where a session key (`affinityKey`) holds at least two, so the two never
 * collide; undefined (nothing is stored or read) for a workspace or an id that holds one, or for an id longer than
 * `MAX_RESPONSE_ID_LENGTH`. Keyed by workspace, as sessions are: one tenant's ids cannot steer another's requests.
 */
export const responseKey = (workspace: string, responseId: string): string | undefined =>
  responseId.length > MAX_RESPONSE_ID_LENGTH || responseId.includes("\u001f") || workspace.includes("\u001f")
    ? undefined
    : `response:${workspace}\u001f${responseId}`

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
