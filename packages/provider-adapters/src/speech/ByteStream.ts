/**
 * A POSTed JSON request whose answer is a binary body read as it arrives (raw audio): the counterpart for bytes of
 * `EventStream.openEventStream`, on the same connection pool and time-outs. Opening waits for the response head,
 * so that an error status (or a body that is not what was asked for) fails the attempt before any byte is handed on;
 * then each pull gives the bytes that arrived since the previous one. Back-pressure: past 64 KiB read ahead of the
 * puller, the socket waits. Closing the scope before the body has ended aborts the request.
 */
import { Upstream } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { classifyStatus, classifyThrown, firstHeader, retryAfterOf, withoutCredentials } from "../internal/Failures.js"
import * as HttpClient from "../internal/HttpClient.js"
import type { Transport } from "../internal/Transport.js"
import { targetOf } from "../internal/Transport.js"

/** One binary request. */
export interface ByteCall {
  readonly url: string
  readonly headers: Record<string, string>
  readonly body: string
  /** Reads a provider error body into (message, error type). */
  readonly describeError: (body: unknown, text: string) => { message: string; type?: string | undefined }
  /**
   * Checks the response head of a successful status: a message makes the call fail (`server_error`) with the body as
   * its detail, e.g. a JSON body where audio was asked for.
   */
  readonly checkHead?: ((contentType: string | undefined) => string | undefined) | undefined
}

/** The response head, and the body's bytes as pulls. */
export interface ByteResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string | Array<string> | undefined>>
  readonly pull: Upstream.BytePull
}

const HIGH_WATER_MARK = 64 * 1024

class ByteStreamHandler implements HttpClient.Handler {
  private abort: ((reason?: Error) => void) | undefined = undefined
  private finished = false
  private closed = false
  private status = 0
  private headers: Record<string, string | Array<string> | undefined> = {}
  /** Set when the head says the answer is an error: the body is collected for its message. */
  private errorHead: { readonly status: number; readonly detail: string | undefined } | undefined = undefined
  private errorChunks: Array<Buffer> = []
  private resumeSocket: (() => void) | undefined = undefined
  private paused = false
  private queued: Array<Buffer> = []
  private queuedBytes = 0
  private ended = false
  private failure: Upstream.UpstreamError | undefined = undefined
  private headWaiter: ((effect: Effect.Effect<ByteResponse, Upstream.UpstreamError>) => void) | undefined = undefined
  private headDelivered = false
  private waiter: ((effect: Upstream.BytePull) => void) | undefined = undefined

  constructor(private readonly call: ByteCall) {}

  /** The response head, once it has come (or the failure that came instead). */
  readonly head: Effect.Effect<ByteResponse, Upstream.UpstreamError> = Effect.async((resume) => {
    this.headWaiter = resume
    this.deliverHead()
  })

  private deliverHead(): void {
    const waiter = this.headWaiter
    if (waiter === undefined || this.headDelivered) return
    if (this.failure !== undefined && (this.status === 0 || this.errorHead !== undefined)) {
      this.headDelivered = true
      this.headWaiter = undefined
      return waiter(Effect.fail(this.failure))
    }
    if (this.status >= 200 && this.errorHead === undefined) {
      this.headDelivered = true
      this.headWaiter = undefined
      waiter(Effect.succeed({ status: this.status, headers: this.headers, pull: this.pull }))
    }
  }

  private take(): Upstream.BytePull | undefined {
    if (this.queued.length > 0) {
      const bytes = this.queued.length === 1 ? this.queued[0] : Buffer.concat(this.queued, this.queuedBytes)
      this.queued = []
      this.queuedBytes = 0
      return Effect.succeed(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength))
    }
    if (this.failure !== undefined) return Effect.fail(this.failure)
    if (this.ended) return Effect.succeed(undefined)
    return undefined
  }

  private deliver(): void {
    const waiter = this.waiter
    if (waiter === undefined) return
    const ready = this.take()
    if (ready === undefined) return
    this.waiter = undefined
    waiter(ready)
  }

  /** The bytes that arrived since the previous pull; waits for the next network read when there are none. */
  readonly pull: Upstream.BytePull = Effect.suspend(() => {
    const ready = this.take()
    if (ready === undefined) {
      return Effect.async<Uint8Array | undefined, Upstream.UpstreamError>((resume) => {
        this.waiter = resume
      })
    }
    if (this.paused) {
      this.paused = false
      this.resumeSocket?.()
    }
    return ready
  })

  onConnect(abort: (reason?: Error) => void): void {
    if (this.closed) abort()
    else this.abort = abort
  }

  onHeaders(statusCode: number, headers: HttpClient.Headers, resume: () => void): boolean {
    this.status = statusCode
    this.headers = headers
    this.resumeSocket = resume
    if (statusCode >= 300) {
      this.errorHead = { status: statusCode, detail: undefined }
    } else {
      const detail = this.call.checkHead?.(firstHeader(this.headers["content-type"]))
      if (detail !== undefined) this.errorHead = { status: statusCode, detail }
    }
    this.deliverHead()
    return true
  }

  onData(chunk: Buffer): boolean {
    if (this.errorHead !== undefined) {
      this.errorChunks.push(chunk)
      return true
    }
    if (this.failure !== undefined || this.ended) return true
    this.queued.push(chunk)
    this.queuedBytes += chunk.length
    this.deliver()
    if (this.queuedBytes >= HIGH_WATER_MARK && this.waiter === undefined) this.paused = true
    return !this.paused
  }

  private errorOfHead(text: string): Upstream.UpstreamError {
    const head = this.errorHead!
    let parsed: unknown = undefined
    try {
      parsed = JSON.parse(text)
    } catch {
      // not JSON: the text itself is the message
    }
    const described = this.call.describeError(parsed, text)
    const message = withoutCredentials(described.message, this.call.headers)
    if (head.status < 300) {
      return new Upstream.UpstreamError({
        kind: "server_error",
        status: head.status,
        message: `${head.detail}: ${message}`
      })
    }
    return classifyStatus(head.status, message, described.type, retryAfterOf(this.headers))
  }

  onComplete(): void {
    if (this.finished) return
    this.finished = true
    if (this.errorHead !== undefined) {
      this.failure = this.errorOfHead(Buffer.concat(this.errorChunks).toString("utf8"))
      this.errorChunks = []
    } else {
      this.ended = true
    }
    this.deliverHead()
    this.deliver()
  }

  onError(error: Error): void {
    if (this.finished) return
    this.finished = true
    if (this.errorHead !== undefined) {
      this.failure = this.errorOfHead("")
      this.errorChunks = []
    } else if (!this.ended) {
      this.failure = classifyThrown(error)
    }
    this.deliverHead()
    this.deliver()
  }

  /** The scope closed: aborts the request unless its body was read to the end. */
  close(): void {
    this.closed = true
    this.waiter = undefined
    this.headWaiter = undefined
    if (this.finished) return
    this.finished = true
    this.abort?.()
  }
}

/**
 * POSTs JSON and opens the binary answer in the caller's scope, once its head has come: an error status fails here
 * (classified as for every upstream), as does a head `checkHead` refuses.
 */
export const openByteStream = (
  transport: Transport,
  call: ByteCall
): Effect.Effect<ByteResponse, Upstream.UpstreamError, Scope.Scope> =>
  Effect.flatMap(
    Effect.acquireRelease(
      Effect.sync(() => {
        const handler = new ByteStreamHandler(call)
        let target: HttpClient.Target
        try {
          target = targetOf(call.url)
        } catch (error) {
          handler.onError(error as Error)
          return handler
        }
        HttpClient.post(transport.pool, target, {
          headers: call.headers,
          body: call.body,
          connectMs: transport.timeouts.connectMs,
          headersMs: transport.timeouts.firstByteMs,
          bodyMs: transport.timeouts.idleMs
        }, handler)
        return handler
      }),
      (handler) => Effect.sync(() => handler.close())
    ),
    (handler) => handler.head
  )
