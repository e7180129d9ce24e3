/**
 * What every use case reads before planning a route: the endpoints' health, the session's sticky endpoint, the
 * endpoint that stored the response a Responses request continues, a random seed; then the plan. A chain of Effects
 * rather than a generator: it is on the hot path of every request, and one without `previous_response_id` reads and
 * allocates nothing for it.
 */
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import type { CatalogueSnapshot } from "../catalogue/Catalogue.js"
import type * as GatewayError from "../errors/GatewayError.js"
import * as RoutePlanner from "../routing/RoutePlanner.js"
import * as SessionAffinity from "../sessions/SessionAffinity.js"
import type { ExecutorPorts } from "./Execution.js"

/** A route to plan: the request's routing fields and needs, for a workspace and maybe a session. */
export interface RouteInput {
  readonly request: RoutePlanner.RouteRequest
  readonly workspace: string
  readonly sessionId: string | undefined
  /** The Responses API's `previous_response_id`: the stored response the request continues. */
  readonly previousResponseId?: string | undefined
  readonly snapshot: CatalogueSnapshot
  readonly clock: Clock.Clock
}

/** A planned route: the attempts and the steps that explain them, and the affinity keys its answer refreshes. */
export interface Route extends RoutePlanner.RoutePlan {
  readonly affinityKey: string | undefined
  /** The continued response's key, when its endpoint was known: an answer refreshes its idle TTL. */
  readonly responseKey: string | undefined
}

const planned = (
  input: RouteInput,
  key: string | undefined,
  health: RoutePlanner.HealthSnapshot,
  sticky: string | undefined,
  response: RoutePlanner.StoredResponse | undefined,
  responseKey: string | undefined
): Effect.Effect<Route, GatewayError.NotFound | GatewayError.InvalidRequest> =>
  Effect.flatMap(Random.nextInt, (seed) => {
    const result = RoutePlanner.plan(input.request, input.snapshot, {
      health,
      session: key === undefined ? undefined : { key, endpointId: sticky },
      response,
      random: RoutePlanner.seededRandom(seed),
      now: input.clock.unsafeCurrentTimeMillis()
    })
    return Either.isLeft(result)
      ? Effect.fail(result.left)
      : Effect.succeed({ attempts: result.right.attempts, steps: result.right.steps, affinityKey: key, responseKey })
  })

/** `plan` for a request that continues a stored response: the endpoint that stored it is read too. */
const continuing = (
  ports: Pick<ExecutorPorts, "stats" | "affinity">,
  input: RouteInput,
  key: string | undefined,
  previous: string,
  storedKey: string
) =>
  Effect.flatMap(ports.stats.snapshot, (health) =>
    Effect.flatMap(ports.affinity.get(storedKey), (stored) => {
      const response = Option.isNone(stored) ? undefined : { id: previous, endpointId: stored.value }
      const refreshed = response === undefined ? undefined : storedKey
      return key === undefined
        ? planned(input, key, health, undefined, response, refreshed)
        : Effect.flatMap(
          ports.affinity.get(key),
          (sticky) => planned(input, key, health, Option.getOrUndefined(sticky), response, refreshed)
        )
    }))

/** Reads health, the session's endpoint, the continued response's and a seed, then plans; fails as the plan does. */
export const plan = (
  ports: Pick<ExecutorPorts, "stats" | "affinity">,
  input: RouteInput
): Effect.Effect<Route, GatewayError.NotFound | GatewayError.InvalidRequest> => {
  const key = input.sessionId === undefined
    ? undefined
    : SessionAffinity.affinityKey(input.workspace, input.sessionId, input.request.model)
  const previous = input.previousResponseId
  const storedKey = previous === undefined ? undefined : SessionAffinity.responseKey(input.workspace, previous)
  if (storedKey !== undefined) return continuing(ports, input, key, previous!, storedKey)
  return Effect.flatMap(ports.stats.snapshot, (health) =>
    key === undefined
      ? planned(input, key, health, undefined, undefined, undefined)
      : Effect.flatMap(
        ports.affinity.get(key),
        (sticky) => planned(input, key, health, Option.getOrUndefined(sticky), undefined, undefined)
      ))
}
