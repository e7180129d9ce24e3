/**
 * Pure translation between the Anthropic Messages wire format the gateway serves and the OpenAI chat
 * completions format that OpenAI-compatible upstreams speak (OpenAI, vLLM, Ollama, llama.cpp server,
 * OpenRouter, DeepSeek). No I/O: the OpenAI adapter feeds these functions with parsed bodies and chunks.
 */
import type { Wire } from "@model-gateway/core"
import { Upstream } from "@model-gateway/core"
import { Either, Predicate } from "effect"
import { rejectionKind } from "../internal/Transport.js"

type JsonObject = Wire.JsonObject
type UpstreamError = Upstream.UpstreamError
type UpstreamFailure = Upstream.UpstreamFailure

/** What the target upstream can take, and the model id it knows the model by. */
export interface ChatRequestOptions {
  readonly upstreamModel: string
  readonly stream: boolean
  /** The upstream accepts `file` content parts (PDFs) and text documents. */
  readonly supportsDocuments?: boolean | undefined
  /** The upstream accepts `reasoning_effort`. */
  readonly supportsReasoning?: boolean | undefined
  /**
   * Keep Anthropic `cache_control` markers on text parts (OpenRouter and some vLLM builds honour them).
   * Off by default: strict OpenAI-schema servers reject unknown keys in content parts.
   */
  readonly cacheControl?: boolean | undefined
  /**
   * The field that caps the output: `max_tokens` (most OpenAI-compatible servers) or `max_completion_tokens` (OpenAI,
   * whose reasoning models refuse `max_tokens`). Default `max_tokens`.
   */
  readonly maxTokensField?: "max_tokens" | "max_completion_tokens" | undefined
}

// ---------------------------------------------------------------------------------------------------
// small helpers

const asObject = (u: unknown): JsonObject | undefined => (Predicate.isRecord(u) ? u : undefined)

const asString = (u: unknown): string | undefined => (typeof u === "string" ? u : undefined)

const asNumber = (u: unknown): number | undefined => (typeof u === "number" && Number.isFinite(u) ? u : undefined)

const asArray = (u: unknown): ReadonlyArray<unknown> | undefined => (Array.isArray(u) ? u : undefined)

const fail = (kind: UpstreamFailure, message: string): never => {
  throw new Upstream.UpstreamError({ kind, message })
}

/** Runs a translation written with `fail`, turning its failures into a `Left`; bugs still throw. */
const attempt = <A>(f: () => A): Either.Either<A, UpstreamError> => {
  try {
    return Either.right(f())
  } catch (error) {
    if (error instanceof Upstream.UpstreamError) return Either.left(error)
    throw error
  }
}

const randomId = (): string => globalThis.crypto.randomUUID().replace(/-/g, "")

// ---------------------------------------------------------------------------------------------------
// request: Anthropic Messages -> chat completions

const effortFromBudget = (budget: number): string => (budget <= 2048 ? "low" : budget <= 8192 ? "medium" : "high")

const effortFromOutputConfig = (effort: unknown): string | undefined => {
  switch (effort) {
    case "low":
    case "medium":
    case "high":
      return effort
    case "max":
      return "high"
    default:
      return undefined
  }
}

const withCacheControl = (part: JsonObject, block: JsonObject, options: ChatRequestOptions): JsonObject =>
  options.cacheControl === true && block.cache_control !== undefined ?
    { ...part, cache_control: block.cache_control } :
    part

const textPart = (block: JsonObject, options: ChatRequestOptions): JsonObject =>
  withCacheControl({ type: "text", text: asString(block.text) ?? "" }, block, options)

const imagePart = (block: JsonObject): JsonObject => {
  const source = asObject(block.source) ?? fail("invalid_request", "image block without a source")
  switch (source.type) {
    case "base64": {
      const mediaType = asString(source.media_type) ?? "image/png"
      return { type: "image_url", image_url: { url: `data:${mediaType};base64,${asString(source.data) ?? ""}` } }
    }
    case "url":
      return { type: "image_url", image_url: { url: asString(source.url) ?? "" } }
    default:
      return fail(
        "unsupported",
        `image source type ${String(source.type)} cannot be sent to an OpenAI-compatible upstream`
      )
  }
}

const documentParts = (block: JsonObject, options: ChatRequestOptions): Array<JsonObject> => {
  if (options.supportsDocuments !== true) {
    return fail("unsupported", `upstream model ${options.upstreamModel} does not accept document blocks`)
  }
  const source = asObject(block.source) ?? fail("invalid_request", "document block without a source")
  const title = asString(block.title)
  switch (source.type) {
    case "base64": {
      const mediaType = asString(source.media_type) ?? "application/pdf"
      if (mediaType !== "application/pdf") {
        return fail("unsupported", `document media type ${mediaType} cannot be sent to an OpenAI-compatible upstream`)
      }
      return [{
        type: "file",
        file: {
          filename: title ?? "document.pdf",
          file_data: `data:${mediaType};base64,${asString(source.data) ?? ""}`
        }
      }]
    }
    case "text": {
      const data = asString(source.data) ?? ""
      return [withCacheControl({ type: "text", text: title ? `${title}\n\n${data}` : data }, block, options)]
    }
    case "content": {
      const content = source.content
      if (typeof content === "string") return [{ type: "text", text: content }]
      return (asArray(content) ?? []).flatMap((item) => {
        const inner = asObject(item)
        if (inner?.type === "text") return [textPart(inner, options)]
        if (inner?.type === "image") return [imagePart(inner)]
        return fail("unsupported", `document content block ${String(inner?.type)} cannot be sent upstream`)
      })
    }
    default:
      return fail("unsupported", `document source type ${String(source.type)} cannot be sent upstream`)
  }
}

/** Text of a tool_result, and the images it carried (which a `tool` message cannot hold). */
const toolResultContent = (block: JsonObject): { text: string; images: Array<JsonObject> } => {
  const content = block.content
  const images: Array<JsonObject> = []
  let text: string
  if (content === undefined || content === null) {
    text = ""
  } else if (typeof content === "string") {
    text = content
  } else {
    const texts: Array<string> = []
    for (const item of asArray(content) ?? []) {
      const inner = asObject(item)
      if (inner?.type === "text") texts.push(asString(inner.text) ?? "")
      else if (inner?.type === "image") images.push(imagePart(inner))
      else fail("unsupported", `tool_result content block ${String(inner?.type)} cannot be sent upstream`)
    }
    text = texts.join("\n")
  }
  if (block.is_error === true) text = text === "" ? "Error" : `Error: ${text}`
  return { text, images }
}

const userMessages = (content: unknown, options: ChatRequestOptions): Array<JsonObject> => {
  if (typeof content === "string") return [{ role: "user", content }]
  const blocks = asArray(content) ?? fail("invalid_request", "message content must be a string or an array")
  const toolMessages: Array<JsonObject> = []
  const parts: Array<JsonObject> = []
  const toolImages: Array<JsonObject> = []
  for (const item of blocks) {
    const block = asObject(item) ?? fail("invalid_request", "content block must be an object")
    switch (block.type) {
      case "text":
        parts.push(textPart(block, options))
        break
      case "image":
        parts.push(imagePart(block))
        break
      case "document":
        parts.push(...documentParts(block, options))
        break
      case "tool_result": {
        const id = asString(block.tool_use_id) ?? fail("invalid_request", "tool_result without tool_use_id")
        const { images, text } = toolResultContent(block)
        toolMessages.push({ role: "tool", tool_call_id: id, content: text })
        if (images.length > 0) toolImages.push({ type: "text", text: `Images returned by tool call ${id}:` }, ...images)
        break
      }
      default:
        fail("unsupported", `user content block ${String(block.type)} cannot be sent to an OpenAI-compatible upstream`)
    }
  }
  const rest = [...toolImages, ...parts]
  return rest.length > 0 ? [...toolMessages, { role: "user", content: rest }] : toolMessages
}

const assistantMessage = (content: unknown): JsonObject => {
  if (typeof content === "string") return { role: "assistant", content }
  const blocks = asArray(content) ?? fail("invalid_request", "message content must be a string or an array")
  const texts: Array<string> = []
  const toolCalls: Array<JsonObject> = []
  for (const item of blocks) {
    const block = asObject(item) ?? fail("invalid_request", "content block must be an object")
    switch (block.type) {
      case "text":
        texts.push(asString(block.text) ?? "")
        break
      case "tool_use":
        toolCalls.push({
          id: asString(block.id) ?? fail("invalid_request", "tool_use without id"),
          type: "function",
          function: { name: asString(block.name) ?? "", arguments: JSON.stringify(block.input ?? {}) }
        })
        break
      case "thinking":
      case "redacted_thinking":
        break
      default:
        fail(
          "unsupported",
          `assistant content block ${String(block.type)} cannot be sent to an OpenAI-compatible upstream`
        )
    }
  }
  const message: JsonObject = {
    role: "assistant",
    content: texts.length > 0 || toolCalls.length === 0 ? texts.join("") : null
  }
  if (toolCalls.length > 0) message.tool_calls = toolCalls
  return message
}

const systemMessage = (system: unknown, options: ChatRequestOptions): JsonObject | undefined => {
  if (system === undefined || system === null) return undefined
  if (typeof system === "string") return system === "" ? undefined : { role: "system", content: system }
  const blocks = (asArray(system) ?? fail("invalid_request", "system must be a string or an array of text blocks"))
    .map((item) => asObject(item) ?? fail("invalid_request", "system block must be an object"))
  if (blocks.length === 0) return undefined
  if (options.cacheControl === true && blocks.some((block) => block.cache_control !== undefined)) {
    return { role: "system", content: blocks.map((block) => textPart(block, options)) }
  }
  return { role: "system", content: blocks.map((block) => asString(block.text) ?? "").join("\n\n") }
}

const functionTools = (tools: ReadonlyArray<unknown>): Array<JsonObject> =>
  tools.map((item) => {
    const tool = asObject(item) ?? fail("invalid_request", "tool must be an object")
    if (tool.type !== undefined && tool.type !== null && tool.type !== "custom") {
      return fail(
        "unsupported",
        `server tool ${String(tool.type)} cannot be expressed for an OpenAI-compatible upstream`
      )
    }
    const fn: JsonObject = {
      name: asString(tool.name) ?? fail("invalid_request", "tool without name"),
      parameters: tool.input_schema ?? { type: "object", properties: {} }
    }
    if (typeof tool.description === "string") fn.description = tool.description
    if (typeof tool.strict === "boolean") fn.strict = tool.strict
    return { type: "function", function: fn }
  })

const toolChoice = (choice: JsonObject): unknown => {
  switch (choice.type) {
    case "auto":
      return "auto"
    case "any":
      return "required"
    case "none":
      return "none"
    case "tool":
      return { type: "function", function: { name: asString(choice.name) ?? "" } }
    default:
      return fail("invalid_request", `unknown tool_choice type ${String(choice.type)}`)
  }
}

/**
 * Translates an Anthropic Messages request body (gateway-only fields already stripped) into a chat
 * completions body for an OpenAI-compatible upstream. Fails with `unsupported` for what the target
 * cannot express (server tools, documents where not accepted, Files API sources).
 */
export const toChatRequest = (
  body: JsonObject,
  options: ChatRequestOptions
): Either.Either<JsonObject, UpstreamError> =>
  attempt(() => {
    const messages: Array<JsonObject> = []
    const system = systemMessage(body.system, options)
    if (system) messages.push(system)
    for (const item of asArray(body.messages) ?? fail("invalid_request", "messages must be an array")) {
      const message = asObject(item) ?? fail("invalid_request", "message must be an object")
      if (message.role === "user") messages.push(...userMessages(message.content, options))
      else if (message.role === "assistant") messages.push(assistantMessage(message.content))
      else if (message.role === "system") {
        // Claude Code puts system messages among the others; chat completions take them anywhere.
        const inline = systemMessage(message.content, options)
        if (inline) messages.push(inline)
      } else fail("invalid_request", `unknown message role ${String(message.role)}`)
    }

    const out: JsonObject = { model: options.upstreamModel, messages }
    if (body.max_tokens !== undefined) out[options.maxTokensField ?? "max_tokens"] = body.max_tokens
    if (body.temperature !== undefined) out.temperature = body.temperature
    if (body.top_p !== undefined) out.top_p = body.top_p
    if (body.top_k !== undefined) out.top_k = body.top_k
    const stop = asArray(body.stop_sequences)
    if (stop && stop.length > 0) out.stop = stop

    const userId = asString(asObject(body.metadata)?.user_id)
    if (userId !== undefined) out.user = userId

    if (asArray(body.mcp_servers)?.length) {
      fail("unsupported", "MCP servers cannot be expressed for an OpenAI-compatible upstream")
    }
    const tools = asArray(body.tools)
    if (tools && tools.length > 0) {
      out.tools = functionTools(tools)
      const choice = asObject(body.tool_choice)
      if (choice) {
        out.tool_choice = toolChoice(choice)
        if (choice.disable_parallel_tool_use === true) {
          out.parallel_tool_calls = false
        }
      }
    }

    const outputConfig = asObject(body.output_config)
    if (options.supportsReasoning === true) {
      const thinking = asObject(body.thinking)
      const budget = asNumber(thinking?.budget_tokens)
      const effort = effortFromOutputConfig(outputConfig?.effort) ??
        (thinking?.type === "enabled" && budget !== undefined ? effortFromBudget(budget) : undefined)
      if (effort !== undefined) out.reasoning_effort = effort
    }
    const format = asObject(outputConfig?.format)
    if (format?.type === "json_schema") {
      out.response_format = {
        type: "json_schema",
        json_schema: { name: "output", schema: format.schema, strict: true }
      }
    }

    if (options.stream) {
      out.stream = true
      out.stream_options = { include_usage: true }
    }
    return out
  })

// ---------------------------------------------------------------------------------------------------
// errors and usage

const statusFromErrorType = (type: string | undefined): number | undefined => {
  switch (type) {
    case "rate_limit_exceeded":
    case "rate_limit_error":
    case "insufficient_quota":
      return 429
    case "overloaded_error":
    case "overloaded":
      return 529
    case "invalid_request_error":
    case "context_length_exceeded":
    case "invalid_request":
      return 400
    case "authentication_error":
    case "invalid_api_key":
      return 401
    case "permission_error":
      return 403
    case "not_found_error":
    case "model_not_found":
      return 404
    case "timeout":
    case "timeout_error":
      return 408
    case "server_error":
    case "api_error":
    case "internal_error":
      return 500
    default:
      return undefined
  }
}

const kindFromStatus = (status: number, overloaded: boolean): UpstreamFailure => {
  if (status === 429) return "rate_limited"
  if (status === 529 || (overloaded && status >= 500)) return "overloaded"
  if (status === 408 || status === 504) return "timeout"
  if (status >= 500) return "server_error"
  if (status === 401 || status === 403 || status === 402) return "auth"
  if (status === 404) return "not_found"
  return "invalid_request"
}

/**
 * Classifies an upstream HTTP error answer (status and parsed body) for the executor: 429 →
 * `rate_limited`, 529 or an overloaded body → `overloaded`, 5xx → `server_error`, 401/402/403 →
 * `auth`, 404 → `not_found`, other 4xx → `invalid_request`. The message comes from `error.message`.
 */
export const classifyErrorBody = (status: number, body: unknown, retryAfterMs?: number): UpstreamError => {
  const error = asObject(asObject(body)?.error)
  const errorType = asString(error?.type) ?? asString(error?.code)
  const message = asString(error?.message) ?? asString(asObject(body)?.message) ??
    (typeof body === "string" && body !== "" ? body.slice(0, 500) : `upstream answered with status ${status}`)
  const overloaded = errorType === "overloaded_error" || errorType === "overloaded" || /overloaded/i.test(message)
  const kind = kindFromStatus(status, overloaded)
  return new Upstream.UpstreamError({
    kind: kind === "invalid_request"
      ? rejectionKind(message, `${errorType ?? ""} ${asString(error?.code) ?? ""}`)
      : kind,
    message,
    status,
    errorType,
    retryAfterMs
  })
}

/** An error an OpenAI-compatible server sent inside a stream (`{"error": {...}}`), classified like an HTTP error. */
export const classifyInBandError = (error: unknown): UpstreamError => {
  const object = asObject(error)
  const code = asNumber(object?.code)
  const type = asString(object?.type) ?? asString(object?.code)
  const status = code !== undefined && code >= 400 && code <= 599 ? code : statusFromErrorType(type) ?? 500
  const err = classifyErrorBody(status, { error: object ?? { message: String(error) } })
  return new Upstream.UpstreamError({ kind: err.kind, message: err.message, errorType: err.errorType })
}

/**
 * Converts OpenAI usage to Anthropic usage. OpenAI's `prompt_tokens` includes cached prompt tokens
 * (`prompt_tokens_details.cached_tokens`, DeepSeek's `prompt_cache_hit_tokens`) and cache writes where
 * reported; Anthropic's `input_tokens` excludes both, so they are subtracted and never counted twice.
 */
export const usageFromOpenAi = (usage: unknown): Wire.Usage => {
  const u = asObject(usage) ?? {}
  const details = asObject(u.prompt_tokens_details)
  const prompt = asNumber(u.prompt_tokens) ?? 0
  const cacheRead = asNumber(details?.cached_tokens) ?? asNumber(u.prompt_cache_hit_tokens) ?? 0
  const cacheWrite = asNumber(details?.cache_write_tokens) ?? asNumber(u.cache_creation_input_tokens) ?? 0
  return {
    input_tokens: Math.max(0, prompt - cacheRead - cacheWrite),
    output_tokens: asNumber(u.completion_tokens) ?? 0,
    cache_creation_input_tokens: cacheWrite,
    cache_read_input_tokens: cacheRead
  }
}

const stopReason = (finishReason: string, sawToolCalls: boolean): string => {
  switch (finishReason) {
    case "length":
      return "max_tokens"
    case "tool_calls":
    case "function_call":
      return "tool_use"
    case "content_filter":
      return "refusal"
    default:
      return sawToolCalls ? "tool_use" : "end_turn"
  }
}

/** Prefers `reasoning_content` (vLLM, DeepSeek) over `reasoning` (OpenRouter, newer vLLM): some send both. */
const reasoningOf = (o: JsonObject): string | undefined => asString(o.reasoning_content) ?? asString(o.reasoning)

// ---------------------------------------------------------------------------------------------------
// non-streamed response

/**
 * Parses tool-call arguments. Empty arguments become `{}`; arguments that are not a JSON object are
 * kept verbatim as `{"_raw": "..."}` so the client sees what the model produced instead of losing it.
 */
const parseArguments = (raw: unknown): JsonObject => {
  if (Predicate.isRecord(raw)) return raw
  const text = asString(raw) ?? ""
  if (text.trim() === "") return {}
  try {
    const parsed: unknown = JSON.parse(text)
    return Predicate.isRecord(parsed) ? parsed : { _raw: text }
  } catch {
    return { _raw: text }
  }
}

const textOf = (content: unknown): string => {
  if (typeof content === "string") return content
  return (asArray(content) ?? [])
    .map((part) => asObject(part))
    .filter((part) => part?.type === "text")
    .map((part) => asString(part?.text) ?? "")
    .join("")
}

/** Translates a non-streamed chat completion into an Anthropic message. */
export const fromChatCompletion = (json: JsonObject, model: string): Either.Either<Wire.Message, UpstreamError> =>
  attempt(() => {
    if (json.error !== undefined && json.error !== null) throw classifyInBandError(json.error)
    const choices = asArray(json.choices) ?? fail("transport", "malformed chat completion: no choices")
    const choice = asObject(choices[0]) ?? fail("transport", "malformed chat completion: empty choices")
    const message = asObject(choice.message) ?? {}
    const content: Array<JsonObject> = []
    const reasoning = reasoningOf(message)
    if (reasoning) content.push({ type: "thinking", thinking: reasoning, signature: "" })
    const refusal = asString(message.refusal)
    const text = textOf(message.content) || refusal || ""
    if (text !== "") content.push({ type: "text", text, citations: null })
    const toolCalls = asArray(message.tool_calls) ?? []
    for (const item of toolCalls) {
      const call = asObject(item) ?? {}
      const fn = asObject(call.function) ?? {}
      content.push({
        type: "tool_use",
        id: asString(call.id) ?? `toolu_${randomId()}`,
        name: asString(fn.name) ?? "",
        input: parseArguments(fn.arguments)
      })
    }
    const finish = asString(choice.finish_reason)
    const reason = refusal && !textOf(message.content) ? "refusal" : stopReason(finish ?? "stop", toolCalls.length > 0)
    const id = asString(json.id)
    return {
      id: `msg_${id ?? randomId()}`,
      type: "message",
      role: "assistant",
      model,
      content,
      stop_reason: reason,
      stop_sequence: null,
      usage: usageFromOpenAi(json.usage)
    }
  })

// ---------------------------------------------------------------------------------------------------
// streamed response

/** Incremental translator of one chat-completions stream into Anthropic stream events. */
export interface StreamTranslator {
  /** One parsed `chat.completion.chunk` in; the Anthropic events it implies out, at once. */
  readonly push: (chunk: JsonObject) => Either.Either<ReadonlyArray<Wire.StreamEvent>, UpstreamError>
  /**
   * The upstream stream ended (`data: [DONE]` or end of body): closes the message. Fails with
   * `transport` when no `finish_reason` was seen, i.e. the stream was cut short.
   */
  readonly end: () => Either.Either<ReadonlyArray<Wire.StreamEvent>, UpstreamError>
}

interface ToolCallState {
  id: string | undefined
  name: string | undefined
  /** Arguments received and not yet emitted (the call waits for its turn). */
  pending: string
  /** All arguments received, to tell when a call is complete. */
  args: string
  block: number | undefined
  closed: boolean
}

type OpenBlock =
  | { readonly kind: "text"; readonly index: number }
  | { readonly kind: "thinking"; readonly index: number }
  | { readonly kind: "tool"; readonly index: number; readonly call: ToolCallState }

const isCompleteJson = (text: string): boolean => {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

/**
 * Makes a translator for one streamed answer. `message_start` is sent once, lazily, with the first
 * content (so a failure before content can still fall over); `message_delta` (always with
 * `usage.output_tokens`) and `message_stop` come from `end()`, since OpenAI may send the finish chunk
 * and the usage chunk in either order.
 *
 * Tool calls are tracked by their `index`. OpenAI-compatible servers stream calls one after another,
 * and a call's block is streamed as its fragments arrive. Anthropic blocks cannot interleave, so when
 * fragments of another call arrive while the open call's arguments are not yet complete JSON, the other
 * call is buffered until the open one completes (or until `end()`), then emitted in index order.
 */
export const makeStreamTranslator = (model: string, messageId?: string): StreamTranslator => {
  let started = false
  let ended = false
  let finishReason: string | undefined
  let usage: unknown = undefined
  let upstreamId: string | undefined
  let nextBlock = 0
  let open: OpenBlock | undefined
  let sawToolCalls = false
  const calls = new Map<number, ToolCallState>()
  const aliases = new Map<number, number>()

  const start = (events: Array<Wire.StreamEvent>): void => {
    if (started) return
    started = true
    const u = usage !== undefined ? usageFromOpenAi(usage) : undefined
    events.push({
      type: "message_start",
      message: {
        id: messageId ?? `msg_${upstreamId ?? randomId()}`,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: {
          input_tokens: u?.input_tokens ?? 0,
          output_tokens: 0,
          cache_creation_input_tokens: u?.cache_creation_input_tokens ?? 0,
          cache_read_input_tokens: u?.cache_read_input_tokens ?? 0
        }
      }
    })
  }

  const closeOpen = (events: Array<Wire.StreamEvent>): void => {
    if (!open) return
    if (open.kind === "tool") open.call.closed = true
    events.push({ type: "content_block_stop", index: open.index })
    open = undefined
  }

  const openBlock = (events: Array<Wire.StreamEvent>, kind: "text" | "thinking"): number => {
    if (open?.kind === kind) return open.index
    start(events)
    closeOpen(events)
    const index = nextBlock++
    open = { kind, index }
    events.push({
      type: "content_block_start",
      index,
      content_block: kind === "text" ? { type: "text", text: "" } : { type: "thinking", thinking: "", signature: "" }
    })
    return index
  }

  const openTool = (events: Array<Wire.StreamEvent>, call: ToolCallState): void => {
    start(events)
    closeOpen(events)
    const index = nextBlock++
    call.block = index
    call.id ??= `toolu_${randomId()}`
    open = { kind: "tool", index, call }
    events.push({
      type: "content_block_start",
      index,
      content_block: { type: "tool_use", id: call.id, name: call.name ?? "", input: {} }
    })
    flushArgs(events, call)
  }

  const flushArgs = (events: Array<Wire.StreamEvent>, call: ToolCallState): void => {
    if (call.pending === "" || call.block === undefined) return
    events.push({
      type: "content_block_delta",
      index: call.block,
      delta: { type: "input_json_delta", partial_json: call.pending }
    })
    call.pending = ""
  }

  /** The first waiting call (lowest index) that can be opened. */
  const nextWaiting = (requireName: boolean): ToolCallState | undefined => {
    const waiting = [...calls.entries()]
      .filter(([, call]) => call.block === undefined && (!requireName || call.name !== undefined))
      .sort(([a], [b]) => a - b)
    return waiting[0]?.[1]
  }

  /** Opens waiting calls while the open one (if a tool) is complete. */
  const advanceTools = (events: Array<Wire.StreamEvent>): void => {
    while (true) {
      if (open?.kind === "tool" && !isCompleteJson(open.call.args)) return
      const next = nextWaiting(true)
      if (!next) return
      openTool(events, next)
    }
  }

  /**
   * The key of the call a fragment belongs to. Some servers omit `index` or give every call index 0:
   * a new id on a known index (or without an index) starts a new call; fragments without an id continue
   * the latest call of that index.
   */
  const callKey = (index: number | undefined, id: string | undefined): number => {
    const fresh = () => Math.max(-1, ...calls.keys(), ...aliases.values()) + 1
    if (index === undefined) {
      const known = [...calls.entries()].find(([, call]) => id !== undefined && call.id === id)
      if (known) return known[0]
      return id !== undefined || calls.size === 0 ? fresh() : Math.max(...calls.keys())
    }
    const key = aliases.get(index) ?? index
    const existing = calls.get(key)
    if (existing && id !== undefined && existing.id !== undefined && existing.id !== id) {
      const next = fresh()
      aliases.set(index, next)
      return next
    }
    return key
  }

  const toolDelta = (events: Array<Wire.StreamEvent>, item: unknown): void => {
    const delta = asObject(item)
    if (!delta) return
    const fn = asObject(delta.function) ?? {}
    const id = asString(delta.id) || undefined
    const name = asString(fn.name) || undefined
    const args = asString(fn.arguments) ?? ""
    const index = callKey(asNumber(delta.index), id)
    let call = calls.get(index)
    if (!call) {
      call = { id: undefined, name: undefined, pending: "", args: "", block: undefined, closed: false }
      calls.set(index, call)
    }
    if (call.block === undefined) {
      call.id ??= id
      call.name ??= name
    }
    if (args !== "") {
      if (call.closed) fail("transport", `arguments for tool call ${index} arrived after its block was closed`)
      call.args += args
      call.pending += args
      flushArgs(events, call)
    }
    if (nextWaiting(true)) advanceTools(events)
  }

  const push = (chunk: JsonObject): Either.Either<ReadonlyArray<Wire.StreamEvent>, UpstreamError> =>
    attempt(() => {
      if (ended) return []
      if (chunk.error !== undefined && chunk.error !== null) throw classifyInBandError(chunk.error)
      upstreamId ??= asString(chunk.id)
      if (Predicate.isRecord(chunk.usage)) usage = chunk.usage
      const events: Array<Wire.StreamEvent> = []
      const choices = asArray(chunk.choices) ?? []
      const choice = asObject(choices.find((c) => asNumber(asObject(c)?.index) === 0) ?? choices[0])
      if (!choice) return events
      const delta = asObject(choice.delta) ?? {}

      const reasoning = reasoningOf(delta)
      if (reasoning) {
        const index = openBlock(events, "thinking")
        events.push({ type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: reasoning } })
      }
      const text = asString(delta.content)
      if (text) {
        const index = openBlock(events, "text")
        events.push({ type: "content_block_delta", index, delta: { type: "text_delta", text } })
      }
      const toolCalls = asArray(delta.tool_calls) ?? []
      if (toolCalls.length > 0) sawToolCalls = true
      for (const item of toolCalls) toolDelta(events, item)

      const finish = asString(choice.finish_reason)
      if (finish) {
        if (finish === "error" || finish === "abort") fail("server_error", `upstream ended the answer with ${finish}`)
        finishReason = finish
      }
      return events
    })

  const end = (): Either.Either<ReadonlyArray<Wire.StreamEvent>, UpstreamError> =>
    attempt(() => {
      if (ended) return []
      ended = true
      if (finishReason === undefined) fail("transport", "upstream stream ended without finish_reason")
      const events: Array<Wire.StreamEvent> = []
      start(events)
      while (true) {
        const next = nextWaiting(false)
        if (!next) break
        openTool(events, next)
      }
      closeOpen(events)
      const u = usageFromOpenAi(usage)
      events.push({
        type: "message_delta",
        delta: { stop_reason: stopReason(finishReason ?? "stop", sawToolCalls), stop_sequence: null },
        usage: {
          input_tokens: u.input_tokens,
          output_tokens: u.output_tokens,
          cache_creation_input_tokens: u.cache_creation_input_tokens,
          cache_read_input_tokens: u.cache_read_input_tokens
        }
      })
      events.push({ type: "message_stop" })
      return events
    })

  return { push, end }
}
