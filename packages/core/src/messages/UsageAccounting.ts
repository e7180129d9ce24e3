/**
 * How a messages answer's usage is billed and told: Anthropic-convention usage as billed, and the complete usage
 * object of a result (spec 2.2). The charge and the usage record are the executor's (`execution/Charging.ts`),
 * re-exported here.
 */
import type { Charge } from "../execution/Charging.js"
import * as UntoldUsage from "../execution/UntoldUsage.js"
import type * as Cost from "../pricing/Cost.js"
import type { JsonObject, Usage } from "./Wire.js"

export * from "../execution/Charging.js"

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0)

/** Usage as billed, from Anthropic-convention usage (input excludes cache reads and writes). */
export const billed = (usage: Usage | JsonObject | undefined): Cost.BilledUsage => ({
  input: num(usage?.input_tokens),
  output: num(usage?.output_tokens),
  cacheRead: num(usage?.cache_read_input_tokens),
  cacheWrite: num(usage?.cache_creation_input_tokens)
})

/**
 * The usage shown to the client: with `extra` (fusion), the token counts summed with the analyses'; when the upstream
 * told none, the counts billed (estimated: see `UntoldUsage`).
 */
export const shownUsage = (
  usage: Usage | JsonObject | undefined,
  sum: Cost.BilledUsage,
  extra: Charge | undefined
): Usage | JsonObject | undefined =>
  extra === undefined && UntoldUsage.isTold(billed(usage)) ? usage : Object.assign({}, usage, {
    input_tokens: sum.input,
    output_tokens: sum.output,
    cache_read_input_tokens: sum.cacheRead,
    cache_creation_input_tokens: sum.cacheWrite
  })

/** The usage object of a result: every field of spec 2.2 present, with its cost. */
export const completeUsage = (usage: Usage | JsonObject | undefined, cost: string): JsonObject =>
  // Object.assign rather than a spread: adding keys to a spread copy is slow on V8 (see docs/benchmarks.md)
  Object.assign({}, usage, {
    input_tokens: num(usage?.input_tokens),
    output_tokens: num(usage?.output_tokens),
    cache_creation_input_tokens: num(usage?.cache_creation_input_tokens),
    cache_read_input_tokens: num(usage?.cache_read_input_tokens),
    cache_creation: usage?.cache_creation ?? null,
    inference_geo: usage?.inference_geo ?? null,
    output_tokens_details: usage?.output_tokens_details ?? null,
    server_tool_use: usage?.server_tool_use ?? null,
    service_tier: usage?.service_tier ?? null,
    speed: usage?.speed ?? null,
    cost: Number(cost),
    cost_details: usage?.cost_details ?? null,
    is_byok: false,
    iterations: Array.isArray(usage?.iterations) ? usage.iterations : []
  })
