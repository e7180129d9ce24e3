/**
 * The lean HTTP edge to upstreams: `undici` with one pooled Agent per provider, explicit timeouts,
 * and an AbortSignal tied to Effect interruption so that a client disconnect aborts the upstream.
 */
import { Upstream } from "@model-gateway/core"
import { Effect, Stream } from "effect"
import { createParser, type EventSourceMessage } from "eventsource-parser"
import { Agent, errors as UndiciErrors, request } from "undici"
import type { Dispatcher } from "undici"

/** Time limits of one provider; all in milliseconds. */
export interface Timeouts {
  /** Establishing the TCP/TLS connection. */
  readonly connectMs: number
  /** A non-streamed request: the whole answer (its headers come only when it is done). */
  readonly requestMs: number
  /** A streamed request: until the response headers arrive. */
  readonly firstByteMs: number
  /** A streamed request: the longest silence between two body chunks (a stall). */
  readonly idleMs: number
}

export const defaultTimeouts: Timeouts = {
  connectMs: 10_000,
  requestMs: 600_000,
  firstByteMs: 60_000,
  idleMs: 90_000
}

export interface Transport {
  readonly agent: Dispatcher
  readonly timeouts: Timeouts
}

/** One connection pool per provider, kept for the life of the process. */
export const makeTransport = (timeouts: Partial<Timeouts> = {}): Transport => {
  const t = { ...defaultTimeouts, ...timeouts }
  return {
    timeouts: t,
    agent: new Agent({
      connect: { timeout: t.connectMs },
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 600_000,
      connections: 256,
      pipelining: 1
    })
  }
}

const parseRetryAfter = (headers: Record<string, string | Array<string> | undefined>): number | undefined => {
  const ms = headers["retry-after-ms"]
  if (typeof ms === "string" && Number.isFinite(Number(ms))) return Number(ms)
  const s = headers["retry-after"]
  if (typeof s !== "string") return undefined
  if (Number.isFinite(Number(s))) return Number(s) * 1000
  const date = Date.parse(s)
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now())
}

/** Classifies an HTTP error answer from its status and (provider-specific) body. */
export const classifyStatus = (
  status: number,
  message: string,
  errorType: string | undefined,
  retryAfterMs: number | undefined
): Upstream.UpstreamError => {
  const kind: Upstream.UpstreamFailure = status === 429
    ? "rate_limited"
    : status === 529 || errorType === "overloaded_error"
    ? "overloaded"
    : status === 408 || status === 504 || status === 524
    ? "timeout"
    : status >= 500
    ? "server_error"
    : status === 401 || status === 403
    ? "auth"
    : status === 404
    ? "not_found"
    : "invalid_request"
  return new Upstream.UpstreamError({ kind, status, message, errorType, retryAfterMs })
}

/** Maps a thrown transport error (undici, socket, abort) to a classified upstream failure. */
export const classifyThrown = (cause: unknown): Upstream.UpstreamError => {
  if (cause instanceof Upstream.UpstreamError) return cause
  if (
    cause instanceof UndiciErrors.HeadersTimeoutError || cause instanceof UndiciErrors.BodyTimeoutError ||
    cause instanceof UndiciErrors.ConnectTimeoutError
  ) {
    return new Upstream.UpstreamError({ kind: "timeout", message: `upstream timed out: ${cause.message}` })
  }
  const error = cause as { code?: string; message?: string } | undefined
  return new Upstream.UpstreamError({
    kind: "transport",
    message: `upstream connection failed: ${error?.code ?? ""} ${error?.message ?? String(cause)}`.trim()
  })
}

export interface HttpCall {
  readonly url: string
  readonly headers: Record<string, string>
  readonly body: string
  readonly stream: boolean
  /** Reads a provider error body into (message, error type). */
  readonly describeError: (body: unknown, text: string) => { message: string; type?: string | undefined }
}

type Response = Dispatcher.ResponseData

const send = (transport: Transport, call: HttpCall, signal: AbortSignal): Promise<Response> =>
  request(call.url, {
    method: "POST",
    dispatcher: transport.agent,
    headers: call.headers,
    body: call.body,
    signal,
    headersTimeout: call.stream ? transport.timeouts.firstByteMs : transport.timeouts.requestMs,
    bodyTimeout: call.stream ? transport.timeouts.idleMs : transport.timeouts.requestMs
  })

const failFromResponse = async (call: HttpCall, response: Response): Promise<never> => {
  const text = await response.body.text().catch(() => "")
  let parsed: unknown = undefined
  try {
    parsed = JSON.parse(text)
  } catch {
    // not JSON: the text itself is the message
  }
  const described = call.describeError(parsed, text)
  throw classifyStatus(
    response.statusCode,
    described.message,
    described.type,
    parseRetryAfter(response.headers as Record<string, string | Array<string> | undefined>)
  )
}

/** POSTs JSON and parses the JSON answer. Interruption aborts the request. */
export const postJson = (transport: Transport, call: HttpCall): Effect.Effect<unknown, Upstream.UpstreamError> =>
  Effect.tryPromise({
    try: async (signal) => {
      const response = await send(transport, call, signal)
      if (response.statusCode >= 300) return failFromResponse(call, response)
      const text = await response.body.text()
      try {
        return JSON.parse(text) as unknown
      } catch {
        throw new Upstream.UpstreamError({
          kind: "transport",
          status: response.statusCode,
          message: "upstream answered with a body that is not JSON"
        })
      }
    },
    catch: classifyThrown
  })

/**
 * POSTs JSON and yields the server-sent events of the answer as they arrive. Interrupting the stream
 * (or finishing it) aborts the request; no body is buffered beyond the current chunk.
 */
export const postEventStream = (
  transport: Transport,
  call: HttpCall
): Stream.Stream<EventSourceMessage, Upstream.UpstreamError> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const controller = new AbortController()
    yield* Effect.addFinalizer(() => Effect.sync(() => controller.abort()))
    const response = yield* Effect.tryPromise({
      try: async () => {
        const response = await send(transport, call, controller.signal)
        if (response.statusCode >= 300) return failFromResponse(call, response)
        return response
      },
      catch: classifyThrown
    })
    return Stream.fromAsyncIterable(events(response.body), classifyThrown)
  }))

async function* events(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<EventSourceMessage> {
  const pending: Array<EventSourceMessage> = []
  const parser = createParser({ onEvent: (event) => pending.push(event) })
  const decoder = new TextDecoder()
  for await (const chunk of body) {
    parser.feed(typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true }))
    while (pending.length > 0) yield pending.shift()!
  }
  parser.feed(decoder.decode())
  while (pending.length > 0) yield pending.shift()!
}
