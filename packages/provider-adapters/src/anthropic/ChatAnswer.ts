/**
 * Pure translation of an Anthropic Messages answer (a message, or its stream of events) into the OpenAI chat
 * completions answer the gateway's `/v1/chat/completions` front door gives: a `chat.completion`, or
 * `chat.completion.chunk`s made as each event arrives. No I/O, no SSE framing.
 */
import { ChunkTemplate, ToldUsage, Upstream, Wire } from "@model-gateway/core"
import * as Either from "effect/Either"
import { asNumber, asObject, asString } from "./ChatFields.js"
import * as ReasoningDetails from "./ReasoningDetails.js"

type JsonObject = Wire.JsonObject
type UpstreamError = Upstream.UpstreamError

const transport = (message: string): UpstreamError => new Upstream.UpstreamError({ kind: "transport", message })

/**
 * The chat `finish_reason` of an Anthropic `stop_reason`: `end_turn`, `stop_sequence`, `pause_turn` (and any reason
 * not known here) → `stop`, `max_tokens` and `model_context_window_exceeded` → `length`, `tool_use` → `tool_calls`,
 * `refusal` → `content_filter`, none yet → `null`.
 */
export const finishReason = (stopReason: unknown): string | null => {
  switch (stopReason) {
    case null:
    case undefined:
      return null
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length"
    case "tool_use":
      return "tool_calls"
    case "refusal":
      return "content_filter"
    default:
      return "stop"
  }
}

/**
 * Anthropic usage as chat completions usage. Anthropic's `input_tokens` excludes cache reads and writes, OpenAI's
 * `prompt_tokens` includes them: `prompt_tokens` is their sum, `prompt_tokens_details.cached_tokens` the cache reads
 * and `cache_write_tokens` (OpenRouter's name) the cache writes, each token counted once.
 */
export const chatUsage = (usage: Partial<Wire.Usage>): JsonObject => {
  const cacheRead = asNumber(usage.cache_read_input_tokens) ?? 0
  const cacheWrite = asNumber(usage.cache_creation_input_tokens) ?? 0
  const prompt = (asNumber(usage.input_tokens) ?? 0) + cacheRead + cacheWrite
  const completion = asNumber(usage.output_tokens) ?? 0
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cacheRead, cache_write_tokens: cacheWrite }
  }
}

/** How the answer is presented to the client. */
export interface ChatCompletionOptions {
  /** The model id the client asked for. */
  readonly model: string
  /** Unix seconds. */
  readonly created: number
  /** Return thinking as `reasoning` (default true; false for OpenRouter's `reasoning: {exclude: true}`). */
  readonly includeReasoning?: boolean | undefined
}

/** OpenRouter's `format` of reasoning details that are Anthropic thinking blocks. */
export const ANTHROPIC_REASONING_FORMAT = ReasoningDetails.ANTHROPIC_REASONING_FORMAT

/**
 * Translates an Anthropic message into a `chat.completion`: text blocks joined as `content` (null without text),
 * `tool_use` blocks as `tool_calls` (ids kept, `arguments` the JSON of `input`), thinking joined as `reasoning`, and
 * the thinking blocks, signed, as OpenRouter's `reasoning_details` (redacted thinking too). Server tool blocks and
 * citations have no chat completions form and are left out.
 */
export const toChatCompletion = (message: Wire.Message, options: ChatCompletionOptions): JsonObject => {
  const texts: Array<string> = []
  const thinking: Array<string> = []
  const details: Array<JsonObject> = []
  const toolCalls: Array<JsonObject> = []
  for (const block of message.content) {
    const detail = ReasoningDetails.ofBlock(block, details.length)
    if (detail !== undefined) details.push(detail)
    if (block.type === "text") texts.push(asString(block.text) ?? "")
    else if (block.type === "thinking") thinking.push(asString(block.thinking) ?? "")
    else if (block.type === "tool_use") {
      toolCalls.push({
        id: block.id,
        type: "function",
        function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) }
      })
    }
  }
  const answer: JsonObject = { role: "assistant", content: texts.length > 0 ? texts.join("") : null, refusal: null }
  if (toolCalls.length > 0) answer.tool_calls = toolCalls
  if (thinking.length > 0 && options.includeReasoning !== false) answer.reasoning = thinking.join("")
  if (details.length > 0 && options.includeReasoning !== false) answer.reasoning_details = details
  return {
    id: `chatcmpl-${message.id}`,
    object: "chat.completion",
    created: options.created,
    model: options.model,
    choices: [{ index: 0, message: answer, finish_reason: finishReason(message.stop_reason), logprobs: null }],
    usage: chatUsage(message.usage)
  }
}

/** The stream's own `error` event, classified as the Anthropic adapter classifies it. */
const streamError = (event: Wire.StreamEvent): UpstreamError => {
  const error = asObject(event.error)
  const type = asString(error?.type)
  const kind: Upstream.UpstreamFailure = type === "overloaded_error"
    ? "overloaded"
    : type === "rate_limit_error"
    ? "rate_limited"
    : type === "invalid_request_error"
    ? "invalid_request"
    : type === "timeout_error"
    ? "timeout"
    : "server_error"
  return new Upstream.UpstreamError({
    kind,
    message: asString(error?.message) ?? "upstream stream error",
    errorType: type
  })
}

/** The chunks' identity; `includeUsage` is the client's `stream_options.include_usage`. */
export interface ChunkTranslatorOptions extends ChatCompletionOptions {
  readonly id: string
  readonly includeUsage: boolean
}

/** Incremental translator of one Anthropic stream into `chat.completion.chunk` objects. */
export interface ChunkTranslator {
  /** One Anthropic event in; the chunks it implies out, at once. An `error` event is a `Left`. */
  readonly push: (event: Wire.StreamEvent) => Either.Either<ReadonlyArray<JsonObject>, UpstreamError>
  /** The upstream stream ended: nothing more after `message_stop`, a `transport` failure without it. */
  readonly end: () => Either.Either<ReadonlyArray<JsonObject>, UpstreamError>
}

/**
 * Makes a translator for one streamed answer. The chunk with `delta: {role: "assistant", content: ""}` is sent once,
 * just before the first chunk with content or the finish (so nothing is sent before content and a failure then can
 * still fall over). Tool calls are numbered 0, 1, 2… in the order their blocks start, whatever the Anthropic block
 * index, and the fragments of each go to its number. A call whose input streamed empty (`input: {}` and no fragment
 * but empty or blank ones) gets `"{}"` as its arguments when its block stops (or at the finish), as `toChatCompletion`
 * gives it: the fragments a client joins are then always JSON. The usage chunk (`choices: []`) comes at `message_stop`
 * when asked for: input and cache figures from `message_start`, replaced by any `message_delta` gives, output from the
 * last `message_delta`. The first chunk and the finish carry, unseen, the usage told until then (core's `ToldUsage`):
 * what a stream that breaks off before `message_stop` is billed, rather than an estimate of its prompt. Thinking
 * streams as OpenRouter streams it: each fragment as `reasoning` and as a `reasoning_details` entry (`reasoning.text`)
 * numbered by its block among the answer's thinking blocks, the block's signature in an entry of its own with the same
 * number (text ""), a redacted block whole (`reasoning.encrypted`). A client merges the entries of one number (texts
 * joined), as OpenRouter's clients do, and hands them back.
 */
export const makeChunkTranslator = (options: ChunkTranslatorOptions): ChunkTranslator => {
  let started = false
  let announced = false
  let stopped = false
  let toolCalls = 0
  /** Anthropic block index → tool call number (undefined for other blocks). */
  const blocks = new Map<number, number | undefined>()
  /** Anthropic block index → number of a tool call whose arguments are still empty (or only blanks). */
  const argumentless = new Map<number, number>()
  const usage: Partial<Wire.Usage> = {}
  const frame = { id: options.id, object: "chat.completion.chunk", created: options.created, model: options.model }

  const chunk = (delta: JsonObject, finish: string | null = null): JsonObject => ({
    ...frame,
    choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }]
  })

  const emit = (out: Array<JsonObject>, delta: JsonObject, finish: string | null = null): void => {
    if (!announced) {
      announced = true
      out.push(ToldUsage.mark(chunk({ role: "assistant", content: "" }), chatUsage(usage)))
    }
    out.push(chunk(delta, finish))
  }

  const addUsage = (source: unknown): void => {
    for (const [key, value] of Object.entries(asObject(source) ?? {})) {
      if (asNumber(value) !== undefined) usage[key] = value
    }
  }

  // The first text chunk; the next are made from it, and written from its frame (core's `ChunkTemplate`).
  let textTemplate: ChunkTemplate.ChunkTemplate | undefined = undefined

  const textDelta = (out: Array<JsonObject>, text: unknown): void => {
    if (typeof text !== "string" || text === "") return
    if (textTemplate !== undefined) {
      out.push(ChunkTemplate.fill(textTemplate, text, undefined))
      return
    }
    emit(out, { content: text })
    textTemplate = ChunkTemplate.make(out[out.length - 1])
  }

  // Anthropic block index → its number among the answer's `reasoning_details` (thinking and redacted thinking).
  const details = new Map<number, number>()

  const thinkingDelta = (out: Array<JsonObject>, index: number, thinking: unknown): void => {
    const k = details.get(index)
    if (typeof thinking === "string" && thinking !== "" && k !== undefined) {
      emit(out, {
        reasoning: thinking,
        reasoning_details: [ReasoningDetails.textFragment(thinking, k)]
      })
    }
  }

  const signatureDelta = (out: Array<JsonObject>, index: number, signature: unknown): void => {
    const k = details.get(index)
    if (typeof signature === "string" && signature !== "" && k !== undefined) {
      emit(out, {
        reasoning_details: [ReasoningDetails.signatureFragment(signature, k)]
      })
    }
  }

  const blockStart = (event: Wire.StreamEvent, out: Array<JsonObject>): void => {
    const index = asNumber(event.index) ?? 0
    const block = asObject(event.content_block) ?? {}
    if (block.type !== "tool_use") {
      blocks.set(index, undefined)
      const thinks = block.type === "thinking" || block.type === "redacted_thinking"
      if (thinks && options.includeReasoning !== false) details.set(index, details.size)
      if (block.type === "text") textDelta(out, block.text)
      if (block.type === "thinking") {
        thinkingDelta(out, index, block.thinking)
        signatureDelta(out, index, block.signature)
      }
      if (block.type === "redacted_thinking") {
        const data = asString(block.data)
        const k = details.get(index)
        if (data && k !== undefined) emit(out, { reasoning_details: [ReasoningDetails.encrypted(data, k)] })
      }
      return
    }
    const k = toolCalls++
    blocks.set(index, k)
    const input = asObject(block.input)
    const args = input && Object.keys(input).length > 0 ? JSON.stringify(input) : ""
    if (args === "") argumentless.set(index, k)
    emit(out, {
      tool_calls: [{ index: k, id: block.id, type: "function", function: { name: block.name, arguments: args } }]
    })
  }

  // Anthropic streams a tool without input as `input: {}` and at most an empty fragment: joined, `""`, which no
  // client can parse. Its arguments are closed with `"{}"` once no more can come.
  const closeArguments = (out: Array<JsonObject>, index: number): void => {
    const k = argumentless.get(index)
    if (k === undefined) return
    argumentless.delete(index)
    emit(out, { tool_calls: [{ index: k, function: { arguments: "{}" } }] })
  }

  const blockDelta = (event: Wire.StreamEvent, out: Array<JsonObject>): void => {
    const index = asNumber(event.index) ?? 0
    if (!blocks.has(index)) throw transport(`upstream sent a delta for block ${index}, which never started`)
    const delta = asObject(event.delta) ?? {}
    switch (delta.type) {
      case "text_delta":
        textDelta(out, delta.text)
        break
      case "thinking_delta":
        thinkingDelta(out, index, delta.thinking)
        break
      case "signature_delta":
        signatureDelta(out, index, delta.signature)
        break
      case "input_json_delta": {
        const k = blocks.get(index)
        const partial = asString(delta.partial_json)
        if (k !== undefined && partial) {
          if (argumentless.has(index) && /\S/.test(partial)) argumentless.delete(index)
          emit(out, { tool_calls: [{ index: k, function: { arguments: partial } }] })
        }
        break
      }
    }
  }

  const translate = (event: Wire.StreamEvent): ReadonlyArray<JsonObject> => {
    if (stopped || event.type === "ping") return []
    if (event.type === "error") throw streamError(event)
    if (event.type === "message_start") {
      if (started) throw transport("upstream sent a second message_start")
      started = true
      addUsage(asObject(event.message)?.usage)
      return []
    }
    if (!started) throw transport(`upstream sent ${event.type} before message_start`)
    const out: Array<JsonObject> = []
    switch (event.type) {
      case "content_block_start":
        blockStart(event, out)
        break
      case "content_block_delta":
        blockDelta(event, out)
        break
      case "content_block_stop":
        closeArguments(out, asNumber(event.index) ?? 0)
        break
      case "message_delta": {
        addUsage(event.usage)
        const finish = finishReason(asObject(event.delta)?.stop_reason)
        if (finish !== null) {
          for (const index of [...argumentless.keys()]) closeArguments(out, index)
          emit(out, {}, finish)
          ToldUsage.mark(out[out.length - 1], chatUsage(usage))
        }
        break
      }
      case "message_stop":
        stopped = true
        if (options.includeUsage) out.push({ ...frame, choices: [], usage: chatUsage(usage) })
        break
    }
    return out
  }

  return {
    push: (event) => {
      try {
        return Either.right(translate(event))
      } catch (error) {
        if (error instanceof Upstream.UpstreamError) return Either.left(error)
        throw error
      }
    },
    end: () => (stopped ? Either.right([]) : Either.left(transport("upstream stream ended before message_stop")))
  }
}
