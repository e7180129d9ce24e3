/**
 * Pure translation of an OpenAI chat completions request (the gateway's `/v1/chat/completions` front door) into an
 * Anthropic Messages request, for an upstream that speaks the Anthropic protocol. No I/O.
 */
import { Upstream, Wire } from "@model-gateway/core"
import * as Either from "effect/Either"
import * as ChatContent from "./ChatContent.js"
import { arrayField, asNumber, asObject, asString, fail, isAbsent, isObject, unsupported } from "./ChatFields.js"
import * as ReasoningDetails from "./ReasoningDetails.js"

type JsonObject = Wire.JsonObject
type UpstreamError = Upstream.UpstreamError

/** The target upstream's model id, whether to stream, and the cap sent when the client gave none. */
export interface MessagesRequestOptions {
  readonly upstreamModel: string
  readonly stream: boolean
  /** Sent as `max_tokens` when the client gave no cap: Anthropic requires one. */
  readonly defaultMaxTokens: number
}

const attempt = <A>(f: () => A): Either.Either<A, UpstreamError> => {
  try {
    return Either.right(f())
  } catch (error) {
    if (error instanceof Upstream.UpstreamError) return Either.left(error)
    throw error
  }
}

/** A numeric field, `undefined` when absent or null; anything else than a finite number is refused. */
const numberField = (chat: JsonObject, key: string): number | undefined => {
  const value = chat[key]
  if (isAbsent(value)) return undefined
  return typeof value === "number" && Number.isFinite(value)
    ? value
    : fail("invalid_request", `${key} must be a number`)
}

const MIN_THINKING_BUDGET = 1024

/** The system instruction standing for `response_format: {type: "json_object"}`. */
export const JSON_OBJECT_INSTRUCTION =
  "Answer with a single valid JSON object and nothing else: no prose, no code fence."

// ---------------------------------------------------------------------------------------------------
// conversation

interface Turn {
  readonly role: "user" | "assistant"
  readonly content: Array<JsonObject>
}

interface Conversation {
  /** System texts in order, each a string (a message given as a string) or blocks (one given as parts). */
  readonly system: Array<string | Array<JsonObject>>
  readonly turns: Array<Turn>
}

/** Appends blocks to the conversation, into the last turn when it has the same role (Anthropic alternates roles). */
const addTurn = (turns: Array<Turn>, role: Turn["role"], blocks: ReadonlyArray<JsonObject>): void => {
  if (blocks.length === 0) return
  const last = turns.at(-1)
  if (last?.role === role) last.content.push(...blocks)
  else turns.push({ role, content: [...blocks] })
}

const conversation = (messages: unknown): Conversation => {
  const list = Array.isArray(messages) ? messages : fail("invalid_request", "messages must be an array")
  const system: Array<string | Array<JsonObject>> = []
  const turns: Array<Turn> = []
  for (const item of list) {
    const message = asObject(item) ?? fail("invalid_request", "each message must be an object")
    switch (message.role) {
      case "system":
      case "developer": {
        if (typeof message.content === "string") {
          if (message.content !== "") system.push(message.content)
        } else {
          const blocks = ChatContent.contentBlocks(String(message.role), message.content)
          if (blocks.length > 0) system.push(blocks)
        }
        break
      }
      case "user":
        // As OpenAI refuses it ("missing required parameter"), rather than dropped and then refused for what is left.
        if (isAbsent(message.content)) fail("invalid_request", "a user message must have content")
        addTurn(turns, "user", ChatContent.contentBlocks("user", message.content))
        break
      case "assistant": {
        if (!isAbsent(message.function_call)) unsupported("the legacy function_call (use tool_calls)")
        const calls = arrayField(message.tool_calls, "assistant tool_calls")
        addTurn(turns, "assistant", [
          ...ReasoningDetails.thinkingBlocks(message.reasoning_details),
          ...ChatContent.contentBlocks("assistant", message.content),
          ...calls.map(ChatContent.toolUseBlock)
        ])
        break
      }
      case "tool":
        addTurn(turns, "user", [ChatContent.toolResultBlock(message)])
        break
      case "function":
        return unsupported("a message of the legacy function role (use tool messages)")
      default:
        return fail("invalid_request", `unknown message role ${String(message.role)}`)
    }
  }
  if (turns.length === 0) fail("invalid_request", "messages must hold at least one user or assistant message")
  return { system, turns }
}

/**
 * Whether the conversation's last assistant turn used a tool without the thinking that came with it (a chat client
 * that did not hand back `reasoning_details`). With thinking on, Anthropic refuses such a turn ("Expected `thinking`
 * or `redacted_thinking`, but found `tool_use`"): thinking is left off for the request instead.
 */
const toolTurnWithoutThinking = (turns: ReadonlyArray<Turn>): boolean => {
  for (let i = turns.length - 1; i >= 0; i--) {
    const turn = turns[i]!
    if (turn.role !== "assistant") continue
    const first = turn.content[0]?.type
    return turn.content.some((block) => block.type === "tool_use") && first !== "thinking" &&
      first !== "redacted_thinking"
  }
  return false
}

/** A single plain text block is sent as a string, as most clients write it. */
const turnContent = (blocks: ReadonlyArray<JsonObject>): unknown => {
  const only = blocks.length === 1 ? blocks[0]! : undefined
  return only?.type === "text" && Object.keys(only).length === 2 ? only.text : blocks
}

const systemField = (system: ReadonlyArray<string | ReadonlyArray<JsonObject>>): unknown => {
  if (system.length === 0) return undefined
  if (system.every((entry) => typeof entry === "string")) return system.join("\n\n")
  return system.flatMap((entry) => (typeof entry === "string" ? [{ type: "text", text: entry }] : entry))
}

// ---------------------------------------------------------------------------------------------------
// tools

const toolDefinition = (item: unknown): JsonObject => {
  const tool = asObject(item) ?? fail("invalid_request", "tools entries must be objects")
  if (!isAbsent(tool.type) && tool.type !== "function") unsupported(`a tool of type ${String(tool.type)}`)
  const fn = asObject(tool.function) ?? fail("invalid_request", "function tool without a function")
  const out: JsonObject = { name: asString(fn.name) ?? fail("invalid_request", "function tool without a name") }
  if (typeof fn.description === "string") out.description = fn.description
  out.input_schema = asObject(fn.parameters) ?? { type: "object", properties: {} }
  return out
}

const toolChoice = (choice: unknown, disableParallel: boolean): JsonObject | undefined => {
  let out: JsonObject
  if (isAbsent(choice) || choice === "auto") {
    if (isAbsent(choice) && !disableParallel) return undefined
    out = { type: "auto" }
  } else if (choice === "none") {
    return { type: "none" }
  } else if (choice === "required") {
    out = { type: "any" }
  } else if (isObject(choice) && choice.type === "function") {
    const name = asString(asObject(choice.function)?.name) ?? fail("invalid_request", "tool_choice without a name")
    out = { type: "tool", name }
  } else if (isObject(choice)) {
    return unsupported(`tool_choice of type ${String(choice.type)}`)
  } else {
    return fail("invalid_request", `unknown tool_choice ${JSON.stringify(choice)}`)
  }
  if (disableParallel) out.disable_parallel_tool_use = true
  return out
}

// ---------------------------------------------------------------------------------------------------
// reasoning and output format

/**
 * The share of `max_tokens` each effort gives the thinking budget of a model that takes a budget, not an effort: as
 * OpenRouter documents it for Anthropic's models (reasoning tokens). A fixed budget per effort left a small
 * `max_tokens` all to thinking ("high" on 8,192 tokens thought for 8,191 and answered in one).
 */
const EFFORT_SHARE: Readonly<Record<string, number>> = { minimal: 0.1, low: 0.2, medium: 0.5, high: 0.8, xhigh: 0.95 }

/** The largest budget an effort makes, as OpenRouter bounds it. */
const MAX_EFFORT_BUDGET = 32_000

const effortBudget = (effort: unknown, field: string, maxTokens: number): number | undefined => {
  if (effort === "none") return undefined
  const share = typeof effort === "string" && Object.hasOwn(EFFORT_SHARE, effort) ? EFFORT_SHARE[effort] : undefined
  if (share === undefined) {
    return fail("invalid_request", `${field} must be one of none, minimal, low, medium, high, xhigh`)
  }
  return Math.max(MIN_THINKING_BUDGET, Math.min(Math.floor(maxTokens * share), MAX_EFFORT_BUDGET))
}

/** The thinking budget asked for: OpenRouter's `reasoning` object first, then `reasoning_effort`. */
const requestedBudget = (chat: JsonObject, maxTokens: number): number | undefined => {
  const reasoning = asObject(chat.reasoning)
  if (reasoning?.enabled === false) return undefined
  const max = asNumber(reasoning?.max_tokens)
  if (max !== undefined) return Math.max(max, MIN_THINKING_BUDGET)
  if (!isAbsent(reasoning?.effort)) return effortBudget(reasoning?.effort, "reasoning.effort", maxTokens)
  if (!isAbsent(chat.reasoning_effort)) return effortBudget(chat.reasoning_effort, "reasoning_effort", maxTokens)
  return reasoning?.enabled === true ? effortBudget("medium", "reasoning", maxTokens) : undefined
}

const outputFormat = (format: unknown, system: Array<string | Array<JsonObject>>): JsonObject | undefined => {
  if (isAbsent(format)) return undefined
  const spec = asObject(format) ?? fail("invalid_request", "response_format must be an object")
  switch (spec.type) {
    case "text":
      return undefined
    case "json_object":
      system.push(JSON_OBJECT_INSTRUCTION)
      return undefined
    case "json_schema": {
      const schema = asObject(asObject(spec.json_schema)?.schema) ??
        fail("invalid_request", "response_format json_schema without a schema")
      return { format: { type: "json_schema", schema } }
    }
    default:
      return unsupported(`response_format of type ${String(spec.type)}`)
  }
}

const refuseUnsupported = (chat: JsonObject): void => {
  const n = asNumber(chat.n)
  if (n !== undefined && n > 1) unsupported("n > 1 (several choices)")
  if (chat.logprobs === true) unsupported("logprobs")
  if (!isAbsent(chat.audio)) unsupported("audio output (the audio field)")
  if (Array.isArray(chat.modalities) && chat.modalities.includes("audio")) unsupported("the audio modality")
  if (!isAbsent(chat.functions)) unsupported("the legacy functions field (use tools)")
  if (!isAbsent(chat.function_call)) unsupported("the legacy function_call field (use tool_choice)")
}

/**
 * Translates an OpenAI chat completions body (gateway-only fields already stripped) into an Anthropic Messages body.
 *
 * `system` and `developer` messages, wherever they stand, go to `system`; tool messages become `tool_result` blocks
 * of a user turn, and consecutive messages of one role are merged into one turn. Thinking is enabled from
 * `reasoning_effort` (none/minimal: off, low 1024, medium 4096, high 16384, xhigh 32768 tokens) or OpenRouter's
 * `reasoning` (`max_tokens`, at least 1024, else `effort`, else medium when `enabled`), kept below `max_tokens` and
 * left off when that leaves under 1024 tokens or `tool_choice` forces a tool (Anthropic refuses both); with thinking,
 * `temperature`, `top_k` and a `top_p` under 0.95 are dropped. An assistant message's `reasoning_details` (OpenRouter's
 * form, signed, as `ChatAnswer` gives them) become its thinking blocks again; when the last assistant turn used a tool
 * without them, thinking is left off (Anthropic refuses such a turn with thinking on). Without thinking, `temperature` is capped at 1
 * (Anthropic's range) and `top_p` is dropped when `temperature` is given (recent Claude models refuse both).
 * `response_format: {type: "json_object"}` has no Anthropic equivalent: it becomes the system instruction
 * `JSON_OBJECT_INSTRUCTION`, appended last. `cache_control` on content parts is kept.
 *
 * Dropped silently (no Anthropic equivalent, and refusing them would break common clients): `seed`,
 * `frequency_penalty`, `presence_penalty`, `logit_bias`, `top_logprobs`, `service_tier`, `store`, `metadata`,
 * `prediction`, `stream_options`, `verbosity`, `web_search_options`, `prompt_cache_key`, `parallel_tool_calls: true`,
 * tools' `strict`, message `name`s, assistant `reasoning` and any other unknown field. Refused as `unsupported`:
 * `n` > 1, `logprobs: true`, `audio`, the audio modality, audio input, uploaded `file_id`s, files other than PDF,
 * non-function tools and the legacy `functions` / `function_call` / `function` role.
 */
export const toMessagesRequest = (
  chat: JsonObject,
  options: MessagesRequestOptions
): Either.Either<JsonObject, UpstreamError> =>
  attempt(() => {
    refuseUnsupported(chat)
    const { system, turns } = conversation(chat.messages)
    const maxTokens = numberField(chat, "max_completion_tokens") ?? numberField(chat, "max_tokens") ??
      options.defaultMaxTokens
    const out: JsonObject = { model: options.upstreamModel }
    const outputConfig = outputFormat(chat.response_format, system)
    const systemValue = systemField(system)
    if (systemValue !== undefined) out.system = systemValue
    out.messages = turns.map((turn) => ({ role: turn.role, content: turnContent(turn.content) }))
    out.max_tokens = maxTokens

    const tools = arrayField(chat.tools, "tools")
    const choice = tools.length > 0 ? toolChoice(chat.tool_choice, chat.parallel_tool_calls === false) : undefined
    if (tools.length > 0) out.tools = tools.map(toolDefinition)
    if (choice) out.tool_choice = choice

    const requested = requestedBudget(chat, maxTokens)
    const budget = requested === undefined ? undefined : Math.min(requested, maxTokens - 1)
    const forced = choice?.type === "any" || choice?.type === "tool"
    const thinking = budget !== undefined && budget >= MIN_THINKING_BUDGET && !forced && !toolTurnWithoutThinking(turns)
    if (thinking) out.thinking = { type: "enabled", budget_tokens: budget }

    const temperature = numberField(chat, "temperature")
    const topP = numberField(chat, "top_p")
    const topK = numberField(chat, "top_k")
    if (thinking) {
      if (topP !== undefined && topP >= 0.95) out.top_p = topP
    } else {
      if (temperature !== undefined) out.temperature = Math.min(temperature, 1)
      if (topP !== undefined && temperature === undefined) out.top_p = topP
      if (topK !== undefined) out.top_k = topK
    }

    const stop = typeof chat.stop === "string" ? [chat.stop] : arrayField(chat.stop, "stop")
    const sequences = stop.filter((s) =>
      typeof s === "string" ? s !== "" : fail("invalid_request", "stop must be a string or an array of strings")
    )
    if (sequences.length > 0) out.stop_sequences = sequences

    const user = asString(chat.user) ?? asString(chat.safety_identifier)
    if (user !== undefined && user !== "") out.metadata = { user_id: user }
    if (outputConfig) out.output_config = outputConfig
    out.stream = options.stream
    return out
  })
