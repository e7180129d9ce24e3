/**
 * Pure translation of a non-streamed chat completion into an Anthropic message (`fromChatCompletion`), with what the
 * stream translation shares: usage (`usageFromOpenAi`, cached prompt tokens never counted twice), the stop reason of
 * a `finish_reason`, and the reasoning text of a message or delta. No I/O.
 */
import type { Upstream, Wire } from "@model-gateway/core"
import type * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"
import * as Nesting from "../internal/Nesting.js"
import { classifyInBandError } from "./OpenAiErrors.js"
import { asArray, asNumber, asObject, asString, attempt, fail, randomId } from "./Translation.js"

type JsonObject = Wire.JsonObject
type UpstreamError = Upstream.UpstreamError

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

export const stopReason = (finishReason: string, sawToolCalls: boolean): string => {
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
export const reasoningOf = (o: JsonObject): string | undefined => asString(o.reasoning_content) ?? asString(o.reasoning)

/**
 * Parses tool-call arguments. Empty arguments become `{}`; arguments that are not a JSON object, or that nest deeper
 * than the gateway takes from an upstream (`Nesting`), are kept verbatim as `{"_raw": "..."}` so the client sees what
 * the model produced instead of losing it.
 */
const parseArguments = (raw: unknown): JsonObject => {
  if (Predicate.isRecord(raw)) return raw
  const text = asString(raw) ?? ""
  if (text.trim() === "") return {}
  if (Nesting.tooDeep(text)) return { _raw: text }
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
