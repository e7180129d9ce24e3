/**
 * The `POST /v1/audio/speech` use case as a service: the Tag, its shape, `make` (the ports wired once) and `layer`.
 * The steps live beside it: `SpeechRequest` and `SpeechReferences` (validation), `SpeechRouting` (the route),
 * `SpeechExecution` (attempts, fallback before the first byte, the audio as it arrives, the records), `Synthesize`.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { Catalogue } from "../catalogue/Catalogue.js"
import type * as GatewayError from "../errors/GatewayError.js"
import * as EndpointStats from "../health/EndpointStats.js"
import * as Quotas from "../limits/Quotas.js"
import type { RequestContext } from "../messages/RequestContext.js"
import * as SessionAffinity from "../sessions/SessionAffinity.js"
import { Upstream } from "../upstream/Upstream.js"
import { UsageLog } from "../usage/UsageLog.js"
import type { SpeechOutcome, SpeechPorts } from "./SpeechRun.js"
import { synthesize } from "./Synthesize.js"

export type { RequestContext } from "../messages/RequestContext.js"
export type { AudioPull, SpeechOutcome } from "./SpeechRun.js"
export { generationIdOf } from "./Synthesize.js"

export interface SpeechServiceShape {
  /**
   * Synthesizes the speech a request body asks for: the audio of the first endpoint that gives any (opened in the
   * caller's scope), or the error its client gets. Every request leaves one usage record.
   */
  readonly synthesize: (
    context: RequestContext,
    body: unknown
  ) => Effect.Effect<SpeechOutcome, GatewayError.GatewayError>
}

/** The speech use case as a service. */
export class SpeechService extends Context.Tag("@model-gateway/core/SpeechService")<
  SpeechService,
  SpeechServiceShape
>() {}

/** Builds the service from its ports. */
export const make = Effect.gen(function*() {
  const ports: SpeechPorts = {
    catalogue: yield* Catalogue,
    upstream: yield* Upstream,
    usageLog: yield* UsageLog,
    stats: yield* EndpointStats.EndpointStats,
    affinity: yield* SessionAffinity.SessionAffinity,
    quotas: Option.getOrUndefined(yield* Effect.serviceOption(Quotas.Quotas))
  }
  return SpeechService.of({ synthesize: synthesize(ports) })
})

/** The service, given Catalogue, Upstream, UsageLog, EndpointStats and SessionAffinity. */
export const layer = Layer.effect(SpeechService, make)
