/**
 * The model a messages request runs on: the requested one, or the one a router plugin (auto-router, or the router
 * slug as the model; pareto-router; switchyard-router) chooses from the catalogue.
 */
import * as Either from "effect/Either"
import type { CatalogueSnapshot } from "../catalogue/Catalogue.js"
import type * as GatewayError from "../errors/GatewayError.js"
import type { MessagesPorts } from "../messages/MessagesPorts.js"
import type { JsonObject } from "../messages/Wire.js"
import type { PipelineStep } from "../routing/RoutePlanner.js"
import * as AutoRouter from "./AutoRouter.js"
import type { Choice, RouteFor } from "./Candidates.js"
import * as ParetoRouter from "./ParetoRouter.js"
import type { Plugins } from "./RequestPlugins.js"
import * as SwitchyardRouter from "./SwitchyardRouter.js"

/**
 * The model id to run, its router's steps added to `steps`; the request's own model when no router is in play. A
 * fusion request runs its panel and synthesis models, never the request's `model` (docs/decisions.md), so no router
 * runs for it: its choice would be ignored, and its refusal (no candidate left) would refuse a request fusion serves.
 * `route` is the route request the live route will plan for a model: a router chooses only a model it can be planned
 * on (see `Candidates.servable`); it is not called when no router runs.
 */
export const chooseModel = (
  ports: Pick<MessagesPorts, "classifier" | "switchyard" | "routerSlug">,
  request: { readonly model: string },
  body: JsonObject,
  plugins: Plugins,
  index: Record<string, number>,
  steps: Array<PipelineStep>,
  snapshot: CatalogueSnapshot,
  route: RouteFor
): Either.Either<string, GatewayError.InvalidRequest | GatewayError.Unavailable> => {
  if (plugins.fusion !== undefined) return Either.right(request.model)
  const choice = routerChoice(ports, request, body, plugins, index, snapshot, route)
  if (choice === undefined) return Either.right(request.model)
  if (Either.isLeft(choice)) return Either.left(choice.left)
  steps.push(...choice.right.steps)
  return Either.right(choice.right.modelId)
}

/**
 * Whether a router plugin chooses the model of a request that enables `plugins` (as `chooseModel` does; the router slug
 * as the request's model aside), so that the model to plan for is known only when the request runs.
 */
export const routerEnabled = (plugins: Plugins): boolean =>
  plugins["auto-router"] !== undefined || plugins["auto-beta-router"] !== undefined ||
  plugins["pareto-router"] !== undefined || plugins["switchyard-router"] !== undefined

const routerChoice = (
  { classifier, routerSlug, switchyard }: Pick<MessagesPorts, "classifier" | "switchyard" | "routerSlug">,
  request: { readonly model: string },
  body: JsonObject,
  plugins: Plugins,
  index: Record<string, number>,
  catalogue: CatalogueSnapshot,
  route: RouteFor
): Either.Either<Choice, GatewayError.InvalidRequest | GatewayError.Unavailable> | undefined => {
  const { messages, system } = body
  const auto = plugins["auto-router"] ?? plugins["auto-beta-router"]
  if (auto !== undefined || request.model === routerSlug) {
    const param = auto === undefined ? "plugins" : `plugins[${index[auto.id]}]`
    return AutoRouter.choose({
      plugin: auto ?? { id: "auto-router" },
      messages,
      system,
      catalogue,
      classifier,
      routerSlug,
      route,
      param
    })
  }
  const pareto = plugins["pareto-router"]
  if (pareto !== undefined) {
    return ParetoRouter.choose({ plugin: pareto, messages, system, catalogue, classifier, routerSlug, route })
  }
  const switchyardPlugin = plugins["switchyard-router"]
  if (switchyardPlugin !== undefined) {
    return SwitchyardRouter.choose({
      plugin: switchyardPlugin,
      messages,
      system,
      tools: body.tools,
      catalogue,
      classifier,
      policy: switchyard,
      routerSlug,
      route
    })
  }
  return undefined
}
