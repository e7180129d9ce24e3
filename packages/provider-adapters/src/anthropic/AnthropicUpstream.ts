/**
 * The Anthropic Messages adapter: forwards the request as the client sent it (only the model id is the endpoint's
 * upstream id, and a request without `max_tokens` is given the endpoint's cap) and passes the answer and every stream
 * event through faithfully — thinking and signatures, tool_use, server tool blocks, citations, cache usage fields.
 */
import { OutputCap, Upstream, Wire } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { type EventDecoder, KEEP_ALIVE, openEventStream } from "../internal/EventStream.js"
import { excerpt } from "../internal/Failures.js"
import * as JsonBody from "../internal/JsonBody.js"
import * as Nesting from "../internal/Nesting.js"
import type { Timeouts } from "../internal/Transport.js"
import { postJson, scopedTransport } from "../internal/Transport.js"
import * as AnthropicChat from "./AnthropicChat.js"

export interface AnthropicOptions {
  /** Base URL without the `/v1` suffix, e.g. `https://api.anthropic.com`. */
  readonly baseUrl: string
  readonly apiKey?: string | undefined
  /** Sent when the client did not send `anthropic-version`. */
  readonly defaultVersion?: string | undefined
  /** Extra headers sent on every request. */
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly timeouts?: Partial<Timeouts> | undefined
}

const describeError = (body: unknown, text: string) => {
  const error = (body as { error?: { message?: unknown; type?: unknown } } | undefined)?.error
  return {
    message: typeof error?.message === "string" ? error.message : excerpt(text, "upstream error"),
    type: typeof error?.type === "string" ? error.type : undefined
  }
}

/** The stream's own `event: error` frame, classified like an HTTP error of the same type. */
const streamError = (data: Wire.JsonObject): Upstream.UpstreamError => {
  const error = data.error as { type?: string; message?: string } | undefined
  const type = error?.type
  const kind: Upstream.UpstreamFailure = type === "overloaded_error"
    ? "overloaded"
    : type === "rate_limit_error"
    ? "rate_limited"
    : type === "invalid_request_error"
    ? "invalid_request"
    : type === "timeout_error"
    ? "timeout"
    : "server_error"
  return new Upstream.UpstreamError({ kind, message: error?.message ?? "upstream stream error", errorType: type })
}

const checkMessage = (json: unknown): Upstream.UpstreamError | undefined => {
  const message = json as Wire.Message | undefined
  return message !== undefined && message !== null && Array.isArray(message.content)
    ? undefined
    : new Upstream.UpstreamError({ kind: "transport", message: "upstream answered without a message" })
}

const checkCount = (json: unknown): Upstream.UpstreamError | undefined =>
  typeof (json as { input_tokens?: unknown } | null)?.input_tokens === "number"
    ? undefined
    : new Upstream.UpstreamError({ kind: "transport", message: "upstream answered count_tokens without input_tokens" })

/** The events whose fields a pass-through caller reads (see `MessagesCall.passThrough`): always parsed. */
const readByCaller: ReadonlySet<string> = new Set(["message_start", "message_delta", "error"])

/**
 * The decoder of one stream's events. Made here, not in `streamMessage`: a closure there would hold the call, and its
 * body (the whole conversation), for as long as the stream is open.
 */
const eventDecoder = (passThrough: boolean): EventDecoder<Wire.StreamEvent> => {
  let stopped = false
  return {
    event: (message, out) => {
      // Events the caller passes on as they came are not parsed (see `MessagesCall.passThrough`): most of a stream
      // is content deltas, which the gateway forwards untouched.
      const name = message.event
      if (passThrough && name !== undefined && !readByCaller.has(name)) {
        const event = Wire.unparsed(name, message.data)
        if (event !== undefined) {
          out.push(event)
          // The stream's end, as OpenAI's `[DONE]` is: the body's own end is read after it (EventStream's `DRAIN_MS`).
          if (name !== "message_stop") return name === "ping" ? KEEP_ALIVE : undefined
          stopped = true
          return true
        }
      }
      if (Nesting.tooDeep(message.data)) {
        throw new Upstream.UpstreamError({ kind: "transport", message: Nesting.tooDeepMessage("a stream event") })
      }
      let data: Wire.JsonObject
      try {
        data = JSON.parse(message.data) as Wire.JsonObject
      } catch {
        throw new Upstream.UpstreamError({ kind: "transport", message: "upstream sent a malformed stream event" })
      }
      if ((message.event ?? data.type) === "error") throw streamError(data)
      // An event passed on as it came is sent as it came (its text kept, not serialised again).
      if (typeof data.type === "string") out.push(Wire.withRawData(data as Wire.StreamEvent, message.data))
      else out.push(Object.assign(data, { type: message.event ?? "message" }))
      if (data.type === "message_stop") {
        stopped = true
        return true
      }
      // Passed on, but not content: an upstream that only pings is silent (see EventStream's `KEEP_ALIVE`).
      return data.type === "ping" ? KEEP_ALIVE : undefined
    },
    end: () => {
      if (!stopped) {
        throw new Upstream.UpstreamError({ kind: "transport", message: "upstream stream ended before message_stop" })
      }
    }
  }
}

/**
 * The body a create or stream call sends: the caller's, with its `stream` flag, and the endpoint's default cap when it
 * sets none (Anthropic's API refuses a request without `max_tokens`, which the spec leaves optional). Both derived with
 * `Wire.withField`: a large body is still sent as the client's bytes, with these fields spliced in.
 */
const messageBody = (call: Upstream.MessagesCall, stream: boolean): Wire.JsonObject =>
  Wire.withField(OutputCap.withDefault(call.body, call.endpoint), "stream", stream)

/** The APIs the adapter serves (the Messages API, and chat completions translated); it refuses the others. */
export const apis: ReadonlyArray<string> = AnthropicChat.APIS

/** An Upstream for one Anthropic-protocol provider; its connection pool closes with the scope. */
export const make = (options: AnthropicOptions): Effect.Effect<Upstream.UpstreamService, never, Scope.Scope> =>
  Effect.map(scopedTransport(options.timeouts), (transport) => {
    const url = `${options.baseUrl.replace(/\/+$/, "")}/v1/messages`
    const baseHeaders: Record<string, string> = {
      "content-type": "application/json",
      accept: "application/json",
      ...options.headers
    }
    if (options.apiKey !== undefined) baseHeaders["x-api-key"] = options.apiKey
    const streamHeaders: Record<string, string> = { ...baseHeaders, accept: "text/event-stream" }
    // Object.assign, not `{ ...base }` plus new keys: objects built by spread and then given keys are slow on V8 11.
    const headersFor = (call: Upstream.MessagesCall, stream: boolean): Record<string, string> => {
      const headers: Record<string, string> = Object.assign({}, stream ? streamHeaders : baseHeaders)
      headers["anthropic-version"] = call.headers.anthropicVersion ?? options.defaultVersion ?? "2023-06-01"
      if (call.headers.anthropicBeta !== undefined) headers["anthropic-beta"] = call.headers.anthropicBeta
      return headers
    }

    const createMessage = (call: Upstream.MessagesCall) =>
      postJson(transport, {
        url,
        headers: headersFor(call, false),
        body: () => {
          const text = JsonBody.encode(messageBody(call, false))
          // The body is read no more: its conversation may go (see `MessagesCall.bodyMade`).
          call.bodyMade?.()
          return text
        },
        stream: false,
        describeError,
        check: checkMessage
      }) as Effect.Effect<Wire.Message, Upstream.UpstreamError>

    // Events are decoded as each network read arrives, with no Effect per event (see EventStream.openEventStream).
    const streamMessage = (call: Upstream.MessagesCall): Effect.Effect<Upstream.EventPull, never, Scope.Scope> => {
      const body = JsonBody.encode(messageBody(call, true))
      call.bodyMade?.()
      return openEventStream(transport, {
        url,
        headers: headersFor(call, true),
        body,
        stream: true,
        describeError
      }, eventDecoder(call.passThrough === true))
    }

    const countUrl = `${options.baseUrl.replace(/\/+$/, "")}/v1/messages/count_tokens`
    const countTokens = (call: Upstream.MessagesCall) =>
      Effect.map(
        postJson(transport, {
          url: countUrl,
          headers: headersFor(call, false),
          body: () => JsonBody.encode(call.body),
          stream: false,
          describeError,
          check: checkCount
        }),
        (json) => (json as { input_tokens: number }).input_tokens
      )

    return { createMessage, streamMessage, countTokens, ...AnthropicChat.make({ createMessage, streamMessage }) }
  })
