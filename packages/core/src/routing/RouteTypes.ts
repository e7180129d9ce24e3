/**
 * The route planner's inputs and outputs: the routing fields of a request and what it needs of an endpoint
 * (`RouteRequest`, `Requirements`), what the planner reads besides (`RouteContext`, `Session`, `StoredResponse`), and
 * the plan it makes (`RoutePlan`): the ordered `Attempt`s and the `PipelineStep`s that `service_metadata.pipeline`
 * reports. `RoutePlanner` re-exports them.
 */
import type { Endpoint, Model } from "../catalogue/Catalogue.js"
import type { HealthSnapshot } from "../health/EndpointStats.js"
import type { ProviderPreferences } from "./ProviderPreferences.js"
import type * as SeededRandom from "./SeededRandom.js"

/** What the request needs of an endpoint, derived once from the body. */
export interface Requirements {
  /** The API the request was sent to (`messages`, `chat`, ...): an endpoint that lists its `apis` must list it. */
  readonly api?: string | undefined
  readonly tools: boolean
  readonly images: boolean
  readonly documents: boolean
  readonly maxTokens?: number | undefined
  /** The parameters the body uses, by their catalogue names (see `usedParameters`); read by `require_parameters`. */
  readonly parameters?: ReadonlyArray<string> | undefined
  /**
   * The prompt's size in tokens, estimated (about a quarter of the body's characters); with `maxTokens` it is checked
   * against each endpoint's context length.
   */
  readonly estimatedPromptTokens?: number | undefined
}

/** The routing fields of a request. */
export interface RouteRequest {
  readonly model: string
  readonly models?: ReadonlyArray<string> | undefined
  readonly fallbacks?: ReadonlyArray<{ readonly model: string }> | null | undefined
  readonly requirements: Requirements
  /** The effective provider preferences: `effectivePreferences(body.provider, body.route)`. */
  readonly provider?: ProviderPreferences | null | undefined
}

/** The session a request belongs to, for stickiness. */
export interface Session {
  /** The affinity key (`SessionAffinity.affinityKey(workspace, sessionId, model)`). */
  readonly key: string
  /** The endpoint id that served this session and model last (`SessionAffinity.get`), if any. */
  readonly endpointId?: string | undefined
}

/**
 * The response a Responses request continues (`previous_response_id`), when the gateway knows the endpoint that
 * answered it (`SessionAffinity.responseKey`): only that endpoint's provider holds it.
 */
export interface StoredResponse {
  readonly id: string
  readonly endpointId: string
}

/** What the planner reads besides the request and the catalogue; everything is optional. */
export interface RouteContext {
  /** Endpoint health; without it every endpoint is healthy and without stats. */
  readonly health?: HealthSnapshot | undefined
  /** The request's session; with it, the weighted choice derives from the session key instead of `random`. */
  readonly session?: Session | undefined
  /** The stored response the request continues; with it, the plan keeps to the provider that holds it. */
  readonly response?: StoredResponse | undefined
  /**
   * Uniform numbers in [0, 1): e.g. `seededRandom(yield* Random.nextInt)` in an Effect. Without it the plan is
   * deterministic (seeded with the model id), which is right for tests but not for spreading load.
   */
  readonly random?: SeededRandom.Random | undefined
  /** Epoch milliseconds, to tell a cooldown that has ended; without it `coolingDownUntil` alone decides. */
  readonly now?: number | undefined
}

export interface Attempt {
  readonly model: Model
  readonly endpoint: Endpoint
  /** Why this endpoint is in the plan, at this place. */
  readonly reason: string
  /** Set when the request's `max_tokens` is clamped for this endpoint: the value to send instead. */
  readonly maxTokens?: number | undefined
}

/** One step of the pipeline that `service_metadata` reports. */
export interface PipelineStep {
  readonly type: string
  readonly name: string
  readonly summary: string
}

export interface RoutePlan {
  readonly attempts: ReadonlyArray<Attempt>
  readonly steps: ReadonlyArray<PipelineStep>
}

/** A step the planner reports: all of them are of the `routing` type. */
export const step = (name: string, summary: string): PipelineStep => ({ type: "routing", name, summary })
