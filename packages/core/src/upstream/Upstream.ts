/**
 * The upstream port: sends one request to one provider endpoint. Adapters speak each provider's wire
 * protocol and always answer in the Anthropic Messages shape the gateway serves. Failures are
 * classified so the executor can decide whether to fall back.
 */
import type * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { Endpoint } from "../catalogue/Catalogue.js"
import * as GatewayError from "../errors/GatewayError.js"
import type { JsonObject, Message, StreamEvent } from "../messages/Wire.js"
import type { References } from "../speech/SpeechReferences.js"

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
  /** 400, 413, 422: the request itself is wrong; never retried (the next model would say the same) */
  | "invalid_request"
  /** a 400 saying the prompt is too long for the model's context: another model may take it */
  | "context_length"
  /** a 400 refusing the input by the provider's content policy: another model may take it */
  | "content_filter"
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

/**
 * What may be tried after a failure: the next attempt (another endpoint or model), only an attempt of another model
 * (the model refused this request: too long for its context, or against its provider's content policy; never the
 * same endpoint again), or nothing (the request itself is wrong).
 */
export const fallbackScope = (error: UpstreamError): "next" | "model" | "none" => {
  switch (error.kind) {
    case "invalid_request":
      return "none"
    case "context_length":
    case "content_filter":
      return "model"
    default:
      return "next"
  }
}

/** Failures after which another attempt may be tried. */
export const isRetryable = (error: UpstreamError): boolean => fallbackScope(error) !== "none"

/** The attempt to try after attempt `i` failed with `error`, or -1: the next one, or the next of another model. */
export const nextAttempt = (
  attempts: ReadonlyArray<{ readonly model: { readonly id: string } }>,
  i: number,
  error: UpstreamError
): number => {
  switch (fallbackScope(error)) {
    case "none":
      return -1
    case "next":
      return i + 1 < attempts.length ? i + 1 : -1
    case "model":
      for (let j = i + 1; j < attempts.length; j++) if (attempts[j].model.id !== attempts[i].model.id) return j
      return -1
  }
}

/**
 * The client's headers an upstream receives, each only by an upstream of its provider's protocol: Anthropic's version
 * and beta flags, OpenAI's beta flags. No other client header is forwarded (cookies, tracing, `x-forwarded-*`: see
 * docs/decisions.md).
 */
export interface ForwardHeaders {
  /** `anthropic-version`. */
  readonly anthropicVersion?: string | undefined
  /** `anthropic-beta`. */
  readonly anthropicBeta?: string | undefined
  /** `openai-beta` (`OpenAI-Beta`). */
  readonly openaiBeta?: string | undefined
}

/** One call: which endpoint, and the Anthropic-shaped body (model already the upstream's id). */
export interface MessagesCall {
  readonly endpoint: Endpoint
  readonly body: JsonObject
  readonly headers: ForwardHeaders
  /**
   * Streams only: the caller passes the events on as they came and reads no field of them but `type`, save in
   * `message_start`, `message_delta` and `error`. An adapter may then give the others unparsed (`Wire.unparsed`: the
   * type and the event's JSON text, which `Wire.sseFrame` sends as it came). Without it, every event is parsed.
   */
  readonly passThrough?: boolean | undefined
  /**
   * Called by the adapter once it has made its request's text from `body` and will read `body` no more: the caller
   * may then let go of the conversation (see `Conversation`), which a long request would otherwise hold until its
   * answer. Optional both ways: an adapter that never calls it leaves the body held, as before.
   */
  readonly bodyMade?: (() => void) | undefined
}

/** The OpenAI-protocol APIs an endpoint may serve besides messages. */
export type OpenAiApi = "chat" | "embeddings" | "responses"

/** The path of each OpenAI-protocol API under a provider's base URL. */
export const openAiPaths: Readonly<Record<OpenAiApi, string>> = {
  chat: "/chat/completions",
  embeddings: "/embeddings",
  responses: "/responses"
}

/**
 * One OpenAI-protocol call: the API, the endpoint, and the body as the client sent it (less the gateway's own
 * fields, with the endpoint's model id). An OpenAI-compatible adapter passes it through untouched; another adapter
 * translates it (the Anthropic adapter serves `chat`).
 */
export interface OpenAiCall {
  readonly api: OpenAiApi
  readonly endpoint: Endpoint
  readonly body: JsonObject
  /** The client's headers an upstream of their protocol receives (`ForwardHeaders`). */
  readonly headers: ForwardHeaders
  /** As `MessagesCall.bodyMade`: the adapter has made its request's text from `body` and will read it no more. */
  readonly bodyMade?: (() => void) | undefined
}

/** A streamed OpenAI-protocol answer: the parsed `data` of each event (chat chunks, Responses events), per pull. */
export type JsonPull = Effect.Effect<Chunk.Chunk<JsonObject> | undefined, UpstreamError>

/**
 * A streamed answer being read: each pull gives the events that arrived since the previous pull (the events of one
 * network read, say), or `undefined` once the answer has ended; after that, or after a failure, it is not pulled
 * again. A pull rather than a `Stream`: the executor reads the first events itself (to decide whether to fall back)
 * and then hands each chunk on, and a `Stream` between the two would cost every chunk a channel's machinery twice.
 */
export type EventPull = Effect.Effect<Chunk.Chunk<StreamEvent> | undefined, UpstreamError>

/** One speech synthesis: the endpoint (its `upstreamModel` is the provider's id) and what to say, how. */
export interface SpeechCall {
  readonly endpoint: Endpoint
  readonly input: string
  /** The provider's voice id; absent: the provider's default. */
  readonly voice: string | undefined
  readonly format: "mp3" | "pcm"
  /** Playback speed multiplier, for providers that support one. */
  readonly speed: number | undefined
  /** Reference audio clips (with transcripts) or an image, for voice cloning or design. */
  readonly references: References
  /** The request's `provider.options` for this endpoint's provider, forwarded as they are. */
  readonly options: JsonObject | undefined
}

/**
 * Audio being read: each pull gives the bytes that arrived since the previous pull (those of one network read, say),
 * or `undefined` once the audio has ended; after that, or after a failure, it is not pulled again.
 */
export type BytePull = Effect.Effect<Uint8Array | undefined, UpstreamError>

/** Synthesized speech as it arrives. */
export interface SpeechAudio {
  /** `audio/mpeg` for mp3; `audio/pcm;rate=<Hz>;channels=1` for pcm (16-bit little-endian samples). */
  readonly contentType: string
  readonly pull: BytePull
}

export interface UpstreamService {
  /** A non-streaming message. */
  readonly createMessage: (call: MessagesCall) => Effect.Effect<Message, UpstreamError>
  /**
   * Opens a streamed message in the caller's scope: the events of the Anthropic stream protocol, in order, as they
   * arrive. Closing the scope releases the request (aborting it if it is still running). A stream cut short fails
   * with `transport`. An adapter that builds its answer as a `Stream` can return `pullStream(stream)`. The effect runs
   * with that scope as its only service, as its type says (no copy of the caller's context per attempt): an adapter
   * takes whatever else it needs when it is made, not from the context of the call (`Effect.serviceOption` finds
   * nothing there). The same holds for `streamOpenAi`.
   */
  readonly streamMessage: (call: MessagesCall) => Effect.Effect<EventPull, UpstreamError, Scope.Scope>
  /**
   * The prompt's size in tokens as the provider counts it (Anthropic's `count_tokens`), for the endpoint's model. An
   * adapter whose provider cannot count omits it (or fails with `unsupported`); the gateway then counts locally.
   */
  readonly countTokens?: ((call: MessagesCall) => Effect.Effect<number, UpstreamError>) | undefined
  /**
   * An OpenAI-protocol answer (chat completion, embeddings, response) as JSON. An adapter that cannot serve an API
   * omits the method or fails with `unsupported` (the next endpoint is tried).
   */
  readonly createOpenAi?: ((call: OpenAiCall) => Effect.Effect<JsonObject, UpstreamError>) | undefined
  /**
   * Opens a streamed OpenAI-protocol answer in the caller's scope: chat chunks (the pull ends after `[DONE]`) or
   * Responses events (each with its `type`). A stream cut short fails with `transport`.
   */
  readonly streamOpenAi?: ((call: OpenAiCall) => Effect.Effect<JsonPull, UpstreamError, Scope.Scope>) | undefined
  /**
   * Opens synthesized speech in the caller's scope: the audio bytes as they arrive. Closing the scope releases the
   * request (aborting it if it is still running). Audio cut short fails with `transport`. An adapter whose provider
   * has no speech omits it.
   */
  readonly speech?: ((call: SpeechCall) => Effect.Effect<SpeechAudio, UpstreamError, Scope.Scope>) | undefined
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

/**
 * The failure a client is told of, once `latest` failed after `reported`: the latest, unless it is an endpoint's
 * `unsupported` (it cannot express the request, say a server tool to an OpenAI-compatible endpoint) after another
 * failure. That endpoint's refusal says nothing of the request, which another endpoint could take: the earlier failure
 * (an overload that may pass, an upstream's own 400) is what the client can act on. Told the 400 instead, a client
 * would stop on a passing outage.
 */
export const telling = (reported: UpstreamError | undefined, latest: UpstreamError): UpstreamError =>
  reported !== undefined && latest.kind === "unsupported" ? reported : latest

/** The domain error a client sees when this was the last upstream failure and nothing else was left to try. */
export const toGatewayError = (error: UpstreamError): GatewayError.GatewayError => {
  const message = error.message
  switch (error.kind) {
    case "rate_limited":
      return new GatewayError.RateLimited({ message, retryAfterMs: error.retryAfterMs })
    case "overloaded":
      return new GatewayError.Overloaded({ message, retryAfterMs: error.retryAfterMs })
    case "timeout":
      return new GatewayError.UpstreamTimeout({ message })
    case "invalid_request":
    case "context_length":
    case "content_filter":
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
      // The gateway's own provider credentials were refused: an operator's matter, never the client's, and not
      // "try again" (503) either. The provider's text is left out: it may quote the credentials.
      return new GatewayError.UpstreamRejected({
        message: `the provider refused the gateway's credentials${
          error.status === undefined ? "" : ` (HTTP ${error.status})`
        }; the gateway's provider configuration needs fixing`,
        status: 502,
        errorType: "api_error"
      })
    case "not_found":
      // The provider has no such model or path: the gateway's catalogue or base URL is wrong.
      return new GatewayError.UpstreamRejected({
        message: `the provider answered 404 (is the catalogue's upstream model id or the base URL wrong?): ${message}`,
        status: 502,
        errorType: "api_error"
      })
    case "transport":
      return new GatewayError.Unavailable({ message })
  }
}
