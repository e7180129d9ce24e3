/**
 * The OpenAI-protocol dialects of the executor: chat completions (JSON, or `data:` chunks ending in `data: [DONE]`),
 * the Responses API (JSON, or named events) and embeddings (JSON only). Answers are passed on as the endpoint gave
 * them, with the catalogue's model id, the provider and the cost in their usage; in-band errors take each API's own
 * form.
 */
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as GatewayError from "../errors/GatewayError.js"
import type { Charge } from "../execution/Charging.js"
import type { Dialect, FrameContext, FrameDialect } from "../execution/Dialect.js"
import * as UntoldUsage from "../execution/UntoldUsage.js"
import type { JsonObject } from "../messages/Wire.js"
import type * as Cost from "../pricing/Cost.js"
import type { Attempt } from "../routing/RoutePlanner.js"
import {
  type ForwardHeaders,
  type OpenAiApi,
  toGatewayError,
  UpstreamError,
  type UpstreamService
} from "../upstream/Upstream.js"
import * as ChunkTemplate from "./ChunkTemplate.js"
import * as OpenAiUsage from "./OpenAiUsage.js"
import * as ToldUsage from "./ToldUsage.js"

/** How the attempts of one request are called: the body each endpoint receives. */
export interface Calls {
  readonly upstream: UpstreamService
  readonly api: OpenAiApi
  readonly bodyFor: (attempt: Attempt) => JsonObject
  /** The client's headers an upstream of their protocol receives (its beta flags). */
  readonly headers: ForwardHeaders
  /** Passed on to each call (see `OpenAiCall.bodyMade`). */
  readonly bodyMade?: (() => void) | undefined
}

const cannot = (api: OpenAiApi) =>
  new UpstreamError({ kind: "unsupported", message: `the configured upstream adapter cannot serve the ${api} API` })

const json = ({ api, bodyFor, bodyMade, headers, upstream }: Calls) => (attempt: Attempt) =>
  upstream.createOpenAi === undefined
    ? Effect.fail(cannot(api))
    : upstream.createOpenAi({ api, endpoint: attempt.endpoint, body: bodyFor(attempt), headers, bodyMade })

const open = ({ api, bodyFor, bodyMade, headers, upstream }: Calls) => (attempt: Attempt) =>
  upstream.streamOpenAi === undefined
    ? Effect.fail(cannot(api))
    : upstream.streamOpenAi({ api, endpoint: attempt.endpoint, body: bodyFor(attempt), headers, bodyMade })

const usageOf = (answer: JsonObject): JsonObject | undefined =>
  Predicate.isRecord(answer.usage) ? answer.usage as JsonObject : undefined

/**
 * A JSON answer as the client receives it: the catalogue's model id, the provider, the cost in its usage; with the
 * token counts billed (`tokens`, in the API's own names) when the upstream told none (estimated: see `UntoldUsage`).
 */
const respondWith = (
  billed: (usage: JsonObject | undefined) => Cost.BilledUsage,
  tokens: (usage: Cost.BilledUsage) => JsonObject
) =>
(
  answer: JsonObject,
  attempt: Attempt,
  charge: Charge,
  pipeline: ReadonlyArray<unknown> | undefined
): JsonObject => {
  const told = usageOf(answer)
  const shown = UntoldUsage.isTold(billed(told)) ? told : Object.assign({}, told, tokens(charge.usage))
  const out: JsonObject = Object.assign({}, answer, {
    model: attempt.model.id,
    provider: attempt.endpoint.provider,
    usage: Object.assign({}, shown, { cost: Number(charge.cost) })
  })
  if (pipeline !== undefined) out.service_metadata = { pipeline }
  return out
}

/**
 * What a client of the OpenAI-compatible routes is told of an upstream failure: the generic error table's statuses
 * (spec 7.2), where a provider that answered with an error of its own (a 5xx other than 503 and 529) is a 502, as on
 * the speech route and at OpenRouter, not the messages route's 500 (spec 7.1 has no 502), which reads as the
 * gateway's own failure. Everything else as on the messages route (`Upstream.toGatewayError`): 503 and 529 stay for
 * overloads and endpoints that cannot be reached.
 */
export const failure = (error: UpstreamError): GatewayError.GatewayError =>
  error.kind === "server_error" ? new GatewayError.ProviderFailed({ message: error.message }) : toGatewayError(error)

const errorBody = (error: GatewayError.GatewayError) => {
  const { status, type } = GatewayError.describe(error)
  return { message: error.message, type, code: status }
}

// -----------------------------------------------------------------------------
// chat completions
// -----------------------------------------------------------------------------

const choiceOf = (chunk: JsonObject): JsonObject | undefined => {
  const choices = chunk.choices
  return Array.isArray(choices) && Predicate.isRecord(choices[0]) ? choices[0] as JsonObject : undefined
}

const hasContent = (delta: unknown): boolean => {
  if (!Predicate.isRecord(delta)) return false
  const text = (value: unknown) => typeof value === "string" && value !== ""
  return text(delta.content) || text(delta.reasoning) || text(delta.reasoning_content) || text(delta.refusal) ||
    (Array.isArray(delta.tool_calls) && delta.tool_calls.length > 0)
}

const lengthOf = (value: unknown): number => (typeof value === "string" ? value.length : 0)

/** The characters of content a chunk carries: its text, reasoning, refusal and tool arguments (see `UntoldUsage`). */
const generatedIn = (chunk: JsonObject): number => generatedOf(choiceOf(chunk)?.delta)

/** The same of a chat completion: its choices' messages. */
const generatedInAnswer = (answer: JsonObject): number => {
  let chars = 0
  if (Array.isArray(answer.choices)) {
    for (const choice of answer.choices) if (Predicate.isRecord(choice)) chars += generatedOf(choice.message)
  }
  return chars
}

/** The characters of a delta's or a message's content, reasoning, refusal and tool calls. */
const generatedOf = (delta: unknown): number => {
  if (!Predicate.isRecord(delta)) return 0
  let chars = lengthOf(delta.content) + lengthOf(delta.reasoning) + lengthOf(delta.reasoning_content) +
    lengthOf(delta.refusal)
  if (Array.isArray(delta.tool_calls)) {
    for (const call of delta.tool_calls) {
      if (Predicate.isRecord(call) && Predicate.isRecord(call.function)) {
        chars += lengthOf(call.function.name) + lengthOf(call.function.arguments)
      }
    }
  }
  return chars
}

/**
 * A chunk as the client gets it: the catalogue's model id, the provider, the cost in its usage. Its usage, or the usage
 * told so far that it carries unseen (`ToldUsage`), is the stream's.
 */
const chatFrame = (includeUsage: boolean) => (chunk: JsonObject, context: FrameContext): string => {
  const usage = usageOf(chunk)
  if (usage !== undefined) context.state.usage = usage
  else {
    const told = ToldUsage.toldOf(chunk)
    if (told !== undefined) context.state.usage = told
  }
  const choices = chunk.choices
  if (usage !== undefined && !includeUsage && (!Array.isArray(choices) || choices.length === 0)) return ""
  const out: JsonObject = Object.assign({}, chunk, {
    model: context.attempt.model.id,
    provider: context.attempt.endpoint.provider
  })
  // Only the chunk that tells the usage carries it. OpenAI's `"usage": null` on every other chunk (when the client asked
  // for usage) is dropped, as OpenRouter sends none: OpenRouter's SDK refuses a chunk whose usage is null.
  if (usage !== undefined && includeUsage) {
    out.usage = Object.assign({}, usage, { cost: Number(context.charge().cost) })
  } else if ("usage" in out) delete out.usage
  if (context.pipeline !== undefined && usage !== undefined) out.service_metadata = { pipeline: context.pipeline }
  return `data: ${JSON.stringify(out)}\n\n`
}

/** The `id` and `created` of a stream's first chunk, which its other chunks repeat. */
const identityOf = (chunk: JsonObject): JsonObject => ({ id: chunk.id, created: chunk.created })

/**
 * OpenRouter's error chunk: the stream's `id`, `object`, `created` and `model` like its other chunks (OpenRouter's SDK
 * requires them of every chunk), `finish_reason: "error"` and the `error` (the openai SDK raises an APIError for it).
 */
const chatErrorFrame = (error: GatewayError.GatewayError, requestId: string, context: FrameContext): string => {
  const identity = context.state.identity
  return `data: ${
    JSON.stringify({
      id: typeof identity?.id === "string" ? identity.id : requestId,
      object: "chat.completion.chunk",
      created: typeof identity?.created === "number" ? identity.created : Math.floor(Date.now() / 1000),
      model: context.attempt.model.id,
      provider: context.attempt.endpoint.provider,
      choices: [{ index: 0, delta: {}, finish_reason: "error" }],
      error: errorBody(error)
    })
  }\n\n`
}

const chatFrames = (includeUsage: boolean): FrameDialect<JsonObject> => {
  const frame = chatFrame(includeUsage)
  return {
    isContent: (chunk) => {
      const choice = choiceOf(chunk)
      return choice !== undefined && (hasContent(choice.delta) || choice.finish_reason != null)
    },
    isEnd: (chunk) => choiceOf(chunk)?.finish_reason != null,
    // A text chunk an adapter read as its template with other text is written from the template's frame.
    frame: (chunk, context) => {
      const state = context.state
      if (state.identity === undefined) state.identity = identityOf(chunk)
      state.generated += generatedIn(chunk)
      return ChunkTemplate.frameWith(chunk, frame, context)
    },
    error: chatErrorFrame,
    trailer: "data: [DONE]\n\n",
    unfinished: "upstream stream ended before a finish_reason"
  }
}

const promptOf = (usage: Cost.BilledUsage) => usage.input + usage.cacheRead + usage.cacheWrite

const respondChatLike = respondWith(OpenAiUsage.chat, (usage) => ({
  prompt_tokens: promptOf(usage),
  completion_tokens: usage.output,
  total_tokens: promptOf(usage) + usage.output
}))

const respondResponses = respondWith(OpenAiUsage.responses, (usage) => ({
  input_tokens: promptOf(usage),
  output_tokens: usage.output,
  total_tokens: promptOf(usage) + usage.output
}))

/** A chat completion as told: also `system_fingerprint`, present (as null when unknown) as OpenRouter's SDK requires. */
const respondChat = (
  answer: JsonObject,
  attempt: Attempt,
  charge: Charge,
  pipeline: ReadonlyArray<unknown> | undefined
): JsonObject => {
  const out = respondChatLike(answer, attempt, charge, pipeline)
  if (out.system_fingerprint === undefined) out.system_fingerprint = null
  return out
}

/** The chat completions dialect; `includeUsage` is the client's `stream_options.include_usage`. */
export const chat = (
  calls: Calls,
  options: { readonly includeUsage: boolean; readonly finish?: (answer: JsonObject) => Effect.Effect<JsonObject> }
): Dialect<JsonObject, JsonObject> => ({
  json: json(calls),
  open: open(calls),
  usage: (answer) => OpenAiUsage.chat(usageOf(answer)),
  generated: generatedInAnswer,
  streamUsage: OpenAiUsage.chat,
  finish: options.finish,
  respond: respondChat,
  frames: chatFrames(options.includeUsage),
  failure
})

// -----------------------------------------------------------------------------
// responses
// -----------------------------------------------------------------------------

const isResponseEnd = (event: JsonObject) => event.type === "response.completed" || event.type === "response.incomplete"

/**
 * The first event a stream commits to: one that carries generated output (any `*.delta`, an image's `partial_image`),
 * a whole part or item (`*.done`), or the end. The others are held back as `response.created` is, so that a failure
 * before them can still fall back: the structure OpenAI sends before every first delta (`output_item.added`,
 * `content_part.added`, `reasoning_summary_part.added`, empty), and a tool call's progress (`web_search_call.searching`).
 * A reasoning item can sit there for seconds.
 */
const isResponseContent = (event: JsonObject): boolean => {
  const type = event.type
  return typeof type === "string" &&
    (type.endsWith(".delta") || type.endsWith(".done") || isResponseEnd(event) ||
      type === "response.image_generation_call.partial_image")
}

/** The characters of content an event carries: a delta's text or arguments (audio's bytes are not text). */
const generatedBy = (event: JsonObject): number =>
  typeof event.delta === "string" && event.type !== "response.audio.delta" ? event.delta.length : 0

/**
 * A Responses event as the client receives it: the response it carries with the model, provider and cost. Notes the
 * number an error event after it would carry (an event without a `sequence_number` counts as one).
 */
const responseFrame = (event: JsonObject, context: FrameContext): string => {
  const type = String(event.type)
  const state = context.state
  state.generated += generatedBy(event)
  const sequence = event.sequence_number
  state.sequence = typeof sequence === "number" ? sequence + 1 : state.sequence + 1
  let out = event
  if (Predicate.isRecord(event.response)) {
    const response = event.response as JsonObject
    const usage = usageOf(response)
    if (usage !== undefined) context.state.usage = usage
    const shown: JsonObject = Object.assign({}, response, {
      model: context.attempt.model.id,
      provider: context.attempt.endpoint.provider
    })
    if (usage !== undefined) shown.usage = Object.assign({}, usage, { cost: Number(context.charge().cost) })
    if (context.pipeline !== undefined && isResponseEnd(event)) shown.service_metadata = { pipeline: context.pipeline }
    out = Object.assign({}, event, { response: shown })
  }
  return `event: ${type}\ndata: ${JSON.stringify(out)}\n\n`
}

/** The characters of a response's output: its texts, reasoning and function calls' arguments (see `UntoldUsage`). */
const generatedInResponse = (answer: JsonObject): number => {
  let chars = 0
  const count = (parts: unknown) => {
    if (!Array.isArray(parts)) return
    for (const part of parts) if (Predicate.isRecord(part)) chars += lengthOf(part.text) + lengthOf(part.refusal)
  }
  if (Array.isArray(answer.output)) {
    for (const item of answer.output) {
      if (!Predicate.isRecord(item)) continue
      count(item.content)
      count(item.summary)
      chars += lengthOf(item.arguments)
    }
  }
  return chars
}

/** The id of a response the upstream stored (not one with `store: false`, which cannot be continued). */
const storedId = (response: unknown): string | undefined =>
  Predicate.isRecord(response) && typeof response.id === "string" && response.store !== false ? response.id : undefined

/** The same, of the response a stream's event carries (`response.created`, `response.completed`, ...). */
const storedIdOfEvent = (event: JsonObject): string | undefined => storedId(event.response)

/**
 * The Responses API dialect. `stored` is false for a request with `store: false` (true by default): its answer is
 * not kept upstream, so its id is not remembered (see `SessionAffinity.responseKey`).
 */
export const responses = (calls: Calls, stored = true): Dialect<JsonObject, JsonObject> => ({
  json: json(calls),
  storedAs: stored ? storedId : undefined,
  open: open(calls),
  usage: (answer) => OpenAiUsage.responses(usageOf(answer)),
  generated: generatedInResponse,
  streamUsage: OpenAiUsage.responses,
  respond: respondResponses,
  frames: {
    isContent: isResponseContent,
    isEnd: isResponseEnd,
    frame: responseFrame,
    // OpenAI's `error` event, numbered after the last event told: the openai SDK's type and `@openrouter/sdk`'s schema
    // require the `sequence_number` (without it, the latter yields the event as an unknown one).
    error: (error, _requestId, context) => {
      const { code, message, type } = errorBody(error)
      return `event: error\ndata: ${
        JSON.stringify({
          type: "error",
          code: type,
          message,
          param: null,
          sequence_number: context.state.sequence,
          status: code
        })
      }\n\n`
    },
    trailer: "",
    unfinished: "upstream stream ended before response.completed",
    storedAs: stored ? storedIdOfEvent : undefined
  },
  failure
})

// -----------------------------------------------------------------------------
// embeddings
// -----------------------------------------------------------------------------

/** The embeddings dialect: JSON only. */
export const embeddings = (calls: Calls): Dialect<JsonObject, JsonObject> => ({
  json: json(calls),
  open: () => Effect.fail(new UpstreamError({ kind: "invalid_request", message: "embeddings are not streamed" })),
  usage: (answer) => OpenAiUsage.chat(usageOf(answer)),
  streamUsage: OpenAiUsage.chat,
  respond: respondChatLike,
  frames: chatFrames(false),
  failure
})
