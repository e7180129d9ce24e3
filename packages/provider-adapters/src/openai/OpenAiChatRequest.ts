/**
 * Pure translation of an Anthropic Messages request (the body the gateway serves, gateway-only fields stripped) into
 * a chat completions request for an OpenAI-compatible upstream (`toChatRequest`): the system prompt, the messages and
 * their content blocks as content parts and tool calls, tools and tool choice, the sampling fields, reasoning effort
 * and the response format. Fails with `unsupported` for what the upstream cannot express. No I/O.
 */
import type { Upstream, Wire } from "@model-gateway/core"
import type * as Either from "effect/Either"
import { asArray, asNumber, asObject, asString, attempt, fail } from "./Translation.js"

type JsonObject = Wire.JsonObject
type UpstreamError = Upstream.UpstreamError

/** What the target upstream can take, and the model id it knows the model by. */
export interface ChatRequestOptions {
  readonly upstreamModel: string
  readonly stream: boolean
  /** The upstream accepts `file` content parts (PDFs) and text documents. */
  readonly supportsDocuments?: boolean | undefined
  /** The upstream accepts `reasoning_effort`. */
  readonly supportsReasoning?: boolean | undefined
  /**
   * The upstream accepts `top_k` (vLLM, Ollama, OpenRouter do; OpenAI refuses it as an unrecognised argument). Unset:
   * it is forwarded.
   */
  readonly supportsTopK?: boolean | undefined
  /**
   * Keep Anthropic `cache_control` markers (OpenRouter and some vLLM builds honour them): on the text parts of system,
   * user, assistant and tool messages, and the request's own (automatic caching) at the top level.
   * Off by default: strict OpenAI-schema servers reject unknown keys in content parts.
   */
  readonly cacheControl?: boolean | undefined
  /**
   * Hand an assistant turn's thinking back as `reasoning_content` (DeepSeek, Kimi: their thinking models refuse a
   * tool loop's assistant turn without it, "Missing `reasoning_content` field"). A turn with tool calls and no
   * thinking gets `""`. Off by default: strict OpenAI-schema servers refuse unknown keys in messages.
   */
  readonly reasoningContent?: boolean | undefined
  /**
   * The field that caps the output: `max_tokens` (most OpenAI-compatible servers) or `max_completion_tokens` (OpenAI,
   * whose reasoning models refuse `max_tokens`). Default `max_tokens`.
   */
  readonly maxTokensField?: "max_tokens" | "max_completion_tokens" | undefined
}

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
      if (typeof content === "string") return [withCacheControl({ type: "text", text: content }, block, options)]
      return markLast(
        (asArray(content) ?? []).flatMap((item) => {
          const inner = asObject(item)
          if (inner?.type === "text") return [textPart(inner, options)]
          if (inner?.type === "image") return [imagePart(inner)]
          return fail("unsupported", `document content block ${String(inner?.type)} cannot be sent upstream`)
        }),
        block,
        options
      )
    }
    default:
      return fail("unsupported", `document source type ${String(source.type)} cannot be sent upstream`)
  }
}

/**
 * Puts a block's `cache_control` on the last of the text parts made from it (the same breakpoint: the end of the
 * block), when markers are kept. Parts that end with something else keep no marker.
 */
const markLast = (parts: Array<JsonObject>, block: JsonObject, options: ChatRequestOptions): Array<JsonObject> => {
  const last = parts.at(-1)
  return last?.type === "text" ? [...parts.slice(0, -1), withCacheControl(last, block, options)] : parts
}

/**
 * A tool_result's content for a `tool` message, and the images it carried (which a `tool` message cannot hold). Text,
 * unless cache markers are kept and the result or one of its text blocks has one: then text parts, the result's own
 * marker on the last.
 */
const toolResultContent = (
  block: JsonObject,
  options: ChatRequestOptions
): { content: string | Array<JsonObject>; images: Array<JsonObject> } => {
  const content = block.content
  const images: Array<JsonObject> = []
  const texts: Array<JsonObject> = []
  if (typeof content === "string") {
    texts.push({ type: "text", text: content })
  } else if (content !== undefined && content !== null) {
    for (const item of asArray(content) ?? []) {
      const inner = asObject(item)
      if (inner?.type === "text") texts.push(inner)
      else if (inner?.type === "image") images.push(imagePart(inner))
      else fail("unsupported", `tool_result content block ${String(inner?.type)} cannot be sent upstream`)
    }
  }
  const error = block.is_error === true
  const marked = options.cacheControl === true &&
    (block.cache_control !== undefined || texts.some((text) => text.cache_control !== undefined))
  // Anthropic refuses a marker on an empty text block: empty parts go.
  const parts = marked ? texts.filter((text) => asString(text.text)).map((text) => textPart(text, options)) : []
  if (parts.length === 0) {
    const text = texts.map((text) => asString(text.text) ?? "").join("\n")
    return { content: error ? (text === "" ? "Error" : `Error: ${text}`) : text, images }
  }
  if (error) parts[0] = { ...parts[0], text: `Error: ${String(parts[0].text)}` }
  return { content: markLast(parts, block, options), images }
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
        const { content, images } = toolResultContent(block, options)
        toolMessages.push({ role: "tool", tool_call_id: id, content })
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

const assistantMessage = (content: unknown, options: ChatRequestOptions): JsonObject => {
  if (typeof content === "string") return { role: "assistant", content }
  const blocks = asArray(content) ?? fail("invalid_request", "message content must be a string or an array")
  const texts: Array<JsonObject> = []
  const toolCalls: Array<JsonObject> = []
  const thinking: Array<string> = []
  for (const item of blocks) {
    const block = asObject(item) ?? fail("invalid_request", "content block must be an object")
    switch (block.type) {
      case "text":
        texts.push(block)
        break
      case "tool_use":
        toolCalls.push({
          id: asString(block.id) ?? fail("invalid_request", "tool_use without id"),
          type: "function",
          function: { name: asString(block.name) ?? "", arguments: JSON.stringify(block.input ?? {}) }
        })
        break
      case "thinking":
        if (typeof block.thinking === "string") thinking.push(block.thinking)
        break
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
    content: options.cacheControl === true && texts.some((text) => text.cache_control !== undefined)
      ? texts.map((text) => textPart(text, options))
      : texts.length > 0 || toolCalls.length === 0
      ? texts.map((text) => asString(text.text) ?? "").join("")
      : null
  }
  if (toolCalls.length > 0) message.tool_calls = toolCalls
  if (options.reasoningContent === true && (thinking.length > 0 || toolCalls.length > 0)) {
    message.reasoning_content = thinking.join("")
  }
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
      else if (message.role === "assistant") messages.push(assistantMessage(message.content, options))
      else if (message.role === "system") {
        // Claude Code puts system messages among the others; chat completions take them anywhere.
        const inline = systemMessage(message.content, options)
        if (inline) messages.push(inline)
      } else fail("invalid_request", `unknown message role ${String(message.role)}`)
    }

    const out: JsonObject = { model: options.upstreamModel, messages }
    // Automatic caching (a marker for the whole request): OpenRouter's chat completions take it as Anthropic does.
    if (options.cacheControl === true && body.cache_control !== undefined) out.cache_control = body.cache_control
    if (body.max_tokens !== undefined) out[options.maxTokensField ?? "max_tokens"] = body.max_tokens
    if (body.temperature !== undefined) out.temperature = body.temperature
    if (body.top_p !== undefined) out.top_p = body.top_p
    if (body.top_k !== undefined && options.supportsTopK !== false) out.top_k = body.top_k
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
