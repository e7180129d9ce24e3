/**
 * The lean HTTP edge to upstreams: `node:http` with one keep-alive pool per provider (`HttpClient`), explicit
 * timeouts, and interruption tied to the request so that a client disconnect aborts the upstream.
 *
 * Requests go to `HttpClient.post` with a small handler of our own, inside `Effect.async`:
 * no AbortController, promise or URL parse per call. Here: the transport (a pool and its time limits), the call, and
 * JSON answers, collected and parsed once; interruption of a JSON call aborts the request. Streamed answers are
 * `EventStream`'s.
 */
import { Upstream } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import { classifyThrown, errorFromResponse, type ErrorSource, textOf } from "./Failures.js"
import * as HttpClient from "./HttpClient.js"
import * as Nesting from "./Nesting.js"

export {
  classifyStatus,
  classifyThrown,
  firstHeader,
  rejectionKind,
  retryAfterOf,
  withoutCredentials
} from "./Failures.js"

/** Time limits of one provider; all in milliseconds. */
export interface Timeouts {
  /** Establishing the TCP/TLS connection. */
  readonly connectMs: number
  /** A non-streamed request: the whole answer (its headers come only when it is done). */
  readonly requestMs: number
  /** A streamed request: until the response headers arrive. */
  readonly firstByteMs: number
  /**
   * A streamed request: the longest silence between two body chunks (a stall) until its first content; after it, the
   * longest time without content: keep-alives (comments, pings, chunks that say nothing) do not re-arm it.
   */
  readonly idleMs: number
  /**
   * A streamed request: until its first content (text, thinking, a tool call), counted from the request; pings and
   * comments do not count. An upstream that pings without answering is a slow first token: it times out and the next
   * endpoint is tried, rather than holding the client for as long as it pings.
   */
  readonly firstContentMs: number
}

export const defaultTimeouts: Timeouts = {
  connectMs: 10_000,
  requestMs: 600_000,
  firstByteMs: 60_000,
  idleMs: 90_000,
  firstContentMs: 180_000
}

export interface Transport {
  readonly pool: HttpClient.Pool
  readonly timeouts: Timeouts
}

/** One connection pool per provider; close it with its scope (`scopedTransport`) or `pool.drain`. */
export const makeTransport = (timeouts: Partial<Timeouts> = {}): Transport => ({
  timeouts: { ...defaultTimeouts, ...timeouts },
  pool: new HttpClient.Pool()
})

/** What a scope closed by `retire` exits with. */
const RETIRED: unique symbol = Symbol.for("@model-gateway/provider-adapters/Transport/retired")
const retiredExit = Exit.succeed(RETIRED)

/**
 * Closes a provider's scope because another adapter took its place: its pools are retired (`Pool.retire`), not
 * closed, so that the calls still running on them finish; nothing of them is left once the last one has.
 */
export const retire = (scope: Scope.CloseableScope): Effect.Effect<void> => Scope.close(scope, retiredExit)

/**
 * A connection pool that lives as long as the current scope: closing the scope closes its connections (waiting at most
 * a second for requests still running, then destroying them), or, closed by `retire`, lets its requests finish.
 */
export const scopedTransport = (timeouts: Partial<Timeouts> = {}): Effect.Effect<Transport, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => makeTransport(timeouts)),
    ({ pool }, exit) =>
      Exit.isSuccess(exit) && exit.value === RETIRED
        ? Effect.sync(() => pool.retire())
        : Effect.promise(() => pool.drain(1_000))
  )

export interface HttpCall extends ErrorSource {
  readonly url: string
  readonly headers: Record<string, string>
  /**
   * The body, or what makes it when the request is sent. A function lets the text go once it is written: the Effect
   * that sends a call (and keeps the call) lives as long as its answer is awaited, the upstream's whole latency, and a
   * prompt's text is often hundreds of KB. What it reads (the parsed request) is kept anyway, for a fallback.
   */
  readonly body: HttpClient.Body | (() => HttpClient.Body)
  readonly stream: boolean
  /**
   * Checks a parsed successful answer (JSON answers only): a returned error fails the call. Done in the transport's
   * handler so that an adapter needs no further Effect step per call to check the shape of what it got.
   */
  readonly check?: ((json: unknown) => Upstream.UpstreamError | undefined) | undefined
}

export const targetOf = HttpClient.targetOf

/** Sends the call through the transport's pool to `handler`; a call that cannot be sent fails through the handler. */
export const dispatch = (transport: Transport, call: HttpCall, handler: HttpClient.Handler): void => {
  let target: HttpClient.Target
  try {
    target = targetOf(call.url)
  } catch (error) {
    handler.onError(error as Error)
    return
  }
  const { timeouts } = transport
  HttpClient.post(transport.pool, target, {
    headers: call.headers,
    body: typeof call.body === "function" ? call.body() : call.body,
    connectMs: timeouts.connectMs,
    headersMs: call.stream ? timeouts.firstByteMs : timeouts.requestMs,
    bodyMs: call.stream ? timeouts.idleMs : timeouts.requestMs
  }, handler)
}

/**
 * What a handler keeps of its call to describe a failure. Not the call itself: its body (a prompt, often hundreds of
 * KB) would then be held as long as the answer is read, a whole stream's length.
 */
export const sourceOf = (call: HttpCall): ErrorSource => ({ headers: call.headers, describeError: call.describeError })

/** Collects one JSON answer. */
class JsonHandler implements HttpClient.Handler {
  private abort: ((reason?: Error) => void) | undefined = undefined
  private done = false
  private status = 0
  private headers: HttpClient.Headers | undefined = undefined
  private chunks: Array<Buffer> = []
  private length = 0
  private readonly source: ErrorSource
  private readonly check: HttpCall["check"]

  constructor(
    call: HttpCall,
    private readonly resume: (effect: Effect.Effect<unknown, Upstream.UpstreamError>) => void
  ) {
    this.source = sourceOf(call)
    this.check = call.check
  }

  onConnect(abort: (reason?: Error) => void): void {
    if (this.done) abort()
    else this.abort = abort
  }

  onHeaders(statusCode: number, headers: HttpClient.Headers): boolean {
    this.status = statusCode
    this.headers = headers
    return true
  }

  onData(chunk: Buffer): boolean {
    this.chunks.push(chunk)
    this.length += chunk.length
    return true
  }

  onComplete(): void {
    if (this.done) return
    this.done = true
    const text = textOf(this.chunks, this.length)
    this.chunks = []
    if (this.status >= 300) {
      return this.resume(Effect.fail(errorFromResponse(this.source, this.status, this.headers, text)))
    }
    if (Nesting.tooDeep(text)) {
      return this.resume(Effect.fail(
        new Upstream.UpstreamError({
          kind: "transport",
          status: this.status,
          message: Nesting.tooDeepMessage("an answer")
        })
      ))
    }
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      return this.resume(Effect.fail(
        new Upstream.UpstreamError({
          kind: "transport",
          status: this.status,
          message: "upstream answered with a body that is not JSON"
        })
      ))
    }
    const invalid = this.check?.(json)
    this.resume(invalid === undefined ? Effect.succeed(json) : Effect.fail(invalid))
  }

  onError(error: Error): void {
    if (this.done) return
    this.done = true
    this.chunks = []
    // An error answer whose body could not be read is still that error, with an empty text.
    this.resume(Effect.fail(
      this.status >= 300 ? errorFromResponse(this.source, this.status, this.headers, "") : classifyThrown(error)
    ))
  }

  /** Interruption: aborts the request (at once, or as soon as it is connected). */
  cancel(): void {
    if (this.done) return
    this.done = true
    this.abort?.()
  }
}

/**
 * POSTs JSON and parses the JSON answer. Interruption aborts the request: the fiber that waits for the answer is
 * observed, and its end (an interrupted fiber ends once it has unwound) aborts a request still running. Not a canceler
 * of the wait: a canceler makes Effect wrap the wait in an uninterruptible region, 8 of a JSON request's 45 Effect
 * instructions and their objects, to do the same thing. Interruption in Effect always ends a fiber (a race or a timeout
 * runs its sides in fibers of their own), so the observer sees every interruption of this wait.
 */
export const postJson = (transport: Transport, call: HttpCall): Effect.Effect<unknown, Upstream.UpstreamError> =>
  Effect.withFiberRuntime((fiber) => Effect.async((resume) => start(transport, call, fiber, resume)))

/**
 * Sends a JSON call, observed by `fiber`. Its two closures (the observer, the answer's) hold the handler, the fiber and
 * `resume`, not the call: the observer lives as long as the answer is awaited, and the call's body is a prompt, often
 * hundreds of KB.
 */
const start = (
  transport: Transport,
  call: HttpCall,
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  resume: (effect: Effect.Effect<unknown, Upstream.UpstreamError>) => void
): void => {
  const observer = (): void => handler.cancel()
  const handler = new JsonHandler(call, (effect) => {
    // Answered: nothing left to abort, and a fiber that makes many calls (a batch's) keeps no observer per call.
    fiber.removeObserver(observer)
    resume(effect)
  })
  fiber.addObserver(observer)
  dispatch(transport, call, handler)
}
