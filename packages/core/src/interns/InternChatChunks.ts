/**
 * The events of a streamed Anthropic-shaped answer (what the messages use case streams) as the
 * `chat.completion.chunk` objects of an intern chat, made as each event arrives: a role chunk before the first
 * content, text as `content` deltas, thinking as `reasoning` deltas, the finish reason, an in-band error as a chunk
 * with `error` and `finish_reason: "error"`, and last a chunk with no choices carrying `session_id` and `usage`. Pure;
 * the provider adapters' `ChatTranslate` does the same for `/v1/chat/completions`, but core cannot import it.
 */
import { isJsonObject as isObject, type JsonObject, type StreamEvent } from "../messages/Wire.js"

export interface ChunkOptions {
  readonly id: string
  /** Unix seconds. */
  readonly created: number
  /** The model asked for; replaced by the one `message_start` names. */
  readonly model: string
  readonly sessionId: string
}

export interface ChunkTranslator {
  /** One event in; the chunks it implies out. */
  readonly push: (event: StreamEvent) => ReadonlyArray<JsonObject>
  /** The stream ended: an error chunk if it ended early, then the final chunk (session and usage). */
  readonly end: () => ReadonlyArray<JsonObject>
  /** The answer's text so far. */
  readonly text: () => string
  /** True once the answer finished (`message_stop`) without an error. */
  readonly completed: () => boolean
}

const count = (u: unknown): number => (typeof u === "number" && Number.isFinite(u) ? u : 0)

/** The chat `finish_reason` of an Anthropic `stop_reason`. */
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

/** The intern chat error of a messages error type: its code, reason and whether a retry may help. */
export const chatError = (type: unknown, message: string): JsonObject => {
  const [code, reason, retryable] = type === "invalid_request_error"
    ? [400, "bad_request", false]
    : type === "rate_limit_error"
    ? [429, "rate_limited", true]
    : type === "timeout_error"
    ? [504, "timeout", true]
    : type === "overloaded_error"
    ? [529, "turn_failed", true]
    : type === "stream_severed"
    ? [502, "stream_severed", true]
    : [500, "turn_failed", true]
  return { code, message, metadata: { reason, retryable } }
}

/** Makes a translator for one streamed answer. */
export const make = (options: ChunkOptions): ChunkTranslator => {
  let model = options.model
  let announced = false
  let stopped = false
  let failed = false
  let text = ""
  const usage: JsonObject = {}

  const frame = () => ({ id: options.id, object: "chat.completion.chunk", created: options.created, model })

  const chunk = (delta: JsonObject, finish: string | null = null): JsonObject => ({
    ...frame(),
    choices: [{ index: 0, delta, finish_reason: finish }]
  })

  const emit = (out: Array<JsonObject>, delta: JsonObject, finish: string | null = null) => {
    if (!announced) {
      announced = true
      out.push(chunk({ role: "assistant", content: "" }))
    }
    out.push(chunk(delta, finish))
  }

  const addUsage = (source: unknown) => {
    if (!isObject(source)) return
    for (const [key, value] of Object.entries(source)) if (typeof value === "number") usage[key] = value
  }

  const error = (type: unknown, message: string): JsonObject => {
    failed = true
    return { ...chunk({}, "error"), error: chatError(type, message) }
  }

  const delta = (event: StreamEvent, out: Array<JsonObject>) => {
    const d = isObject(event.delta) ? event.delta : {}
    if (d.type === "text_delta" && typeof d.text === "string" && d.text !== "") {
      text += d.text
      emit(out, { content: d.text })
    } else if (d.type === "thinking_delta" && typeof d.thinking === "string" && d.thinking !== "") {
      emit(out, { reasoning: d.thinking })
    }
  }

  const push = (event: StreamEvent): ReadonlyArray<JsonObject> => {
    if (stopped || failed) return []
    const out: Array<JsonObject> = []
    switch (event.type) {
      case "message_start": {
        const message = isObject(event.message) ? event.message : {}
        if (typeof message.model === "string") model = message.model
        addUsage(message.usage)
        break
      }
      case "content_block_start": {
        const block = isObject(event.content_block) ? event.content_block : {}
        if (block.type === "text" && typeof block.text === "string" && block.text !== "") {
          text += block.text
          emit(out, { content: block.text })
        }
        break
      }
      case "content_block_delta":
        delta(event, out)
        break
      case "message_delta": {
        addUsage(event.usage)
        const finish = finishReason(isObject(event.delta) ? event.delta.stop_reason : undefined)
        if (finish !== null) emit(out, {}, finish)
        break
      }
      case "message_stop":
        stopped = true
        break
      case "error": {
        const e = isObject(event.error) ? event.error : {}
        out.push(error(e.type, typeof e.message === "string" ? e.message : "the answer failed"))
        break
      }
    }
    return out
  }

  const end = (): ReadonlyArray<JsonObject> => {
    const out: Array<JsonObject> = []
    if (!stopped && !failed) out.push(error("stream_severed", "the answer ended before it was complete"))
    const cached = count(usage.cache_read_input_tokens)
    const prompt = count(usage.input_tokens) + cached + count(usage.cache_creation_input_tokens)
    const completion = count(usage.output_tokens)
    out.push({
      ...frame(),
      choices: [],
      session_id: options.sessionId,
      usage: {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
        prompt_tokens_details: { cached_tokens: cached },
        ...(typeof usage.cost === "number" ? { cost: usage.cost } : {})
      }
    })
    return out
  }

  return { push, end, text: () => text, completed: () => stopped && !failed }
}
