/**
 * `POST /interns/{internId}/chat/completions` (`interns.chat` of `@openrouter/sdk`): the intern chat use case's chunks
 * as server-sent events (`data: {chat.completion.chunk}`), ending with `data: [DONE]`. A request refused before the
 * answer starts gets a real status and the generic error body (and is recorded here); once it runs, the messages use
 * case records it, and a failure is an error chunk in the stream.
 */
import type { UsageLog } from "@model-gateway/core"
import { InternChat } from "@model-gateway/core"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Stream from "effect/Stream"
import type { GatewayResponse } from "./HttpTypes.js"
import { header } from "./HttpTypes.js"
import { recordedFailures } from "./Recorded.js"
import * as RequestHeaders from "./RequestHeaders.js"
import type * as RouteTable from "./RouteTable.js"

type Services = InternChat.InternChat | UsageLog.UsageLog

const DONE = "data: [DONE]\n\n"

/** The body, with the `x-session-id` header as its `session_id` when it names none (the body wins). */
const withSession = (body: unknown, sessionId: string | undefined): unknown =>
  sessionId !== undefined && Predicate.isRecord(body) && body.session_id === undefined
    ? { ...body, session_id: sessionId }
    : body

/** `POST /interns/{internId}/chat/completions`. */
export const chat: RouteTable.Route<Services> = {
  method: "POST",
  path: "/interns/{internId}/chat/completions",
  access: "key",
  family: "generic",
  body: "json",
  session: true,
  handler: (request) => {
    const service = Context.get(request.services, InternChat.InternChat)
    const context: InternChat.ChatContext = {
      principal: request.principal,
      requestId: request.requestId,
      host: header(request.request.headers, "host"),
      route: request.route,
      app: RequestHeaders.app(request.request.headers)
    }
    const body = withSession(request.body, request.sessionId)
    return recordedFailures(request, service.prepare(context, request.params.internId, body)).pipe(
      Effect.flatMap((prepared) => service.run(context, prepared)),
      Effect.map((chunks): GatewayResponse => ({
        status: 200,
        headers: {
          "content-type": "text/event-stream; charset=utf-8",
          "cache-control": "no-cache",
          "x-accel-buffering": "no",
          "request-id": request.requestId
        },
        body: {
          _tag: "Stream",
          stream: Stream.concat(
            Stream.map(chunks, (chunk) => `data: ${JSON.stringify(chunk)}\n\n`),
            Stream.succeed(DONE)
          )
        }
      }))
    )
  }
}
