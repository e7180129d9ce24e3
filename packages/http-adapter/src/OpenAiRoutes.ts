/**
 * The OpenAI-compatible front door: `POST /chat/completions`, `/embeddings` and `/responses`, served by the
 * OpenAI-compatible use case (the same routing, fallbacks, plugins, usage and cost as `/messages`), with the
 * OpenAI-family error body (`{error: {code, message, type, param, metadata?}}`, `code` the HTTP status).
 */
import { OpenAiService, type Upstream } from "@model-gateway/core"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as RouteTable from "./RouteTable.js"
import { contextOf, responseOf } from "./UseCaseHttp.js"

const route = (api: Upstream.OpenAiApi, path: string): RouteTable.Route<OpenAiService.OpenAiService> => ({
  method: "POST",
  path,
  access: "key",
  family: "openai",
  session: true,
  body: "json",
  handler: (request) =>
    Effect.map(
      Context.get(request.services, OpenAiService.OpenAiService).create(api, contextOf(request), request.body),
      (outcome) => responseOf(outcome, request.requestId, "openai")
    )
})

/** `POST /chat/completions`: JSON, or `data:` chunks ending in `data: [DONE]` when the body asks to stream. */
export const chatCompletions = route("chat", "/chat/completions")

/** `POST /embeddings`. */
export const embeddings = route("embeddings", "/embeddings")

/** `POST /responses`: JSON, or the Responses API's named events when the body asks to stream. */
export const responses = route("responses", "/responses")
