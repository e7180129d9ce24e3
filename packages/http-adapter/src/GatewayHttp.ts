/**
 * The gateway's HTTP interface: its route table under the base path, run by the dispatcher, as one request handler
 * over the framework-neutral request/response description. Bindings (node:http, @effect/platform HttpApp, web
 * fetch) translate to and from it; the routes never see a framework. The table and its router are built once, in
 * `makeHandler`.
 */
import type {
  BatchService,
  Catalogue,
  EndpointStats,
  InternChat,
  InternService,
  Keys,
  MessagesService,
  OpenAiService,
  SpeechService,
  UsageLog
} from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Abandoned from "./Abandoned.js"
import * as BatchesRoute from "./BatchesRoute.js"
import * as Cors from "./Cors.js"
import * as EndpointsRoute from "./EndpointsRoute.js"
import * as ErrorResponses from "./ErrorResponses.js"
import type { GatewayRequest, GatewayResponse } from "./HttpTypes.js"
import * as InternChatRoute from "./InternChatRoute.js"
import * as InternsRoute from "./InternsRoute.js"
import * as MessagesRoute from "./MessagesRoute.js"
import * as ModelsRoute from "./ModelsRoute.js"
import * as OpenAiRoutes from "./OpenAiRoutes.js"
import * as RouteDispatcher from "./RouteDispatcher.js"
import * as RouteTable from "./RouteTable.js"
import * as SpeechRoute from "./SpeechRoute.js"

export type { GatewayBody, GatewayRequest, GatewayResponse, Headers } from "./HttpTypes.js"

export interface HandlerOptions {
  /** Path prefix of the API, `/v1` by default. */
  readonly basePath?: string | undefined
  /** Cross-origin requests from browsers: off unless origins are given. */
  readonly cors?: Cors.CorsOptions | undefined
}

/** The gateway as one request handler; it fails with nothing (every failure is an answer), it can only die. */
export interface Handler {
  (request: GatewayRequest): Effect.Effect<GatewayResponse, never, HandlerRequirements>
  /**
   * The 500 a binding answers when the handler died (a defect escaped it): the error body of the request's route
   * family, with `requestId`. `makeHandler`'s has it; for a handler without it, bindings use the generic body (see
   * `internalError`).
   */
  readonly internalError?: ((request: GatewayRequest, requestId: string) => GatewayResponse) | undefined
  /**
   * Tells of a request whose client went away before its answer, for a binding that made its progress (core's
   * `Progress`): its log line, status 499, and no usage record (see `Abandoned`). `makeHandler`'s has it.
   */
  readonly abandoned?:
    | ((request: GatewayRequest, requestId: string) => Effect.Effect<void, never, HandlerRequirements>)
    | undefined
}

/** What a binding answers, with `requestId`, for `request` when `handler` died: its family's 500, else the generic. */
export const internalError = (handler: Handler, request: GatewayRequest, requestId: string): GatewayResponse =>
  handler.internalError?.(request, requestId) ?? ErrorResponses.internalError("generic", requestId)

/** The services the routes call. */
export type Services =
  | MessagesService.MessagesService
  | OpenAiService.OpenAiService
  | SpeechService.SpeechService
  | Catalogue.Catalogue
  | EndpointStats.EndpointStats
  | InternService.Interns
  | InternChat.InternChat
  | BatchService.Batches
  | UsageLog.UsageLog

export type HandlerRequirements = Keys.Keys | UsageLog.UsageLog | Services

const healthy: GatewayResponse = {
  status: 200,
  headers: { "content-type": "application/json" },
  body: { _tag: "Text", text: "{\"status\":\"ok\"}" }
}

/** `GET` (and `HEAD`) on a health path: public, for load balancers and orchestrators. */
const health = (path: string): ReadonlyArray<RouteTable.Route> =>
  (["GET", "HEAD"] as const).map((method) => ({
    method,
    path,
    access: "public",
    family: "generic",
    handler: () => Effect.succeed(healthy)
  }))

/** The API's routes, declared relative to the base path. */
export const apiRoutes: ReadonlyArray<RouteTable.Route<Services>> = [
  MessagesRoute.create,
  MessagesRoute.countTokens,
  ModelsRoute.list,
  ModelsRoute.get,
  ModelsRoute.getBySlug,
  ModelsRoute.getOpenRouter,
  OpenAiRoutes.chatCompletions,
  OpenAiRoutes.embeddings,
  OpenAiRoutes.responses,
  SpeechRoute.create,
  EndpointsRoute.zdr,
  EndpointsRoute.modelEndpoints,
  EndpointsRoute.modelEndpointsById,
  ...InternsRoute.routes,
  InternChatRoute.chat,
  ...BatchesRoute.routes
]

/** Every route of the gateway: the API under the base path, and `/health` both at the root and under the base. */
export const routes = (basePath = "/v1"): ReadonlyArray<RouteTable.Route<Services>> => {
  const base = basePath.replace(/\/+$/, "")
  return [
    ...health("/health"),
    ...(base === "" ? [] : health(`${base}/health`)),
    ...RouteTable.prefixed(base, apiRoutes)
  ]
}

/** Builds the gateway's request handler. */
export const makeHandler = (options: HandlerOptions = {}): Handler => {
  const table = RouteTable.make(routes(options.basePath))
  const dispatch = RouteDispatcher.make(table)
  const handler = options.cors === undefined ? dispatch : Cors.wrap(options.cors, table, dispatch)
  return Object.assign(handler, {
    internalError: (request: GatewayRequest, requestId: string) =>
      ErrorResponses.internalError(RouteDispatcher.familyOf(table, request.path), requestId),
    abandoned: Abandoned.tell(table)
  })
}
