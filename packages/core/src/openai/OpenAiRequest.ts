/**
 * The bodies of the OpenAI-compatible routes as `effect/Schema` models: `POST /v1/chat/completions`,
 * `/v1/embeddings` and `/v1/responses`. Only what routing reads is modelled (the model, streaming, the output cap,
 * tools, the message and input shapes), with the gateway's own fields validated exactly as on `/v1/messages`;
 * everything else is forwarded untouched.
 */
import type * as Either from "effect/Either"
import * as E from "effect/Either"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import type { InvalidRequest } from "../errors/GatewayError.js"
import {
  AnyObject,
  arrayOf,
  Bool,
  entries,
  Int,
  integer,
  literal,
  nullable,
  object,
  oneOf,
  optional,
  Str,
  toInvalidRequest,
  tooDeep,
  tooDeepError,
  withFastPath
} from "../internal/RequestSchema.js"
import * as GatewayFields from "../routing/GatewayFields.js"
import type { OpenAiApi } from "../upstream/Upstream.js"

const Content = optional(nullable(oneOf({
  string: Str,
  array: arrayOf(AnyObject, "an array of content parts")
}, "a string or an array of content parts")))

/** A chat message as its schema alone checks it (the test of `isPlainChatMessage` compares the two). */
export const CheckedChatMessage = object({
  role: literal("system", "developer", "user", "assistant", "tool", "function"),
  content: Content
}, "a message object")

const ROLES = new Set<unknown>(["system", "developer", "user", "assistant", "tool", "function"])

/**
 * What `CheckedChatMessage` accepts, checked with plain code: a message that passes is taken as it is, without the
 * schema's copy (a coding agent's conversation has hundreds); one that does not goes through the schema, which names
 * what is wrong.
 */
export const isPlainChatMessage = (m: unknown): boolean => {
  if (!Predicate.isRecord(m) || !ROLES.has(m.role)) return false
  const content = m.content
  if (content === undefined) return !Object.hasOwn(m, "content")
  if (content === null || typeof content === "string") return true
  if (!Array.isArray(content)) return false
  for (let i = 0; i < content.length; i++) if (!Predicate.isRecord(content[i])) return false
  return true
}

const ChatMessage = withFastPath(CheckedChatMessage, isPlainChatMessage, "a message object")

const chatSchema = Schema.Struct({
  model: Str,
  messages: arrayOf(ChatMessage, "an array of messages").pipe(entries(1, 100_000, "message", "messages")),
  stream: optional(nullable(Bool)),
  stream_options: optional(nullable(object({ include_usage: optional(nullable(Bool)) }))),
  max_tokens: optional(nullable(integer(1))),
  max_completion_tokens: optional(nullable(integer(1))),
  tools: optional(nullable(arrayOf(AnyObject, "an array of tools"))),
  n: optional(nullable(Int)),
  ...GatewayFields.fields,
  trace: optional(GatewayFields.Trace)
}).pipe(GatewayFields.modelsOrFallbacks)

/** The decoded body of `POST /v1/chat/completions` (only what routing reads). */
export interface ChatRequest extends Schema.Schema.Type<typeof chatSchema> {}

const embeddingsSchema = Schema.Struct({
  model: Str,
  input: oneOf({ string: Str, array: Schema.Array(Schema.Unknown) }, "a string or an array"),
  ...GatewayFields.fields,
  trace: optional(GatewayFields.Trace)
}).pipe(GatewayFields.modelsOrFallbacks)

/** The decoded body of `POST /v1/embeddings`. */
export interface EmbeddingsRequest extends Schema.Schema.Type<typeof embeddingsSchema> {}

const responsesSchema = Schema.Struct({
  model: Str,
  input: optional(oneOf({ string: Str, array: Schema.Array(Schema.Unknown) }, "a string or an array")),
  instructions: optional(nullable(Str)),
  // Routed to the endpoint that stored it (`Routing.plan`), and forwarded.
  previous_response_id: optional(nullable(Str)),
  stream: optional(nullable(Bool)),
  // Under 1 a 400 as on chat: every provider refuses it, and a negative cap shrinks the budget reservation.
  max_output_tokens: optional(nullable(integer(1))),
  tools: optional(nullable(arrayOf(AnyObject, "an array of tools"))),
  ...GatewayFields.fields,
  trace: optional(GatewayFields.Trace)
}).pipe(GatewayFields.modelsOrFallbacks)

/** The decoded body of `POST /v1/responses` (only what routing reads). */
export interface ResponsesRequest extends Schema.Schema.Type<typeof responsesSchema> {}

/** A decoded OpenAI-compatible request, with the API it was sent to. */
export type OpenAiRequest =
  | { readonly api: "chat"; readonly request: ChatRequest }
  | { readonly api: "embeddings"; readonly request: EmbeddingsRequest }
  | { readonly api: "responses"; readonly request: ResponsesRequest }

const options = { errors: "first", onExcessProperty: "ignore" } as const
const decoders = {
  chat: Schema.decodeUnknownEither(oneOf({ object: chatSchema }, "a JSON object"), options),
  embeddings: Schema.decodeUnknownEither(oneOf({ object: embeddingsSchema }, "a JSON object"), options),
  responses: Schema.decodeUnknownEither(oneOf({ object: responsesSchema }, "a JSON object"), options)
}

/**
 * A body with `models` and no `model` (OpenRouter's model routing, as `@openrouter/sdk` sends it): the first of `models`
 * is the model requested, the others its candidates, as when `model` names it.
 */
const withModelOfModels = (body: unknown): unknown => {
  if (!Predicate.isRecord(body) || body.model !== undefined) return body
  const models = body.models
  return Array.isArray(models) && typeof models[0] === "string" ? { ...body, model: models[0] } : body
}

/** Validates a parsed JSON body for `api`; the error names the offending field path. */
export const validate = (api: OpenAiApi, body: unknown): Either.Either<OpenAiRequest, InvalidRequest> =>
  tooDeep(body) ? E.left(tooDeepError()) : E.match(decoders[api](withModelOfModels(body)) as Either.Either<any, any>, {
    onLeft: (error) => E.left(toInvalidRequest(error)),
    onRight: (request) => E.right({ api, request } as OpenAiRequest)
  })
