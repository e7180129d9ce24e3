/**
 * Between the routes and the use cases: the context a use case gets from a request (who asked, the metadata and app
 * attribution headers, the session id, the body's size), and its outcome as a JSON or an event-stream response.
 */
import type { MessagesService } from "@model-gateway/core"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type { Family } from "./ErrorResponses.js"
import type { GatewayResponse } from "./HttpTypes.js"
import { header } from "./HttpTypes.js"
import * as QuotaHeaders from "./QuotaHeaders.js"
import * as RequestHeaders from "./RequestHeaders.js"
import type * as RouteTable from "./RouteTable.js"

export const JSON_TYPE = "application/json"

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  "x-accel-buffering": "no"
} as const

/** The use case's context for a request: who asked, and what the headers say. */
export const contextOf = <R>(request: RouteTable.AuthenticatedRequest<R>): MessagesService.RequestContext => {
  const headers = request.request.headers
  return {
    requestId: request.requestId,
    route: request.route,
    principal: request.principal,
    sessionId: request.sessionId,
    bodyBytes: request.bodyBytes,
    metadata: RequestHeaders.wantsMetadata(headers),
    headers: {
      anthropicVersion: header(headers, "anthropic-version"),
      anthropicBeta: header(headers, "anthropic-beta"),
      openaiBeta: header(headers, "openai-beta")
    },
    app: RequestHeaders.app(headers),
    progress: request.request.progress
  }
}

// Literals rather than `{ ...SSE_HEADERS, ...headers }`: a spread object given new keys is slow on V8 11 (Node 20).
/** The response of a use case's outcome, with the limits' headers of the route's family when any limit applies. */
export const responseOf = (
  outcome: MessagesService.MessagesOutcome,
  requestId: string,
  family: Family = "messages"
): GatewayResponse => {
  const response: GatewayResponse = outcome._tag === "Json"
    ? {
      status: 200,
      headers: { "content-type": JSON_TYPE, "request-id": requestId },
      body: { _tag: "Text", text: JSON.stringify(outcome.body) }
    }
    : {
      status: 200,
      headers: {
        "content-type": SSE_HEADERS["content-type"],
        "cache-control": SSE_HEADERS["cache-control"],
        "x-accel-buffering": SSE_HEADERS["x-accel-buffering"],
        "request-id": requestId
      },
      body: new OutcomeBody(outcome)
    }
  // OpenAI's name for the id too: the openai SDK tells it as a response's `_request_id`.
  if (family === "openai") (response.headers as Record<string, string>)["x-request-id"] = requestId
  if (outcome.quota !== undefined) {
    QuotaHeaders.add(response.headers as Record<string, string>, family, outcome.quota, Date.now())
  }
  return response
}

/**
 * A streamed outcome's body: its `stream` is made when a binding reads it (fetch, HttpApp); the node binding claims
 * the frames instead. A class, not an object literal with a getter, which V8 makes in dictionary mode (a property
 * dictionary of some 450 bytes, held by every open stream).
 */
class OutcomeBody {
  readonly _tag = "Stream" as const
  readonly open: Effect.Effect<MessagesService.FramePull, never, Scope.Scope>
  readonly claim: Effect.Effect<MessagesService.ClaimedFrames> | undefined
  constructor(private readonly outcome: Extract<MessagesService.MessagesOutcome, { readonly _tag: "Stream" }>) {
    this.open = outcome.open
    this.claim = outcome.claim
  }
  get stream(): Stream.Stream<string> {
    return this.outcome.frames
  }
}
