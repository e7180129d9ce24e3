/**
 * `POST /audio/speech`: the speech use case behind the route table. The dispatcher has checked the key, the
 * `x-session-id` header and the JSON body; this route gives the use case its context and answers with the audio bytes
 * as they arrive (`Content-Type: audio/mpeg`, or `audio/pcm;rate=<Hz>;channels=1` for 16-bit little-endian samples),
 * with the request's `request-id` and its `x-generation-id`. Errors have the generic body (spec 7.2).
 */
import { SpeechService } from "@model-gateway/core"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { GatewayResponse } from "./HttpTypes.js"
import * as QuotaHeaders from "./QuotaHeaders.js"
import * as RequestHeaders from "./RequestHeaders.js"
import type * as RouteTable from "./RouteTable.js"

/** The header that carries the generation id of a speech answer. */
export const GENERATION_ID_HEADER = "x-generation-id"

const contextOf = (
  request: RouteTable.AuthenticatedRequest<SpeechService.SpeechService>
): SpeechService.RequestContext => {
  const headers = request.request.headers
  return {
    requestId: request.requestId,
    route: request.route,
    principal: request.principal,
    sessionId: request.sessionId,
    bodyBytes: request.bodyBytes,
    metadata: RequestHeaders.wantsMetadata(headers),
    headers: {},
    app: RequestHeaders.app(headers)
  }
}

const responseOf = (outcome: SpeechService.SpeechOutcome, requestId: string): GatewayResponse => ({
  status: 200,
  headers: QuotaHeaders.add(
    {
      "content-type": outcome.contentType,
      "cache-control": "no-store",
      "x-accel-buffering": "no",
      "request-id": requestId,
      [GENERATION_ID_HEADER]: outcome.generationId
    },
    "generic",
    outcome.quota,
    Date.now()
  ),
  body: { _tag: "Bytes", open: outcome.open }
})

/** `POST /audio/speech`: raw audio bytes, streamed; generic error bodies. */
export const create: RouteTable.Route<SpeechService.SpeechService> = {
  method: "POST",
  path: "/audio/speech",
  access: "key",
  family: "generic",
  session: true,
  body: "json",
  handler: (request) =>
    Effect.map(
      Context.get(request.services, SpeechService.SpeechService).synthesize(contextOf(request), request.body),
      (outcome) => responseOf(outcome, request.requestId)
    )
}
