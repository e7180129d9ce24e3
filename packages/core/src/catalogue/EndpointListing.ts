/**
 * The catalogue's endpoints as the records clients read: `GET /endpoints/zdr` (every zero-data-retention endpoint)
 * and `GET /models/{author}/{slug}/endpoints` (one model's), in OpenRouter's shape as `@openrouter/sdk` validates it:
 * every key present, the nullable ones as `null`, with the live figures of the health snapshot (latency and
 * throughput percentiles over 30 minutes, uptime over 5 minutes, 30 minutes and a day; `null` until there is data).
 * Pure functions over a catalogue snapshot and a health snapshot.
 *
 * `status` says how routing sees the endpoint now: 0 serving normally (or no data yet); -1 degraded (under 95% of
 * attempts succeeded over the last 30 minutes); -2 a recent outage (significant failures in the last 30 seconds:
 * routing tries it after the healthy ones); -3 cooling down after repeated failures or an upstream `Retry-After`
 * (only a half-open probe reaches it until it recovers).
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { NotFound } from "../errors/GatewayError.js"
import type { EndpointHealth, HealthSnapshot } from "../health/EndpointStats.js"
import type { JsonObject } from "../messages/Wire.js"
import { Quantization } from "../routing/ProviderPreferences.js"
import type { CatalogueSnapshot, Endpoint, Model } from "./Catalogue.js"
import { modelObject } from "./ModelListing.js"

/** Below this uptime (percent, last 30 minutes) an endpoint is shown as degraded. */
export const DEGRADED_UPTIME = 95

/** The `status` integer of an endpoint's health (see the module). */
export const statusOf = (health: EndpointHealth | undefined): number => {
  if (health === undefined) return 0
  if (health.coolingDownUntil !== null || health.halfOpen) return -3
  if (health.recentOutage) return -2
  if (health.uptime30m !== null && health.uptime30m < DEGRADED_UPTIME) return -1
  return 0
}

const isQuantization = Schema.is(Quantization)

/** The endpoint's quantization as clients know them (OpenRouter's list); another configured value is `unknown`. */
const quantizationOf = (endpoint: Endpoint): string | null => {
  const q = endpoint.quantization?.toLowerCase()
  return q === undefined ? null : isQuantization(q) ? q : "unknown"
}

/** What `tool_choice` values the endpoint honours: `auto` with tools, the others with `tool_choice` too. */
const toolChoiceOf = (parameters: ReadonlyArray<string>) => {
  const tools = parameters.includes("tools")
  const choice = tools && parameters.includes("tool_choice")
  return { auto: tools, function: choice, none: choice, required: choice }
}

const pricingOf = (endpoint: Endpoint): JsonObject => {
  const pricing: JsonObject = {
    prompt: endpoint.pricing.prompt,
    completion: endpoint.pricing.completion,
    image: endpoint.pricing.image,
    request: endpoint.pricing.request
  }
  if (endpoint.pricing.inputCacheRead !== undefined) pricing.input_cache_read = endpoint.pricing.inputCacheRead
  if (endpoint.pricing.inputCacheWrite !== undefined) pricing.input_cache_write = endpoint.pricing.inputCacheWrite
  return pricing
}

/**
 * One endpoint's record (spec 2.4). `context_length` is 0 when the catalogue does not say; `max_prompt_tokens` is
 * null (the catalogue keeps no separate prompt limit); `supports_implicit_caching` is false (the catalogue does not
 * record it).
 */
export const endpointRecord = (model: Model, endpoint: Endpoint, health: EndpointHealth | undefined): JsonObject => {
  const parameters = endpoint.supportedParameters ?? []
  const quantization = quantizationOf(endpoint)
  return {
    name: `${endpoint.provider} | ${endpoint.upstreamModel}`,
    model_id: model.id,
    model_name: model.name,
    provider_name: endpoint.provider,
    tag: quantization === null ? endpoint.provider : `${endpoint.provider}/${quantization}`,
    context_length: endpoint.contextLength ?? 0,
    max_completion_tokens: endpoint.maxCompletionTokens ?? null,
    max_prompt_tokens: null,
    pricing: pricingOf(endpoint),
    quantization,
    status: statusOf(health),
    supported_parameters: [...parameters],
    supports_tool_choice: toolChoiceOf(parameters),
    supports_implicit_caching: false,
    supports_image_reference: endpoint.supportsImageReference,
    supports_multiple_audio_references: endpoint.supportsMultipleAudioReferences,
    supports_voice_cloning: endpoint.supportsVoiceCloning,
    latency_last_30m: health?.latency30m ?? null,
    throughput_last_30m: health?.throughput30m ?? null,
    uptime_last_5m: health?.uptime5m ?? null,
    uptime_last_30m: health?.uptime30m ?? null,
    uptime_last_1d: health?.uptime1d ?? null
  }
}

/** `GET /endpoints/zdr`: every zero-data-retention endpoint, in catalogue order. */
export const zdr = (snapshot: CatalogueSnapshot, health: HealthSnapshot): JsonObject => {
  const data: Array<JsonObject> = []
  for (const model of snapshot.models.values()) {
    for (const endpoint of model.endpoints) {
      if (endpoint.zdr) data.push(endpointRecord(model, endpoint, health.get(endpoint.id)))
    }
  }
  return { data }
}

/** `GET /models/{author}/{slug}/endpoints`: one model and its endpoints, or `NotFound`. */
export const modelEndpoints = (
  snapshot: CatalogueSnapshot,
  health: HealthSnapshot,
  id: string,
  basePath: string
): Either.Either<JsonObject, NotFound> => {
  const model = snapshot.models.get(id)
  if (model === undefined) {
    return Either.left(new NotFound({ message: `Model '${id}' is not available on this gateway` }))
  }
  const listed = modelObject(model, basePath)
  return Either.right({
    data: {
      id: model.id,
      name: model.name,
      created: listed.created,
      description: listed.description,
      architecture: listed.architecture,
      endpoints: model.endpoints.map((endpoint) => endpointRecord(model, endpoint, health.get(endpoint.id)))
    }
  })
}
