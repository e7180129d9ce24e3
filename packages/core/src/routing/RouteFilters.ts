/**
 * The filters of route planning (`excludedBy`): the capability filters, always (the API, tools, images, documents,
 * `max_tokens` over `maxCompletionTokens`, estimated prompt plus `max_tokens` over `contextLength`), then the provider
 * preferences (`only`, `ignore`, `order` when `allow_fallbacks` is false, `require_parameters`, `data_collection`,
 * `zdr`, `enforce_distillable_text`, `quantizations` and `max_price`). With `clampFor`, the `max_tokens` an endpoint
 * that cannot honour the request's would take instead, the parameters a body uses (`usedParameters`, read by
 * `require_parameters`), and the endpoint prices the planner compares.
 */
import type { Endpoint } from "../catalogue/Catalogue.js"
import type { ProviderPreferences } from "./ProviderPreferences.js"
import { resolve, type Resolved } from "./ResolvedPreferences.js"
import type { Requirements } from "./RouteTypes.js"

/** Why a filter removes an endpoint: the filter (`tools`, `context_length`, `provider.zdr`, ...) and the reason. */
export interface Exclusion {
  readonly filter: string
  readonly reason: string
}

/** USD per million tokens, to six decimals (which also hides the binary rounding of per-token prices). */
export const perMillion = (perToken: number): string => `$${Math.round(perToken * 1e12) / 1e6}/M`

/** USD per token as a number; a price that is not a finite non-negative number counts as infinitely expensive. */
const priceOf = (decimal: string): number => {
  const n = Number(decimal)
  return decimal.trim() !== "" && Number.isFinite(n) && n >= 0 ? n : Infinity
}

const prices = new WeakMap<Endpoint, number>()

/** USD per token, prompt + completion; catalogue snapshots are immutable, so it is computed once per endpoint. */
export const promptAndCompletion = (endpoint: Endpoint): number => {
  let price = prices.get(endpoint)
  if (price === undefined) {
    price = priceOf(endpoint.pricing.prompt) + priceOf(endpoint.pricing.completion)
    prices.set(endpoint, price)
  }
  return price
}

/** Above a ceiling, allowing for the binary rounding of per-token prices scaled to per-million. */
const above = (value: number, ceiling: number) => value > ceiling * (1 + 1e-9)

export const capability = (
  endpoint: Endpoint,
  needs: Requirements,
  maxTokens = needs.maxTokens
): Exclusion | undefined => {
  if (needs.api !== undefined && endpoint.apis !== undefined && !endpoint.apis.includes(needs.api)) {
    return { filter: "api", reason: `does not serve the ${needs.api} API` }
  }
  const params = endpoint.supportedParameters
  if (needs.tools && params !== undefined && !params.includes("tools")) {
    return { filter: "tools", reason: "does not support tools" }
  }
  const modalities = endpoint.inputModalities
  if (needs.images && modalities !== undefined && !modalities.includes("image")) {
    return { filter: "images", reason: "does not accept images" }
  }
  if (needs.documents && modalities !== undefined && !modalities.includes("file")) {
    return { filter: "documents", reason: "does not accept documents" }
  }
  if (
    maxTokens !== undefined && endpoint.maxCompletionTokens !== undefined && maxTokens > endpoint.maxCompletionTokens
  ) {
    return {
      filter: "max_tokens",
      reason: `max_tokens ${maxTokens} exceeds its limit of ${endpoint.maxCompletionTokens}`
    }
  }
  const prompt = needs.estimatedPromptTokens
  const context = endpoint.contextLength
  if (context !== undefined && (prompt !== undefined || maxTokens !== undefined)) {
    const total = (prompt ?? 0) + (maxTokens ?? 0)
    if (total > context) {
      const what = prompt === undefined ?
        `max_tokens ${maxTokens}` :
        maxTokens === undefined ?
        `an estimated prompt of ${prompt} tokens` :
        `an estimated prompt of ${prompt} tokens plus max_tokens ${maxTokens}`
      return { filter: "context_length", reason: `${what} exceeds its context length of ${context}` }
    }
  }
  return undefined
}

/**
 * The `max_tokens` an endpoint that cannot honour the request's would be sent instead (its own limit), when with it
 * the endpoint passes every capability filter; undefined otherwise.
 */
export const clampFor = (endpoint: Endpoint, needs: Requirements): number | undefined => {
  const limit = endpoint.maxCompletionTokens
  if (needs.maxTokens === undefined || limit === undefined || needs.maxTokens <= limit) return undefined
  return capability(endpoint, needs, limit) === undefined ? limit : undefined
}

export const preference = (endpoint: Endpoint, needs: Requirements, p: Resolved): Exclusion | undefined => {
  const provider = endpoint.provider.toLowerCase()
  if (p.only !== undefined && !p.only.has(provider)) {
    return { filter: "provider.only", reason: `${endpoint.provider} is not in provider.only` }
  }
  if (p.ignore.has(provider)) return { filter: "provider.ignore", reason: `${endpoint.provider} is in provider.ignore` }
  if (p.order !== undefined && !p.allowFallbacks && !p.order.includes(provider)) {
    return {
      filter: "provider.order",
      reason: `${endpoint.provider} is not in provider.order and allow_fallbacks is false`
    }
  }
  const used = needs.parameters ?? []
  if (p.requireParameters && used.length > 0) {
    const supported = endpoint.supportedParameters
    if (supported === undefined) {
      return { filter: "provider.require_parameters", reason: "does not list its supported parameters" }
    }
    const missing = used.filter((name) => !supported.includes(name))
    if (missing.length > 0) {
      return { filter: "provider.require_parameters", reason: `does not support ${missing.join(", ")}` }
    }
  }
  if (p.denyDataCollection && endpoint.dataCollection !== "deny") {
    return { filter: "provider.data_collection", reason: "its data policy allows data collection" }
  }
  if (p.zdr && !endpoint.zdr) return { filter: "provider.zdr", reason: "is not a zero-data-retention endpoint" }
  if (p.enforceDistillableText && endpoint.distillable !== true) {
    return { filter: "provider.enforce_distillable_text", reason: "the model is not marked distillable" }
  }
  if (p.quantizations !== undefined) {
    const quantization = endpoint.quantization?.toLowerCase() ?? "unknown"
    if (!p.quantizations.has(quantization)) {
      return { filter: "provider.quantizations", reason: `its quantization ${quantization} is not allowed` }
    }
  }
  const { completion, image, prompt, request } = p.maxPrice
  const pricing = endpoint.pricing
  for (const [key, ceiling] of [["prompt", prompt], ["completion", completion]] as const) {
    const perToken = priceOf(pricing[key])
    if (ceiling !== undefined && above(perToken * 1e6, ceiling)) {
      return {
        filter: "provider.max_price",
        reason: `its ${key} price ${perMillion(perToken)} exceeds max_price.${key} $${ceiling}/M`
      }
    }
  }
  for (const [key, ceiling] of [["request", request], ["image", image]] as const) {
    const unit = priceOf(pricing[key])
    if (ceiling !== undefined && above(unit, ceiling)) {
      return { filter: "provider.max_price", reason: `its ${key} price $${unit} exceeds max_price.${key} $${ceiling}` }
    }
  }
  return undefined
}

/**
 * The filter that removes an endpoint for a request, or undefined when the endpoint can serve it: the capability
 * filters first, then the provider preferences (the effective ones).
 */
export const excludedBy = (
  endpoint: Endpoint,
  needs: Requirements,
  preferences?: ProviderPreferences | null | undefined
): Exclusion | undefined => capability(endpoint, needs) ?? preference(endpoint, needs, resolve(preferences))

/** Why an endpoint cannot serve the request, or undefined when it can (the reason of `excludedBy`). */
export const exclusion = (
  endpoint: Endpoint,
  needs: Requirements,
  preferences?: ProviderPreferences | null | undefined
): string | undefined => excludedBy(endpoint, needs, preferences)?.reason

/**
 * The parameters a messages body uses, by the names catalogues list in `supportedParameters`: `tools`,
 * `tool_choice`, `temperature`, `top_p`, `top_k`, `stop` (stop_sequences), `max_tokens`, `response_format`
 * (output_config.format) and `reasoning` (thinking, unless disabled).
 */
export const usedParameters = (body: { readonly [key: string]: unknown }): ReadonlyArray<string> => {
  const used: Array<string> = []
  const present = (key: string) => body[key] !== undefined && body[key] !== null
  if (Array.isArray(body.tools) && body.tools.length > 0) used.push("tools")
  if (present("tool_choice")) used.push("tool_choice")
  for (const key of ["temperature", "top_p", "top_k"]) if (present(key)) used.push(key)
  if (present("stop_sequences")) used.push("stop")
  if (present("max_tokens")) used.push("max_tokens")
  const output = body.output_config as { readonly format?: unknown } | null | undefined
  if (output?.format != null) used.push("response_format")
  const thinking = body.thinking as { readonly type?: unknown } | null | undefined
  if (thinking != null && thinking.type !== "disabled") used.push("reasoning")
  return used
}
