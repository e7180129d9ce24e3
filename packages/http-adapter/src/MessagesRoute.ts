/**
 * `POST /messages` and `POST /messages/count_tokens`: the messages use case behind the route table. The dispatcher has checked the key, the
 * `x-session-id` header and the JSON body; this route gives the use case its context (who asked, the metadata and
 * app attribution headers) and turns its outcome into a JSON or an event-stream response.
 */
import { MessagesService } from "@model-gateway/core"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { GatewayResponse } from "./HttpTypes.js"
import type * as RouteTable from "./RouteTable.js"
import { contextOf, JSON_TYPE, responseOf } from "./UseCaseHttp.js"

/** `POST /messages`, JSON or an event stream as the body's `stream` asks; messages-style error bodies. */
export const create: RouteTable.Route<MessagesService.MessagesService> = {
  method: "POST",
  path: "/messages",
  access: "key",
  family: "messages",
  session: true,
  body: "json",
  handler: (request) =>
    Effect.map(
      Context.get(request.services, MessagesService.MessagesService).create(contextOf(request), request.body),
      (outcome) => responseOf(outcome, request.requestId)
    )
}

/** `POST /messages/count_tokens`: `{input_tokens}`, counted by an endpoint of the model or locally. */
export const countTokens: RouteTable.Route<MessagesService.MessagesService> = {
  method: "POST",
  path: "/messages/count_tokens",
  access: "key",
  family: "messages",
  session: true,
  body: "json",
  handler: (request) =>
    Effect.map(
      Context.get(request.services, MessagesService.MessagesService).countTokens(contextOf(request), request.body),
      (count): GatewayResponse => ({
        status: 200,
        headers: { "content-type": JSON_TYPE, "request-id": request.requestId },
        body: { _tag: "Text", text: JSON.stringify(count) }
      })
    )
}
