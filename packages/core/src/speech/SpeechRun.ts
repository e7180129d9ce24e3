/**
 * The vocabulary the speech use case's modules share: the ports it runs on, one request on its way through the
 * attempts, and what it answers.
 */
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { CatalogueService } from "../catalogue/Catalogue.js"
import type * as GatewayError from "../errors/GatewayError.js"
import type { EndpointStatsService } from "../health/EndpointStats.js"
import type { QuotasService, QuotaStatus } from "../limits/Quotas.js"
import type { Requested } from "../messages/UsageAccounting.js"
import type { Attempt, PipelineStep } from "../routing/RoutePlanner.js"
import type { SessionAffinityService } from "../sessions/SessionAffinity.js"
import type { UpstreamService } from "../upstream/Upstream.js"
import type { UsageLogService } from "../usage/UsageLog.js"
import type { SpeechRequest } from "./SpeechRequest.js"

/** The services the use case calls, resolved once when it is built. */
export interface SpeechPorts {
  readonly catalogue: CatalogueService
  readonly upstream: UpstreamService
  readonly usageLog: UsageLogService
  readonly stats: EndpointStatsService
  readonly affinity: SessionAffinityService
  /** The admission step of the limits; none when the gateway enforces none. */
  readonly quotas: QuotasService | undefined
}

/** A validated, planned request. */
export interface SpeechRun extends Requested {
  readonly request: SpeechRequest
  readonly attempts: ReadonlyArray<Attempt>
  readonly steps: Array<PipelineStep>
  /** The session's affinity key, when the request belongs to a session. */
  readonly affinityKey: string | undefined
  readonly generationId: string
}

/**
 * Audio being sent: each pull gives the next bytes, or `undefined` at the end. A failure means the audio was cut
 * short after it had started: the answer must end as broken (not as a complete body).
 */
export type AudioPull = Effect.Effect<Uint8Array | undefined, GatewayError.GatewayError>

/** What the speech use case answers: the audio and how to describe it. */
export interface SpeechOutcome {
  /** `audio/mpeg`, or `audio/pcm;rate=<Hz>;channels=1`. */
  readonly contentType: string
  /** The request's generation id (`gen-...`), told in the `x-generation-id` header. */
  readonly generationId: string
  /** The catalogue model and the provider that answered. */
  readonly model: string
  readonly provider: string
  /** The routing steps and attempts, for `service_metadata`-style reporting. */
  readonly steps: ReadonlyArray<PipelineStep>
  /**
   * Opens the audio in the caller's scope. Closing the scope releases the upstream request (aborting it if it is
   * still running) and writes the usage record. Open it once.
   */
  readonly open: Effect.Effect<AudioPull, never, Scope.Scope>
  /** What is left of the request's limits, when any applies (told in response headers). */
  readonly quota?: QuotaStatus | undefined
}
