/**
 * The usage log port: one record per request, written off the request path (adapters buffer and
 * write in batches) so that logging never adds latency to a request.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"

export interface UsageRecord {
  readonly requestId: string
  /** Unix epoch milliseconds. */
  readonly createdAt: number
  /** The route's method and pattern, e.g. `POST /v1/messages`. */
  readonly route: string
  /** Null when the request had no valid key (a 401). */
  readonly keyId: string | null
  readonly workspace: string | null
  /** The model that answered (or was asked for, when nothing answered); null when the request named none. */
  readonly model: string | null
  readonly provider: string | null
  readonly endpointId: string | null
  readonly stream: boolean
  /** HTTP status the client got (200 for a stream that started). */
  readonly status: number
  readonly errorType: string | null
  /** Uncached prompt tokens. */
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cacheReadTokens: number
  readonly cacheWriteTokens: number
  /** USD as a decimal string. */
  readonly cost: string
  readonly latencyMs: number
  readonly ttfbMs: number | null
  /** Upstream attempts made; 0 when the request was refused before any (invalid, unknown model, a plugin). */
  readonly attempts: number
  readonly sessionId: string | null
  readonly user: string | null
  readonly appReferer: string | null
  readonly appTitle: string | null
  readonly appCategories: string | null
  /** Custom metadata the request sent (the keys of its `trace` besides the tracing ids and names). */
  readonly metadata: Readonly<Record<string, unknown>> | null
}

export interface UsageQuery {
  readonly workspace?: string | undefined
  readonly limit?: number | undefined
}

export interface UsageLogService {
  /** Queues a record; never blocks the caller on storage. */
  readonly record: (record: UsageRecord) => Effect.Effect<void>
  /**
   * Tells of a request whose client went away before its answer (status 499): not a usage record, since nothing was
   * served or billed, and no store keeps it. The request log writes its line; a log without one leaves this out.
   */
  readonly abandoned?: ((record: UsageRecord) => Effect.Effect<void>) | undefined
  /** Waits until every queued record is stored. */
  readonly flush: Effect.Effect<void>
  /** Newest first. */
  readonly list: (query: UsageQuery) => Effect.Effect<ReadonlyArray<UsageRecord>>
}

/** Port: usage records. */
export class UsageLog extends Context.Tag("@model-gateway/core/UsageLog")<UsageLog, UsageLogService>() {}
