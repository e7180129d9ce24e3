/**
 * The upstream port: sends one request to one provider endpoint. Adapters speak each provider's wire
 * protocol and always answer in the Anthropic Messages shape the gateway serves. Failures are
 * classified so the executor can decide whether to fall back.
 */
import type { Chunk, Scope } from "effect"
import { Context, Data, Effect, Option, Stream } from "effect"
import type { Endpoint } from "../catalogue/Catalogue.js"
import * as GatewayError from "../errors/GatewayError.js"
import type { JsonObject, Message, StreamEvent } from "../messages/Wire.js"

/** Why an upstream attempt failed. */
export type UpstreamFailure =
  /** 429 */
  | "rate_limited"
  /** 529, or 503 with an overloaded body */
  | "overloaded"
  /** no first byte, or a stalled stream, within the configured time */
  | "timeout"
  /** connection refused or reset, DNS, TLS, a body cut short, a malformed frame */
  | "transport"
  /** other 5xx */
  | "server_error"
  /** 400, 413, 422: the request itself is wrong; never retried on the same endpoint */
  | "invalid_request"
  /** 401, 403 from the upstream: the gateway's provider credentials are wrong */
  | "auth"
  /** 404 from the upstream: the upstream model id is unknown there */
  | "not_found"
  /** the provider declined to answer (content filter, refusal) */
  | "refused"
  /** the adapter cannot express this request for this upstream (e.g. a document to a text-only API) */
  | "unsupported"

export class UpstreamError extends Data.TaggedError("UpstreamError")<{
  readonly kind: UpstreamFailure
  readonly message: string
  /** The upstream's HTTP status, when it answered with one. */
  readonly status?: number | undefined
  /** The upstream's own error type string, when it gave one. */
  readonly errorType?: string | undefined
  /** From `retry-after` / `retry-after-ms`. */
  readonly retryAfterMs?: number | undefined
}> {}

/** Failures after which the next attempt (another endpoint or model) may be tried. */
export const isRetryable = (error: UpstreamError): boolean => {
  switch (error.kind) {
    case "invalid_request":
      return false
    default:
      return true
  }
}

/** Client headers that matter to an Anthropic upstream. */
export interface ForwardHeaders {
  readonly anthropicVersion?: string | undefined
  readonly anthropicBeta?: string | undefined
}

/** One call: which endpoint, and the Anthropic-shaped body (model already the upstream's id). */
export interface MessagesCall {
  readonly endpoint: Endpoint
  readonly body: JsonObject
  readonly headers: ForwardHeaders
}

/**
 * A streamed answer being read: each pull gives the events that arrived since the previous pull (the events of one
 * network read, say), or `undefined` once the answer has ended; after that, or after a failure, it is not pulled
 * again. A pull rather than a `Stream`: the executor reads the first events itself (to decide whether to fall back)
 * and then hands each chunk on, and a `Stream` between the two would cost every chunk a channel's machinery twice.
 */
export type EventPull = Effect.Effect<Chunk.Chunk<StreamEvent> | undefined, UpstreamError>

export interface UpstreamService {
  /** A non-streaming message. */
  readonly createMessage: (call: MessagesCall) => Effect.Effect<Message, UpstreamError>
  /**
   * Opens a streamed message in the caller's scope: the events of the Anthropic stream protocol, in order, as they
   * arrive. Closing the scope releases the request (aborting it if it is still running). A stream cut short fails
   * with `transport`. An adapter that builds its answer as a `Stream` can return `pullStream(stream)`.
   */
  readonly streamMessage: (call: MessagesCall) => Effect.Effect<EventPull, UpstreamError, Scope.Scope>
}

/** An `EventPull` reading a `Stream`, for adapters that build their answers as streams. */
export const pullStream = (
  stream: Stream.Stream<StreamEvent, UpstreamError>
): Effect.Effect<EventPull, never, Scope.Scope> =>
  Effect.map(Stream.toPull(stream), (pull) =>
    Effect.catchAll(
      pull,
      (error): Effect.Effect<undefined, UpstreamError> =>
        Option.isNone(error) ? Effect.succeed(undefined) : Effect.fail(error.value)
    ))

/** Port: provider endpoints. */
export class Upstream extends Context.Tag("@model-gateway/core/Upstream")<Upstream, UpstreamService>() {}

/** The domain error a client sees when this was the last upstream failure and nothing else was left to try. */
export const toGatewayError = (error: UpstreamError): GatewayError.GatewayError => {
  const message = error.message
  switch (error.kind) {
    case "rate_limited":
      return new GatewayError.RateLimited({ message, retryAfterMs: error.retryAfterMs })
    case "overloaded":
      return new GatewayError.Overloaded({ message })
    case "timeout":
      return new GatewayError.UpstreamTimeout({ message })
    case "invalid_request":
      return new GatewayError.UpstreamRejected({
        message,
        status: error.status === 413 ? 413 : 400,
        errorType: "invalid_request_error"
      })
    case "unsupported":
      return new GatewayError.InvalidRequest({ message })
    case "refused":
      return new GatewayError.PermissionDenied({ message })
    case "server_error":
      return new GatewayError.InternalError({ message })
    case "auth":
    case "not_found":
    case "transport":
      return new GatewayError.Unavailable({ message })
  }
}
