/**
 * The output cap (`max_tokens`) of a Messages body: the cap a request that sets none is given where its upstream
 * requires one (Anthropic's API refuses a request without it), and a body given a cap with its thinking budget kept
 * below it, as Anthropic requires.
 */
import type { Endpoint } from "../catalogue/Catalogue.js"
import type { JsonObject } from "./Wire.js"
import { withField } from "./Wire.js"

/** The output cap of a request that sets none, at an endpoint whose own limit is not known. */
export const DEFAULT_MAX_TOKENS = 4096

/** The smallest thinking budget Anthropic accepts. */
export const MIN_THINKING_BUDGET = 1024

/**
 * The output cap a request that sets none is sent with: as much as the endpoint allows (no cap means "as long as the
 * model may answer", as on OpenAI's API), or `DEFAULT_MAX_TOKENS` where its limit is not known. The limits reserve
 * less for such a request (at most 4,096 tokens, `Quotas`) and settle on what it used.
 */
export const defaultFor = (endpoint: Endpoint): number => endpoint.maxCompletionTokens ?? DEFAULT_MAX_TOKENS

/**
 * The body with `max_tokens` set to `maxTokens` (a clamp, or the default), and a thinking budget kept below it, as
 * Anthropic requires. A budget that no longer fits keeps its share of the cap the client asked for (16,000 of 32,000
 * lowered to 8,192: 4,096), so that the answer keeps its share too, rather than all but one token going to thinking;
 * thinking is turned off when less than its minimum budget would remain. Derived with `Wire.withField`, so the
 * client's bytes are still spliced in.
 */
export const withMaxTokens = (body: JsonObject, maxTokens: number): JsonObject => {
  const out = withField(body, "max_tokens", maxTokens)
  const thinking = body.thinking as JsonObject | null | undefined
  const budget = thinking?.budget_tokens
  if (thinking?.type !== "enabled" || typeof budget !== "number" || budget < maxTokens) return out
  if (maxTokens - 1 < MIN_THINKING_BUDGET) return withField(out, "thinking", { type: "disabled" })
  const asked = typeof body.max_tokens === "number" && body.max_tokens > budget ? body.max_tokens : budget + 1
  const kept = Math.min(maxTokens - 1, Math.max(MIN_THINKING_BUDGET, Math.floor(budget * maxTokens / asked)))
  return withField(out, "thinking", { ...thinking, budget_tokens: kept })
}

/** The body as is when it sets `max_tokens`; otherwise with the endpoint's default cap (`defaultFor`). */
export const withDefault = (body: JsonObject, endpoint: Endpoint): JsonObject =>
  body.max_tokens === undefined ? withMaxTokens(body, defaultFor(endpoint)) : body
