/**
 * What is left of a request's limits, told in response headers as the providers do: on `/v1/messages` Anthropic's
 * names (`anthropic-ratelimit-requests-remaining`, `-input-tokens-`, `-output-tokens-`, each `-limit`, `-remaining`
 * and `-reset` as an RFC 3339 time), elsewhere OpenAI's (`x-ratelimit-remaining-requests`, `-input-tokens`,
 * `-output-tokens`, with `x-ratelimit-reset-*` as a duration such as `12s`). The budget has no provider convention:
 * `x-service-budget-limit`, `-remaining` (USD) and `-reset` (RFC 3339), on every route. Sent on answers and on the
 * gateway's own limit refusals: its 429 and 402, and the 400 of a request that can never fit a limit.
 */
import type { GatewayError } from "@model-gateway/core"
import { Limits } from "@model-gateway/core"

/** The route families (see `ErrorResponses.Family`). */
type Family = "messages" | "generic" | "openai"

type QuotaStatus = typeof GatewayError.QuotaStatus.Type
type Remaining = NonNullable<QuotaStatus["requests"]>

const iso = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z")

const NAMES = { requests: "requests", inputTokens: "input-tokens", outputTokens: "output-tokens" } as const

/** Adds the headers of `quota` to `headers` (which it returns), in the names of the route's family. */
export const add = (
  headers: Record<string, string>,
  family: Family,
  quota: QuotaStatus | undefined,
  now: number
): Record<string, string> => {
  if (quota === undefined) return headers
  const one = (metric: keyof typeof NAMES, r: Remaining | undefined) => {
    if (r === undefined) return
    const name = NAMES[metric]
    if (family === "messages") {
      headers[`anthropic-ratelimit-${name}-limit`] = String(r.limit)
      headers[`anthropic-ratelimit-${name}-remaining`] = String(r.remaining)
      headers[`anthropic-ratelimit-${name}-reset`] = iso(r.resetsAt)
    } else {
      headers[`x-ratelimit-limit-${name}`] = String(r.limit)
      headers[`x-ratelimit-remaining-${name}`] = String(r.remaining)
      headers[`x-ratelimit-reset-${name}`] = `${Math.max(0, Math.ceil((r.resetsAt - now) / 1000))}s`
    }
  }
  one("requests", quota.requests)
  one("inputTokens", quota.inputTokens)
  one("outputTokens", quota.outputTokens)
  const budget = quota.budget
  if (budget !== undefined) {
    headers["x-service-budget-limit"] = Limits.usdOf(budget.limit)
    headers["x-service-budget-remaining"] = Limits.usdOf(budget.remaining)
    headers["x-service-budget-reset"] = iso(budget.resetsAt)
  }
  return headers
}
