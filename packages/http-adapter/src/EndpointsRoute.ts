/**
 * The endpoint catalogue: `GET /endpoints/zdr` (management keys only: every zero-data-retention endpoint) and
 * `GET /models/{author}/{slug}/endpoints` (also `/models/{id}/endpoints` for an id sent percent-encoded or without a
 * slash): endpoint records with the live figures of the health snapshot (`EndpointListing`), as `@openrouter/sdk`'s
 * `endpoints.listZdrEndpoints` and `endpoints.list` validate them.
 */
import type { Catalogue as Catalogues, GatewayError, UsageLog } from "@model-gateway/core"
import { Catalogue, EndpointListing, EndpointStats } from "@model-gateway/core"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { GatewayResponse } from "./HttpTypes.js"
import { recorded } from "./Recorded.js"
import type * as RouteTable from "./RouteTable.js"

type Services = Catalogue.Catalogue | EndpointStats.EndpointStats | UsageLog.UsageLog

const json = (requestId: string, body: unknown): GatewayResponse => ({
  status: 200,
  headers: { "content-type": "application/json", "request-id": requestId },
  body: { _tag: "Text", text: JSON.stringify(body) }
})

/** The base path of a route named `GET /v1/models/...`: `/v1`. */
const basePathOf = (route: string): string => route.slice(route.indexOf(" ") + 1, route.indexOf("/models/"))

const answer = (
  request: RouteTable.AuthenticatedRequest<Services>,
  f: (
    snapshot: Catalogues.CatalogueSnapshot,
    health: EndpointStats.HealthSnapshot
  ) => Either.Either<object, GatewayError.GatewayError>
) =>
  recorded(
    request,
    Effect.flatMap(
      Effect.zip(
        Context.get(request.services, Catalogue.Catalogue).snapshot,
        Context.get(request.services, EndpointStats.EndpointStats).snapshot
      ),
      ([snapshot, health]) => {
        const result = f(snapshot, health)
        return Either.isLeft(result) ? Effect.fail(result.left) : Effect.succeed(json(request.requestId, result.right))
      }
    )
  )

/** `GET /endpoints/zdr`: management keys only (others get 403). */
export const zdr: RouteTable.Route<Services> = {
  method: "GET",
  path: "/endpoints/zdr",
  access: "management",
  family: "generic",
  handler: (request) => answer(request, (snapshot, health) => Either.right(EndpointListing.zdr(snapshot, health)))
}

/** `GET /models/{author}/{slug}/endpoints` (`endpoints.list` of `@openrouter/sdk`). */
export const modelEndpoints: RouteTable.Route<Services> = {
  method: "GET",
  path: "/models/{author}/{slug}/endpoints",
  access: "key",
  family: "generic",
  handler: (request) =>
    answer(request, (snapshot, health) =>
      EndpointListing.modelEndpoints(
        snapshot,
        health,
        `${request.params.author}/${request.params.slug}`,
        basePathOf(request.route)
      ))
}

/** `GET /models/{id}/endpoints`: the same, for an id sent percent-encoded (`anthro%2Fclaude`) or without a slash. */
export const modelEndpointsById: RouteTable.Route<Services> = {
  method: "GET",
  path: "/models/{id}/endpoints",
  access: "key",
  family: "generic",
  handler: (request) =>
    answer(
      request,
      (snapshot, health) =>
        EndpointListing.modelEndpoints(snapshot, health, request.params.id, basePathOf(request.route))
    )
}
