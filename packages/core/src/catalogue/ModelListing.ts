/**
 * The catalogue as the model objects clients list: one object that satisfies the Anthropic SDK's `models.list()` /
 * `models.retrieve()` (`type`, `id`, `display_name`, `created_at`, paged by `after_id` / `before_id` / `limit` with
 * `first_id`, `last_id`, `has_more`), OpenRouter's model shape as `@openrouter/sdk` validates it (`name`, `created`,
 * `context_length`, `pricing` as decimal strings, `architecture`, `top_provider`, `supported_parameters`, ...) and the
 * `openai` SDK's (`object`, `created`, `owned_by`). Pure functions over a catalogue snapshot.
 */
import * as Either from "effect/Either"
import { InvalidRequest, NotFound } from "../errors/GatewayError.js"
import type { CatalogueSnapshot, Endpoint, Model } from "./Catalogue.js"

type JsonObject = { [key: string]: unknown }

const priceOf = (e: Endpoint) => Number(e.pricing.prompt) + Number(e.pricing.completion)

/** The endpoint a model is shown by: its cheapest (the default route's favourite). */
const topEndpoint = (model: Model): Endpoint | undefined =>
  model.endpoints.reduce<Endpoint | undefined>(
    (best, e) => best === undefined || priceOf(e) < priceOf(best) ? e : best,
    undefined
  )

const union = (lists: ReadonlyArray<ReadonlyArray<string> | undefined>, fallback: ReadonlyArray<string>) => {
  const all = new Set<string>()
  for (const list of lists) for (const item of list ?? []) all.add(item)
  return all.size === 0 ? [...fallback] : [...all]
}

const maxOf = (values: ReadonlyArray<number | undefined>): number | null => {
  const known = values.filter((v): v is number => v !== undefined)
  return known.length === 0 ? null : Math.max(...known)
}

/** The model object of one catalogue model; `basePath` (e.g. `/v1`) makes its `links`. */
export const modelObject = (model: Model, basePath: string): JsonObject => {
  const top = topEndpoint(model)
  const inputs = union(model.endpoints.map((e) => e.inputModalities), ["text"])
  const outputs = model.outputModalities === undefined || model.outputModalities.length === 0
    ? ["text"]
    : [...model.outputModalities]
  const created = model.created ?? 0
  const pricing: JsonObject = top === undefined ? { prompt: "0", completion: "0" } : {
    prompt: top.pricing.prompt,
    completion: top.pricing.completion,
    request: top.pricing.request,
    image: top.pricing.image
  }
  if (top?.pricing.inputCacheRead !== undefined) pricing.input_cache_read = top.pricing.inputCacheRead
  if (top?.pricing.inputCacheWrite !== undefined) pricing.input_cache_write = top.pricing.inputCacheWrite
  return {
    id: model.id,
    type: "model",
    object: "model",
    display_name: model.name,
    name: model.name,
    created_at: new Date(created * 1000).toISOString(),
    created,
    owned_by: model.id.includes("/") ? model.id.slice(0, model.id.indexOf("/")) : "model-gateway",
    canonical_slug: model.id,
    description: model.description ??
      `${model.name}, served by ${[...new Set(model.endpoints.map((e) => e.provider))].join(", ") || "no provider"}`,
    context_length: maxOf(model.endpoints.map((e) => e.contextLength)),
    architecture: {
      modality: `${inputs.join("+")}->${outputs.join("+")}`,
      input_modalities: inputs,
      output_modalities: outputs,
      tokenizer: "Other",
      instruct_type: null
    },
    pricing,
    top_provider: {
      context_length: top?.contextLength ?? null,
      max_completion_tokens: top?.maxCompletionTokens ?? null,
      is_moderated: false
    },
    per_request_limits: null,
    supported_parameters: union(model.endpoints.map((e) => e.supportedParameters), []),
    default_parameters: null,
    supported_voices: model.voices === undefined ? null : [...model.voices],
    links: { details: `${basePath}/models/${model.id}/endpoints` }
  }
}

/** The list query: Anthropic's paging (`after_id`, `before_id`, `limit`) or OpenRouter's (`offset`, `limit`). */
export interface ListQuery {
  readonly limit?: string | undefined
  readonly after_id?: string | undefined
  readonly before_id?: string | undefined
  readonly offset?: string | undefined
}

const LIMIT_MAX = 1000

/** A page of model objects in catalogue order; without `limit`, every model. */
export const list = (
  snapshot: CatalogueSnapshot,
  query: ListQuery,
  basePath: string
): Either.Either<JsonObject, InvalidRequest> => {
  const models = [...snapshot.models.values()]
  let limit = models.length
  if (query.limit !== undefined) {
    const n = Number(query.limit)
    if (!Number.isInteger(n) || n < 1 || n > LIMIT_MAX) {
      return Either.left(
        new InvalidRequest({ message: `limit: must be an integer from 1 to ${LIMIT_MAX}`, param: "limit" })
      )
    }
    limit = n
  }
  if (query.after_id !== undefined && query.before_id !== undefined) {
    return Either.left(new InvalidRequest({ message: "after_id and before_id cannot be combined" }))
  }
  const position = (param: "after_id" | "before_id", id: string): Either.Either<number, InvalidRequest> => {
    const i = models.findIndex((m) => m.id === id)
    return i < 0
      ? Either.left(new InvalidRequest({ message: `${param}: no model with id '${id}'`, param }))
      : Either.right(i)
  }
  let start = 0
  if (query.offset !== undefined) {
    const n = Number(query.offset)
    if (!Number.isInteger(n) || n < 0) {
      return Either.left(new InvalidRequest({ message: "offset: must be a non-negative integer", param: "offset" }))
    }
    start = Math.min(n, models.length)
  }
  let end = models.length
  if (query.after_id !== undefined) {
    const i = position("after_id", query.after_id)
    if (Either.isLeft(i)) return Either.left(i.left)
    start = i.right + 1
    end = Math.min(models.length, start + limit)
  } else if (query.before_id !== undefined) {
    const i = position("before_id", query.before_id)
    if (Either.isLeft(i)) return Either.left(i.left)
    end = i.right
    start = Math.max(0, end - limit)
  } else {
    end = Math.min(models.length, start + limit)
  }
  const data = models.slice(start, end).map((m) => modelObject(m, basePath))
  const hasMore = query.before_id !== undefined ? start > 0 : end < models.length
  return Either.right({
    object: "list",
    data,
    first_id: data.length === 0 ? null : data[0].id,
    last_id: data.length === 0 ? null : data[data.length - 1].id,
    has_more: hasMore,
    total_count: models.length,
    links: { next: null }
  })
}

/** One model's object, or `NotFound`. */
export const get = (snapshot: CatalogueSnapshot, id: string, basePath: string): Either.Either<JsonObject, NotFound> => {
  const model = snapshot.models.get(id)
  return model === undefined
    ? Either.left(new NotFound({ message: `Model '${id}' is not available on this gateway` }))
    : Either.right(modelObject(model, basePath))
}
