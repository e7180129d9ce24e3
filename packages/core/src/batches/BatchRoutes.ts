/**
 * Whether a request of a batch can be routed, planned as its live route plans it: the same route request (the model,
 * its `models` or `fallbacks`, its provider preferences with the batch's `only` and `allow_fallbacks` in them, and what
 * its body needs of an endpoint, the API first) and the same pure `RoutePlanner.plan`, on the catalogue the submission
 * sees. A request refused here would be refused, with the same error, by every run of it: its model is not available
 * (404), does not output what its API answers (a speech or embeddings model on a text API, a speech model on
 * embeddings), or has no endpoint that serves its API and passes its filters (400).
 * Health, the session and the random draw only order a plan's attempts, so they are left out. A request whose model a
 * router plugin (or the auto-router's slug as its model) chooses, that fusion serves (with its panel), or whose
 * documents a parser may turn into text, is planned when it runs.
 */
import * as Either from "effect/Either"
import type { CatalogueSnapshot } from "../catalogue/Catalogue.js"
import type { InvalidRequest, NotFound } from "../errors/GatewayError.js"
import { routeOf } from "../messages/Execution.js"
import type { MessagesRequest } from "../messages/MessagesRequest.js"
import type { JsonObject } from "../messages/Wire.js"
import * as OpenAiBodies from "../openai/OpenAiBodies.js"
import type { OpenAiRequest } from "../openai/OpenAiRequest.js"
import { messagesOnly } from "../openai/OpenAiService.js"
import * as ModelChoice from "../plugins/ModelChoice.js"
import { enabledPlugins, type Plugins } from "../plugins/RequestPlugins.js"
import * as RoutePlanner from "../routing/RoutePlanner.js"

/** A request of a batch as its endpoint's schema decoded it. */
export type Decoded = { readonly api: "messages"; readonly request: MessagesRequest } | OpenAiRequest

/** The model, the panel or the body that the run alone knows (see the module's comment). */
const plannedWhenRun = (plugins: Plugins, model: string, routerSlug: string | undefined) =>
  model === routerSlug || ModelChoice.routerEnabled(plugins) || plugins.fusion !== undefined ||
  plugins["file-parser"] !== undefined

/**
 * Why the live route would refuse `body`, a batch's request as it is stored and will run, before any upstream;
 * undefined when it can be routed. `bodyBytes` is the size its run is given (its stored text's length); `routerSlug`
 * the auto-router's slug.
 */
export const refusal = (
  snapshot: CatalogueSnapshot,
  decoded: Decoded,
  body: JsonObject,
  bodyBytes: number,
  routerSlug?: string | undefined
): NotFound | InvalidRequest | undefined => {
  const { plugins } = enabledPlugins(decoded.request)
  let route: RoutePlanner.RouteRequest
  if (decoded.api === "messages") {
    if (plannedWhenRun(plugins, decoded.request.model, routerSlug)) return undefined
    const request = decoded.request
    const run = { body, modelId: request.model, plugins, request, snapshot, context: { bodyBytes } }
    route = routeOf({ parser: undefined }, run).request
  } else {
    const unsupported = messagesOnly(plugins, decoded.api)
    if (unsupported !== undefined) return unsupported
    if (plannedWhenRun(plugins, decoded.request.model, routerSlug)) return undefined
    route = OpenAiBodies.routeRequest(decoded.api, decoded.request, decoded.request.model, body, bodyBytes)
  }
  const plan = RoutePlanner.plan(route, snapshot)
  return Either.isLeft(plan) ? plan.left : undefined
}
