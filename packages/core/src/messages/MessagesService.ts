/**
 * The POST /v1/messages use case as a service: the Tag, its shape, `make` (the ports wired once) and `layer`. The
 * steps live beside it (`CreateMessage`, `Execution`, `Attempts`, `StreamCommit`, ...) and in `plugins/`.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as GatewayError from "../errors/GatewayError.js"
import { countTokens, type TokenCount } from "./CountTokens.js"
import { create } from "./CreateMessage.js"
import type { MessagesOutcome } from "./MessagesOutcome.js"
import * as MessagesPorts from "./MessagesPorts.js"
import type { MessagesOptions } from "./MessagesPorts.js"
import type { RequestContext } from "./RequestContext.js"

export type { TokenCount } from "./CountTokens.js"
export type { ClaimedFrames, FramePull, MessagesOutcome } from "./MessagesOutcome.js"
export { framesOf } from "./MessagesOutcome.js"
export type { MessagesOptions } from "./MessagesPorts.js"
export type { RequestContext } from "./RequestContext.js"
export { forwardBody, requirements } from "./UpstreamBody.js"

export interface MessagesServiceShape {
  readonly create: (context: RequestContext, body: unknown) => Effect.Effect<MessagesOutcome, GatewayError.GatewayError>
  /** `POST /v1/messages/count_tokens`: the prompt's size, counted by an endpoint of the model or locally. */
  readonly countTokens: (context: RequestContext, body: unknown) => Effect.Effect<TokenCount, GatewayError.GatewayError>
}

/** The messages use case as a service. */
export class MessagesService extends Context.Tag("@model-gateway/core/MessagesService")<
  MessagesService,
  MessagesServiceShape
>() {}

/** Builds the service from its ports; plugin ports are optional. */
export const make = (options: MessagesOptions = {}) =>
  Effect.map(
    MessagesPorts.make(options),
    (ports) => MessagesService.of({ create: create(ports), countTokens: countTokens(ports) })
  )

/** The service, given Catalogue, Upstream, UsageLog, EndpointStats and SessionAffinity. */
export const layer = (options: MessagesOptions = {}) => Layer.effect(MessagesService, make(options))
