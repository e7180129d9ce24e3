/**
 * The catalogue port: models and the provider endpoints that serve them. Loaded from configuration
 * by a composition root; the core reads an immutable snapshot per request.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"

/** USD prices as decimal strings: per token for prompt/completion, per request, per image. */
export interface Pricing {
  readonly prompt: string
  readonly completion: string
  readonly request: string
  readonly image: string
  /** Per cached prompt token read; defaults to `prompt` when absent. */
  readonly inputCacheRead?: string | undefined
  /** Per prompt token written to the cache; defaults to `prompt` when absent. */
  readonly inputCacheWrite?: string | undefined
}

/** One way of serving a model: a provider and the model id that provider knows. */
export interface Endpoint {
  /** Stable id: `${modelId}@${provider}` (plus `#n` when a model lists one provider twice). */
  readonly id: string
  readonly modelId: string
  readonly provider: string
  readonly upstreamModel: string
  readonly pricing: Pricing
  readonly contextLength?: number | undefined
  readonly maxCompletionTokens?: number | undefined
  /**
   * The request field an OpenAI-compatible endpoint takes for the output cap: `max_tokens` or `max_completion_tokens`
   * (OpenAI's reasoning models refuse `max_tokens`). Unset: the provider's default.
   */
  readonly maxTokensField?: "max_tokens" | "max_completion_tokens" | undefined
  readonly quantization?: string | undefined
  readonly supportedParameters?: ReadonlyArray<string> | undefined
  readonly inputModalities?: ReadonlyArray<string> | undefined
  readonly zdr: boolean
  readonly dataCollection: "allow" | "deny"
  /**
   * Whether its model's author allows distillation of the model's outputs (`provider.enforce_distillable_text` keeps
   * only such endpoints). A model's property, carried on each of its endpoints so that the filters read endpoints
   * alone; the configuration sets it per model. Unset: not distillable.
   */
  readonly distillable?: boolean | undefined
  readonly supportsVoiceCloning: boolean
  readonly supportsMultipleAudioReferences: boolean
  readonly supportsImageReference: boolean
  /**
   * The APIs it serves (`messages`, `chat`, `embeddings`, `responses`, ...): the route planner leaves it out of the
   * plans of the others. Unset, it serves whatever API a request for its model is sent to (its provider's adapter
   * refuses what it cannot do, and the next endpoint is tried). The gateway's configuration sets it for the endpoints
   * of a provider whose adapter is limited (an Anthropic-protocol one: messages and chat).
   */
  readonly apis?: ReadonlyArray<string> | undefined
}

/** Task kinds the auto-router classifies a conversation into. */
export type Task = "code" | "math" | "writing" | "analysis" | "chat"

/**
 * What to do with a request whose `max_tokens` none of a model's endpoints can honour: send it to them with their own
 * `maxCompletionTokens` (`clamp`, the default) or refuse it (`strict`).
 */
export type MaxTokensPolicy = "clamp" | "strict"

export interface Model {
  readonly id: string
  readonly name: string
  readonly endpoints: ReadonlyArray<Endpoint>
  /** Default `clamp`. */
  readonly maxTokensPolicy?: MaxTokensPolicy | undefined
  /** When the gateway started offering it, in unix seconds (the model list's `created`). */
  readonly created?: number | undefined
  readonly description?: string | undefined
  /** What it outputs: `text` by default; `audio` for a speech model. */
  readonly outputModalities?: ReadonlyArray<string> | undefined
  /** A speech model's voices. */
  readonly voices?: ReadonlyArray<string> | undefined
  /** Quality per task, 0..1, from configuration; the auto-router ranks models with it. */
  readonly scores?: Partial<Record<Task, number>> | undefined
}

/** Whether a model answers in text (its `outputModalities` name `text`, or none are given): not a speech-only model. */
export const outputsText = (model: Model): boolean =>
  model.outputModalities === undefined || model.outputModalities.length === 0 || model.outputModalities.includes("text")

/**
 * Whether a model can answer `POST /v1/embeddings`: its `outputModalities` name `embeddings` (OpenRouter's name for
 * an embeddings model's output) or `text`, or none are given (the default, `text`, which configurations that predate
 * the key give their embeddings models). Not a speech-only model, nor one that outputs only images.
 */
export const outputsEmbeddings = (model: Model): boolean =>
  outputsText(model) || (model.outputModalities?.includes("embeddings") ?? false)

/** An immutable view of the catalogue; requests read one snapshot from start to end. */
export interface CatalogueSnapshot {
  readonly models: ReadonlyMap<string, Model>
}

export interface CatalogueService {
  readonly snapshot: Effect.Effect<CatalogueSnapshot>
}

/** Port: the model catalogue. */
export class Catalogue extends Context.Tag("@model-gateway/core/Catalogue")<Catalogue, CatalogueService>() {}

/** Builds a snapshot from a list of models. */
export const makeSnapshot = (models: Iterable<Model>): CatalogueSnapshot => ({
  models: new Map(Array.from(models, (m) => [m.id, m] as const))
})

/** A catalogue that always answers the same snapshot. */
export const fromSnapshot = (snapshot: CatalogueSnapshot): CatalogueService => ({
  snapshot: Effect.succeed(snapshot)
})

/** A catalogue whose snapshot can be replaced while it serves (a configuration reload). */
export interface Replaceable {
  readonly catalogue: CatalogueService
  /** From now on, requests that start read `next`; those under way keep the snapshot they read. */
  readonly replace: (next: CatalogueSnapshot) => void
}

/** A replaceable catalogue, starting with `initial`. */
export const replaceable = (initial: CatalogueSnapshot): Replaceable => {
  let current = initial
  return {
    catalogue: { snapshot: Effect.sync(() => current) },
    replace: (next) => {
      current = next
    }
  }
}
