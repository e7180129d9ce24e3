/**
 * OpenAI-convention usage as billed. OpenAI's `prompt_tokens` (and the Responses API's `input_tokens`) include the
 * cached prompt tokens (`prompt_tokens_details.cached_tokens`, DeepSeek's `prompt_cache_hit_tokens`) and cache writes
 * where a provider reports them (`cache_write_tokens`); they are billed at their own prices and never twice.
 */
import * as Predicate from "effect/Predicate"
import type { JsonObject } from "../messages/Wire.js"
import type * as Cost from "../pricing/Cost.js"

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0)

const details = (usage: JsonObject, key: string): JsonObject =>
  Predicate.isRecord(usage[key]) ? usage[key] as JsonObject : {}

/** Usage as billed from a chat completion's or an embedding's `usage`. */
export const chat = (usage: JsonObject | undefined): Cost.BilledUsage => {
  if (usage === undefined) return { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }
  const prompt = details(usage, "prompt_tokens_details")
  const cacheRead = num(prompt.cached_tokens) || num(usage.prompt_cache_hit_tokens)
  const cacheWrite = num(prompt.cache_write_tokens)
  return {
    input: Math.max(0, num(usage.prompt_tokens) - cacheRead - cacheWrite),
    output: num(usage.completion_tokens),
    cacheRead,
    cacheWrite
  }
}

/** Usage as billed from a Responses API `usage`. */
export const responses = (usage: JsonObject | undefined): Cost.BilledUsage => {
  if (usage === undefined) return { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }
  const cacheRead = num(details(usage, "input_tokens_details").cached_tokens)
  return {
    input: Math.max(0, num(usage.input_tokens) - cacheRead),
    output: num(usage.output_tokens),
    cacheRead,
    cacheWrite: 0
  }
}
