/**
 * `GET /models`, `GET /models/{id}` (and `/models/{author}/{slug}`, for ids with a slash sent unencoded), and
 * OpenRouter's `GET /model/{author}/{slug}` (`{data: model}`): the catalogue as model objects that the Anthropic,
 * OpenRouter and openai SDKs all accept (`ModelListing`).
 */
import { Catalogue, ModelListing } from "@model-gateway/core"
import type { GatewayError, UsageLog } from "@model-gateway/core"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { GatewayResponse } from "./HttpTypes.js"
import { recorded } from "./Recorded.js"
import type * as RouteTable from "./RouteTable.js"

type Services = Catalogue.Catalogue | UsageLog.UsageLog

const json = (requestId: string, body: unknown): GatewayResponse => ({
  status: 200,
  headers: { "content-type": "application/json", "request-id": requestId },
  body: { _tag: "Text", text: JSON.stringify(body) }
})

/** The base path of a route named `GET /v1/models...`: `/v1`. */
const basePathOf = (route: string): string => route.slice(route.indexOf(" ") + 1, route.search(/\/models?(\/|$)/))

const first = (value: string | ReadonlyArray<string> | undefined): string | undefined =>
  typeof value === "string" ? value : value?.[0]

const answer = <A extends object>(
  request: RouteTable.AuthenticatedRequest<Services>,
  f: (snapshot: Catalogue.CatalogueSnapshot, basePath: string) => Either.Either<A, GatewayError.GatewayError>
) =>
  recorded(
    request,
    Effect.flatMap(Context.get(request.services, Catalogue.Catalogue).snapshot, (snapshot) => {
      const result = f(snapshot, basePathOf(request.route))
      return Either.isLeft(result) ? Effect.fail(result.left) : Effect.succeed(json(request.requestId, result.right))
    })
  )

/** `GET /models`: every model, or a page (`limit`, `after_id`, `before_id`). */
export const list: RouteTable.Route<Services> = {
  method: "GET",
  path: "/models",
  access: "key",
  family: "generic",
  handler: (request) =>
    answer(request, (snapshot, base) =>
      ModelListing.list(snapshot, {
        limit: first(request.query.limit),
        after_id: first(request.query.after_id),
        before_id: first(request.query.before_id),
        offset: first(request.query.offset)
      }, base))
}

/** `GET /models/{id}`; an id with a slash arrives percent-encoded (`anthropic%2Fclaude`) from the SDKs. */
export const get: RouteTable.Route<Services> = {
  method: "GET",
  path: "/models/{id}",
  access: "key",
  family: "generic",
  handler: (request) => answer(request, (snapshot, base) => ModelListing.get(snapshot, request.params.id, base))
}

/** `GET /models/{author}/{slug}`: the same, for an id whose slash was sent as is. */
export const getBySlug: RouteTable.Route<Services> = {
  method: "GET",
  path: "/models/{author}/{slug}",
  access: "key",
  family: "generic",
  handler: (request) =>
    answer(
      request,
      (snapshot, base) => ModelListing.get(snapshot, `${request.params.author}/${request.params.slug}`, base)
    )
}

/** OpenRouter's `GET /model/{author}/{slug}` (`models.get` of `@openrouter/sdk`): `{data: model}`. */
export const getOpenRouter: RouteTable.Route<Services> = {
  method: "GET",
  path: "/model/{author}/{slug}",
  access: "key",
  family: "generic",
  handler: (request) =>
    answer(request, (snapshot, base) =>
      Either.map(
        ModelListing.get(snapshot, `${request.params.author}/${request.params.slug}`, base),
        (data) => ({ data })
      ))
}
