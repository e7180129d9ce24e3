/**
 * A batch: many requests to one target endpoint, run asynchronously by the workers of every gateway process, and its
 * wire form (the batch record of OpenRouter's published schema: every key present, nullable ones as `null`).
 */
import type { JsonObject } from "../messages/Wire.js"
import type { OpenAiApi } from "../upstream/Upstream.js"

/** The statuses (see `BatchStateMachine` for the moves between them). */
export const statuses = [
  "validating",
  "in_progress",
  "finalizing",
  "cancelling",
  "completed",
  "failed",
  "expired",
  "cancelled"
] as const

export type BatchStatus = typeof statuses[number]

export const isStatus = (value: string): value is BatchStatus => (statuses as ReadonlyArray<string>).includes(value)

/** The statuses a batch ends in: it may be deleted, and its results are shown. */
export const terminalStatuses: ReadonlyArray<BatchStatus> = ["completed", "failed", "expired", "cancelled"]

/** The statuses a worker still has something to do in. */
export const activeStatuses: ReadonlyArray<BatchStatus> = ["validating", "in_progress", "finalizing", "cancelling"]

export const isTerminal = (status: BatchStatus): boolean => terminalStatuses.includes(status)

/** The endpoints a batch may target. */
export const endpoints = ["/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/embeddings"] as const

export type BatchEndpoint = typeof endpoints[number]

export const isEndpoint = (value: string): value is BatchEndpoint =>
  (endpoints as ReadonlyArray<string>).includes(value)

/** The OpenAI-compatible API of an endpoint; undefined for `/v1/messages`. */
export const openAiApiOf = (endpoint: BatchEndpoint): OpenAiApi | undefined => {
  switch (endpoint) {
    case "/v1/chat/completions":
      return "chat"
    case "/v1/responses":
      return "responses"
    case "/v1/embeddings":
      return "embeddings"
    case "/v1/messages":
      return undefined
  }
}

/** The routing restrictions a batch puts on every one of its requests. */
export interface BatchProvider {
  /** Only these providers. */
  readonly only?: ReadonlyArray<string> | undefined
  readonly allowFallbacks?: boolean | undefined
}

/** Which app submitted it (the client-identification headers), for the usage records of its requests. */
export interface BatchApp {
  readonly referer: string | null
  readonly title: string | null
  readonly categories: string | null
}

/** How many requests there are, and how many have finished each way. */
export interface RequestCounts {
  readonly total: number
  readonly completed: number
  readonly failed: number
}

/** The usage of the requests that finished: prompt tokens (cached ones included), completion tokens, USD cost. */
export interface BatchUsage {
  readonly promptTokens: number
  readonly completionTokens: number
  /** USD as an exact decimal string. */
  readonly cost: string
}

export interface Batch {
  /** `batch_` and 20 hex digits: the creation time in milliseconds, then a sequence; newer ids sort after. */
  readonly id: string
  readonly workspace: string
  /** The key that created it (its public id), for the usage records of its requests. */
  readonly keyId: string | null
  readonly endpoint: BatchEndpoint
  readonly model: string
  readonly completionWindow: "24h"
  readonly status: BatchStatus
  readonly provider: BatchProvider | null
  readonly app: BatchApp
  readonly counts: RequestCounts
  readonly usage: BatchUsage
  /** Why it failed. */
  readonly errorMessage: string | null
  /** Unix epoch milliseconds. */
  readonly createdAt: number
  /** When its completion window ends. */
  readonly expiresAt: number
  /** When it reached a terminal status. */
  readonly finalizedAt: number | null
  readonly updatedAt: number
}

/** A request's answer: its HTTP status, request id and body. */
export interface ItemResponse {
  readonly statusCode: number
  readonly requestId: string | null
  readonly body: JsonObject
}

/** Why a request has no answer. */
export interface ItemError {
  readonly message: string
  readonly type: string
  readonly param: string | null
}

/** The result of one request: an answer, or an error. */
export interface ItemResult {
  readonly id: string
  readonly customId: string
  readonly response: ItemResponse | null
  readonly error: ItemError | null
}

const seconds = (ms: number): number => Math.floor(ms / 1000)

/** The batch record as clients read it; `results` only for a terminal batch read alone (null otherwise). */
export const toWire = (batch: Batch, results: ReadonlyArray<ItemResult> | null = null): JsonObject => ({
  id: batch.id,
  object: "batch",
  endpoint: batch.endpoint,
  model: batch.model,
  completion_window: batch.completionWindow,
  status: batch.status,
  created_at: seconds(batch.createdAt),
  expires_at: seconds(batch.expiresAt),
  finalized_at: batch.finalizedAt === null ? null : seconds(batch.finalizedAt),
  request_counts: { ...batch.counts },
  results: results === null ? null : results.map(resultToWire),
  error: batch.errorMessage === null ? null : { message: batch.errorMessage },
  usage: usageToWire(batch)
})

/** Null until a request has finished. */
const usageToWire = (batch: Batch): JsonObject | null =>
  batch.counts.completed + batch.counts.failed === 0 ? null : {
    prompt_tokens: batch.usage.promptTokens,
    completion_tokens: batch.usage.completionTokens,
    total_tokens: batch.usage.promptTokens + batch.usage.completionTokens,
    cost: Number(batch.usage.cost)
  }

/** One result as clients read it. */
export const resultToWire = (result: ItemResult): JsonObject => ({
  id: result.id,
  custom_id: result.customId,
  response: result.response === null ? null : {
    status_code: result.response.statusCode,
    request_id: result.response.requestId,
    body: result.response.body
  },
  error: result.error === null ? null : { ...result.error }
})

/** The record `DELETE /batches/{id}` answers. */
export const deletedToWire = (batch: Batch, at: number): JsonObject => ({
  id: batch.id,
  object: "batch",
  deleted: true,
  deletion: { status: "deleted", deleted_at: seconds(at) }
})
