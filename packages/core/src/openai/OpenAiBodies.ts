/**
 * What the OpenAI-compatible use case does with a body: the part a provider receives (the gateway's own fields
 * stripped, usage asked for in a chat stream, a clamped output cap), what routing needs of an endpoint, where the
 * plugins add to the system prompt, and the conversation the router and moderation plugins read.
 */
import * as Predicate from "effect/Predicate"
import { tokensOf } from "../execution/UntoldUsage.js"
import * as JsonSource from "../messages/JsonSource.js"
import type { JsonObject } from "../messages/Wire.js"
import * as GatewayFields from "../routing/GatewayFields.js"
import * as RoutePlanner from "../routing/RoutePlanner.js"
import type { Requirements } from "../routing/RoutePlanner.js"
import type { OpenAiApi } from "../upstream/Upstream.js"
import type { OpenAiRequest } from "./OpenAiRequest.js"

/** The gateway fields a provider never receives; `user` is OpenAI's own field too, and goes through. */
const STRIPPED = new Set([...GatewayFields.names].filter((name) => name !== "user"))

/**
 * The body an endpoint receives: the client's less the gateway's fields, with the endpoint's model id, and for a
 * chat stream `stream_options.include_usage` (the gateway bills the usage; a client that did not ask for it does
 * not get the usage chunk). It carries the client's JSON text, if recorded (see `JsonSource`).
 */
export const forwardBody = (api: OpenAiApi, body: JsonObject, stream: boolean): JsonObject => {
  const out: JsonObject = {}
  for (const key of Object.keys(body)) {
    if (STRIPPED.has(key)) continue
    if (key === "__proto__") {
      Object.defineProperty(out, key, { value: body[key], enumerable: true, writable: true, configurable: true })
    } else out[key] = body[key]
  }
  if (api === "chat" && stream) {
    out.stream_options = Object.assign({}, Predicate.isRecord(body.stream_options) ? body.stream_options : {}, {
      include_usage: true
    })
  }
  return JsonSource.derive(out, body)
}

/** The client asked for the usage chunk of a chat stream. */
export const wantsUsage = (body: JsonObject): boolean =>
  Predicate.isRecord(body.stream_options) && body.stream_options.include_usage === true

/** The output cap a body asks for, by the field its API uses. */
export const maxTokensOf = (api: OpenAiApi, body: JsonObject): number | undefined => {
  const value = api === "chat"
    ? body.max_completion_tokens ?? body.max_tokens
    : api === "responses"
    ? body.max_output_tokens
    : undefined
  return typeof value === "number" ? value : undefined
}

/** The field a body's output cap is in, as `maxTokensOf` reads it: the one a clamp lowers and a refusal names. */
export const maxTokensField = (
  api: OpenAiApi,
  body: JsonObject
): "max_tokens" | "max_completion_tokens" | "max_output_tokens" =>
  api === "responses"
    ? "max_output_tokens"
    : body.max_completion_tokens !== undefined && body.max_completion_tokens !== null
    ? "max_completion_tokens"
    : "max_tokens"

/** The body with its output cap lowered to `maxTokens` (prefer, then clamp: see `RoutePlanner`). */
export const clamp = (api: OpenAiApi, body: JsonObject, maxTokens: number): JsonObject =>
  Object.assign({}, body, { [maxTokensField(api, body)]: maxTokens })

const parts = (content: unknown): ReadonlyArray<JsonObject> =>
  Array.isArray(content) ? content.filter(Predicate.isRecord) : []

const hasPart = (messages: unknown, types: ReadonlyArray<string>): boolean =>
  Array.isArray(messages) &&
  messages.some((m) => Predicate.isRecord(m) && parts(m.content).some((p) => types.includes(String(p.type))))

/** What the request needs of an endpoint. */
export const requirements = (api: OpenAiApi, body: JsonObject, bodyBytes: number | undefined): Requirements => {
  const conversation = api === "chat" ? body.messages : api === "responses" ? body.input : undefined
  const tools = Array.isArray(body.tools) && body.tools.length > 0
  const used: Array<string> = []
  if (tools) used.push("tools")
  if (body.tool_choice != null) used.push("tool_choice")
  for (const key of ["temperature", "top_p", "top_k", "seed", "logprobs"]) if (body[key] != null) used.push(key)
  if (body.stop != null) used.push("stop")
  if (maxTokensOf(api, body) !== undefined) used.push("max_tokens")
  if (body.response_format != null || (Predicate.isRecord(body.text) && body.text.format != null)) {
    used.push("response_format")
  }
  if (body.reasoning != null || body.reasoning_effort != null) used.push("reasoning")
  return {
    api,
    tools,
    images: hasPart(conversation, ["image_url", "input_image"]),
    documents: hasPart(conversation, ["file", "input_file"]),
    maxTokens: maxTokensOf(api, body),
    parameters: used,
    estimatedPromptTokens: bodyBytes === undefined ? undefined : tokensOf(bodyBytes)
  }
}

/**
 * What the route planner is asked for a request to `api` that runs on `modelId` (its own model, or a router's
 * choice): its routing fields and what `body` needs of an endpoint. Pure: a batch's submission plans its requests with
 * it as their runs will.
 */
export const routeRequest = (
  api: OpenAiApi,
  request: Pick<OpenAiRequest["request"], "models" | "fallbacks" | "provider" | "route">,
  modelId: string,
  body: JsonObject,
  bodyBytes: number | undefined
): RoutePlanner.RouteRequest => ({
  model: modelId,
  models: request.models,
  fallbacks: request.fallbacks,
  provider: RoutePlanner.effectivePreferences(request.provider, request.route),
  requirements: requirements(api, body, bodyBytes)
})

/** Text added to the system prompt: a chat body's leading system message, a Responses body's `instructions`. */
export const appendSystem = (api: OpenAiApi) => (body: JsonObject, text: string): JsonObject => {
  if (api === "responses") {
    const instructions = typeof body.instructions === "string" && body.instructions !== ""
      ? `${body.instructions}\n\n${text}`
      : text
    return Object.assign({}, body, { instructions })
  }
  const messages = Array.isArray(body.messages) ? body.messages : []
  return Object.assign({}, body, { messages: [{ role: "system", content: text }, ...messages] })
}

const asText = (content: unknown): unknown =>
  Array.isArray(content)
    ? parts(content).map((p) =>
      p.type === "input_text" || p.type === "output_text" ? { type: "text", text: p.text } : p
    )
    : content

/**
 * The conversation as the router and moderation plugins read it (`{messages, system, tools}` of role/content
 * messages whose text parts are `{type: "text", text}`): a chat body's messages, a Responses body's input and
 * instructions, an embeddings body's inputs as user turns.
 */
export const conversationOf = (api: OpenAiApi, body: JsonObject): JsonObject => {
  if (api === "chat") return { messages: body.messages, tools: body.tools }
  const input = body.input
  const items = typeof input === "string" ? [input] : Array.isArray(input) ? input : []
  const messages = items.map((item) =>
    typeof item === "string"
      ? { role: "user", content: item }
      : Predicate.isRecord(item)
      ? { role: item.role ?? "user", content: asText(item.content) }
      : { role: "user", content: "" }
  )
  return api === "responses"
    ? { messages, system: body.instructions, tools: body.tools }
    : { messages }
}
