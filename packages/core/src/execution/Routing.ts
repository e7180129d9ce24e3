/**
 * What every use case reads before planning a route: the endpoints' health, the session's sticky endpoint, a random
 * seed; then the plan. A chain of Effects rather than a generator: it is on the hot path of every request.
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
  readonly snapshot: CatalogueSnapshot
  readonly clock: Clock.Clock
}

/** A planned route: the attempts and the steps that explain them, and the session's affinity key. */
export interface Route extends RoutePlanner.RoutePlan {
  readonly affinityKey: string | undefined
}

/** Reads health, the session's endpoint and a seed, then plans; fails when the plan does (404, 400). */
export const plan = (
  ports: Pick<ExecutorPorts, "stats" | "affinity">,
  input: RouteInput
): Effect.Effect<Route, GatewayError.NotFound | GatewayError.InvalidRequest> => {
  const key = input.sessionId === undefined
    ? undefined
    : SessionAffinity.affinityKey(input.workspace, input.sessionId, input.request.model)
  const planned = (health: RoutePlanner.HealthSnapshot, sticky: string | undefined) =>
    Effect.flatMap(Random.nextInt, (seed) => {
      const result = RoutePlanner.plan(input.request, input.snapshot, {
        health,
        session: key === undefined ? undefined : { key, endpointId: sticky },
        random: RoutePlanner.seededRandom(seed),
        now: input.clock.unsafeCurrentTimeMillis()
      })
      return Either.isLeft(result)
        ? Effect.fail(result.left)
        : Effect.succeed({ attempts: result.right.attempts, steps: result.right.steps, affinityKey: key })
    })
  return Effect.flatMap(ports.stats.snapshot, (health) =>
    key === undefined
      ? planned(health, undefined)
      : Effect.flatMap(ports.affinity.get(key), (sticky) => planned(health, Option.getOrUndefined(sticky))))
}
