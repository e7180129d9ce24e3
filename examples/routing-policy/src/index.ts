/**
 * A routing policy of your own, tested like any pure function: no server, no network, no Layers. The catalogue is
 * plain data, the policy is a set of provider preferences, and `route` plans a request with the core's route planner
 * inside `Effect.sync`, so `Effect.runSync` is all a test needs (see `test/RoutingPolicy.test.ts`).
 *
 * The policy: EU providers only, zero-data-retention endpoints only, cheapest first, and a session stays on the
 * endpoint that served it last while that endpoint is healthy (prompt-cache hits).
 */
import { Catalogue, type GatewayError, RoutePlanner } from "@model-gateway/core"
import { Effect } from "effect"

const endpoint = (
  modelId: string,
  provider: string,
  promptPerMillion: number,
  completionPerMillion: number,
  options: { readonly zdr: boolean; readonly contextLength?: number }
): Catalogue.Endpoint => ({
  id: `${modelId}@${provider}`,
  modelId,
  provider,
  upstreamModel: modelId.split("/")[1],
  pricing: {
    prompt: (promptPerMillion / 1e6).toFixed(10),
    completion: (completionPerMillion / 1e6).toFixed(10),
    request: "0",
    image: "0"
  },
  contextLength: options.contextLength ?? 128_000,
  supportedParameters: ["tools", "tool_choice", "temperature", "max_tokens"],
  zdr: options.zdr,
  dataCollection: options.zdr ? "deny" : "allow",
  supportsVoiceCloning: false,
  supportsMultipleAudioReferences: false,
  supportsImageReference: false
})

/** A catalogue as a composition root would load it from configuration. */
export const catalogue: Catalogue.CatalogueSnapshot = Catalogue.makeSnapshot([
  {
    id: "mistral/large",
    name: "Mistral Large",
    endpoints: [
      endpoint("mistral/large", "mistral-eu", 2, 6, { zdr: true }),
      endpoint("mistral/large", "scaleway", 1.8, 5.4, { zdr: true, contextLength: 32_000 }),
      endpoint("mistral/large", "nebius-eu", 1.5, 4.5, { zdr: false }),
      endpoint("mistral/large", "us-cloud", 1, 3, { zdr: true })
    ]
  },
  {
    id: "meta/llama-70b",
    name: "Llama 70B",
    endpoints: [endpoint("meta/llama-70b", "us-cloud", 0.4, 0.4, { zdr: true })]
  }
])

/** Providers that serve from the EU. */
export const EU_PROVIDERS: ReadonlyArray<string> = ["mistral-eu", "scaleway", "nebius-eu"]

/** The policy as provider preferences: what a client would send as `provider`, fixed here by the operator. */
export const euPolicy: RoutePlanner.ProviderPreferences = { only: EU_PROVIDERS, zdr: true, sort: "price" }

/** What the policy needs to know of a request. */
export interface PolicyRequest {
  readonly model: string
  readonly maxTokens?: number
  /** About a quarter of the body's characters. */
  readonly estimatedPromptTokens?: number
  /** The session's affinity key and, when it has one, the endpoint that served it last. */
  readonly session?: RoutePlanner.Session
  /** Endpoint health; by default nothing is known and every endpoint is healthy. */
  readonly health?: RoutePlanner.HealthSnapshot
}

/** Plans a request under the EU policy; fails with `NotFound` (404) or `InvalidRequest` (400: nothing qualifies). */
export const route = (
  request: PolicyRequest
): Effect.Effect<RoutePlanner.RoutePlan, GatewayError.NotFound | GatewayError.InvalidRequest> =>
  Effect.sync(() =>
    RoutePlanner.plan(
      {
        model: request.model,
        requirements: {
          tools: false,
          images: false,
          documents: false,
          maxTokens: request.maxTokens,
          estimatedPromptTokens: request.estimatedPromptTokens
        },
        provider: euPolicy
      },
      catalogue,
      { health: request.health, session: request.session }
    )
  ).pipe(Effect.flatMap((plan) => plan))

/** The endpoints a request would try, in order, as `provider` names: the policy run with `Effect.runSync`. */
export const providersFor = (request: PolicyRequest): ReadonlyArray<string> =>
  Effect.runSync(route(request)).attempts.map((attempt) => attempt.endpoint.provider)
