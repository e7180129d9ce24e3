/**
 * Streamed answers: a call's server-sent events, parsed as each network read arrives (`eventsource-parser`) and decoded
 * by the adapter's `EventDecoder`, then handed on as one `Chunk` per read through a pull (`openEventStream`), so Effect
 * runs per read, not per event; or pushed to a writer in the read's own callback (`Push`), so no Effect runs per read
 * at all. The end of a stream's scope before the body was read to its end aborts the request; a body read to its end
 * is not aborted, nor one whose last event (or an in-band error) came and only its end is left: it is read to that
 * end (`DRAIN_MS`), so that its connection is reused.
 *
 * Keep-alives (SSE comments, which the parser drops; events that give nothing; those the decoder says are, see
 * `KEEP_ALIVE`) are not content: once the first content came (a pull until's `stop` met), only a read with an event
 * that gave something else re-arms the idle time-out (`Timeouts.idleMs`), so an upstream that only pings after it
 * fails the stream in time.
 */
import { PullUntil, Push, Upstream } from "@model-gateway/core"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import { createParser, type EventSourceMessage, type EventSourceParser } from "eventsource-parser"
import { StringDecoder } from "node:string_decoder"
import { classifyThrown, errorFromResponse, type ErrorSource, textOf } from "./Failures.js"
import type * as HttpClient from "./HttpClient.js"
import { dispatch, type HttpCall, sourceOf, type Transport } from "./Transport.js"

/**
 * What `EventDecoder.event` returns for an event that only keeps the connection open (Anthropic's `ping`, a chunk that
 * says nothing) but is passed on: it is not content, as an event that gives nothing is not (see `Timeouts.idleMs`).
 */
export const KEEP_ALIVE = "keep-alive" as const

/**
 * What a stream's adapter makes of its server-sent events, as they arrive. Throwing an `UpstreamError` fails the
 * stream after the values decoded before it; anything else thrown is a defect.
 */
export interface EventDecoder<A> {
  /**
   * Decodes one event, appending to `out`; returns true to end the stream there (the rest is not read), `KEEP_ALIVE`
   * for a keep-alive it appended.
   */
  readonly event: (message: EventSourceMessage, out: Array<A>) => boolean | typeof KEEP_ALIVE | void
  /** The body has ended (and no event ended the stream): appends the last values, or throws. */
  readonly end: (out: Array<A>) => void
}

/** A carriage return: SSE lets it end a line alone. */
const CR = 0x0d

/** Bytes read ahead of the puller before the socket is paused: a `Readable`'s default high-water mark. */
const HIGH_WATER_MARK = 64 * 1024

/**
 * A stream whose last event came but not yet its body's end (the chunked encoding's last chunk, often in a network
 * read or a TLS record of its own) is read to that end rather than aborted, so that its connection goes back to the
 * pool: an aborted one is a new connection, a TLS handshake, for a later request. At most this long...
 */
export const DRAIN_MS = 1000
/** ...and this many bytes; past either, it is aborted after all. */
export const DRAIN_BYTES = 64 * 1024

/** The next values, or undefined at the end. */
export type Pull<A> = Effect.Effect<Chunk.Chunk<A> | undefined, Upstream.UpstreamError>

/** One streamed answer: decodes each network read's events at once, and hands them to the puller as one chunk. */
class EventStreamHandler<A> implements HttpClient.Handler {
  private abort: ((reason?: Error) => void) | undefined = undefined
  /** The request is over: its body was read to the end, it failed, or it was aborted. */
  private finished = false
  private closed = false
  private status = 0
  private headers: HttpClient.Headers | undefined = undefined
  private errorChunks: Array<Buffer> = []
  private errorLength = 0
  private resumeSocket: (() => void) | undefined = undefined
  private paused = false
  /** Bytes read since values were last pulled. */
  private unpulled = 0
  private readonly parser: EventSourceParser
  /** UTF-8 across reads; `StringDecoder` rather than `TextDecoder`, which costs some 2.5x as much per read. */
  private readonly decoder = new StringDecoder("utf8")
  private started = false
  /** The text fed so far ends with a CR: the parser holds its line until it knows whether a LF follows. */
  private endsWithCR = false
  /** Decoded values not yet pulled. */
  private out: Array<A> = []
  /** Delivered after `out`: the end of the stream, its failure, or a defect. */
  private ended = false
  private failure: Upstream.UpstreamError | undefined = undefined
  private defect: unknown = undefined
  private waiter: ((effect: Pull<A>) => void) | undefined = undefined
  /** The waiter's `until`: what one of the values must satisfy before it is given them (see `PullUntil`). */
  private stop: ((value: A) => boolean) | undefined = undefined
  /** How many of `out` were checked against `stop` already. */
  private checked = 0
  /** Pushing (see `push`): where the values go as they are decoded, and what ends the push. */
  private writer: Push.Writer<A> | undefined = undefined
  private endPush: ((effect: Effect.Effect<void, Upstream.UpstreamError>) => void) | undefined = undefined
  /** Closed after its last event, before its body's end: read to the end (see `DRAIN_MS`). */
  private drainTimer: NodeJS.Timeout | undefined = undefined
  private drained = 0
  /** Runs from the first wait for content (a pull until) until a value satisfies it (see `Timeouts.firstContentMs`). */
  private contentTimer: NodeJS.Timeout | undefined = undefined
  /** A value satisfied a pull until: the first content came. */
  private contentCame = false
  /** The first content did not come in time: the upstream may go on, so the request is aborted, not drained. */
  private late = false
  /** Re-arms the body's idle time-out (see `HttpClient.Handler.touches`): on every read until the first content. */
  readonly touches = true
  private touch: () => void = ignore
  /** An event of the read being decoded gave a value that is not a keep-alive. */
  private active = false

  private readonly source: ErrorSource

  constructor(call: HttpCall, private readonly decode: EventDecoder<A>, private readonly firstContentMs: number) {
    this.source = sourceOf(call)
    this.parser = createParser({ onEvent: (message) => this.onEvent(message) })
  }

  private get stopped(): boolean {
    return this.ended || this.failure !== undefined || this.defect !== undefined
  }

  /**
   * Only the body's end is left: the protocol's last event came, or an error event ended the answer (an in-band error,
   * after which the upstream ends its body; not an event that could not be read, a `transport` failure, after which it
   * may go on generating).
   */
  private get onlyEndLeft(): boolean {
    return this.ended || (this.failure !== undefined && this.failure.kind !== "transport" && !this.late)
  }

  private fail(error: unknown): void {
    if (error instanceof Upstream.UpstreamError) this.failure = error
    else this.defect = error
  }

  private onEvent(message: EventSourceMessage): void {
    if (this.stopped) return
    const out = this.out
    const before = out.length
    try {
      const decoded = this.decode.event(message, out)
      if (decoded === true) this.ended = true
      else if (decoded !== KEEP_ALIVE && out.length > before) this.active = true
    } catch (error) {
      this.fail(error)
    }
  }

  /** The text of one read; a byte order mark opening the body is dropped, as `TextDecoder` would. */
  private textOf(chunk: Buffer): string {
    const text = this.decoder.write(chunk)
    if (text.length > 0) this.endsWithCR = text.charCodeAt(text.length - 1) === CR
    if (this.started || text.length === 0) return text
    this.started = true
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text
  }

  private take(): Pull<A> | undefined {
    if (this.out.length > 0 && this.stopMet()) {
      const values = Chunk.unsafeFromArray(this.out)
      this.out = []
      this.checked = 0
      this.unpulled = 0
      return Effect.succeed(values)
    }
    if (this.failure !== undefined) return Effect.fail(this.failure)
    if (this.defect !== undefined) return Effect.die(this.defect)
    if (this.ended) return Effect.succeed(undefined)
    return undefined
  }

  /**
   * Whether the values decoded so far may be given: always to a plain pull; to a pull until, once one satisfies its
   * `stop`, once the stream is over, or once the read-ahead limit is reached (the socket is then about to pause, and
   * nothing more would come to satisfy it).
   */
  private stopMet(): boolean {
    const stop = this.stop
    if (stop === undefined || this.stopped || this.unpulled >= HIGH_WATER_MARK) return true
    const out = this.out
    try {
      for (; this.checked < out.length; this.checked++) {
        if (stop(out[this.checked]!)) {
          this.contentIn()
          return true
        }
      }
    } catch (error) {
      // A stop that throws is a defect of the stream, as a throw in the puller's own check would be.
      this.fail(error)
      return true
    }
    return false
  }

  private deliver(): void {
    if (this.writer !== undefined) return this.flush(this.writer)
    const waiter = this.waiter
    if (waiter === undefined) return
    const ready = this.take()
    if (ready === undefined) return
    this.waiter = undefined
    this.stop = undefined
    waiter(ready)
  }

  /**
   * The next values: those decoded since the last pull, or those of the next network read. An interrupted pull ends
   * the reading (the caller's scope then closes the request). So the wait has no canceler: a canceler makes Effect
   * wrap every wait in an uninterruptible region, some 5 instructions per chunk, and a resumption after the interruption
   * is ignored by the fiber anyway.
   */
  readonly pull: Pull<A> = Effect.suspend(() => this.next(undefined))

  /** The next values once one satisfies `stop` (see `PullUntil`); what `pull` gives otherwise. */
  readonly until: PullUntil.Until<A, Upstream.UpstreamError> = (stop) => Effect.suspend(() => this.next(stop))

  /** The first content came: its deadline is over. */
  private contentIn(): void {
    this.contentCame = true
    if (this.contentTimer !== undefined) {
      clearTimeout(this.contentTimer)
      this.contentTimer = undefined
    }
  }

  /** The first content did not come in time (see `Timeouts.firstContentMs`): the stream fails after what came. */
  contentLate(): void {
    this.contentTimer = undefined
    if (this.contentCame || this.stopped || this.finished) return
    this.late = true
    this.failure = new Upstream.UpstreamError({
      kind: "timeout",
      message: `upstream sent no content within ${this.firstContentMs} ms`
    })
    this.deliver()
  }

  private next(stop: ((value: A) => boolean) | undefined): Pull<A> {
    this.stop = stop
    if (stop !== undefined && !this.contentCame && this.contentTimer === undefined && this.firstContentMs > 0) {
      this.contentTimer = setTimeout(contentLate, this.firstContentMs, this)
    }
    const ready = this.take()
    if (ready === undefined) {
      return Effect.async<Chunk.Chunk<A> | undefined, Upstream.UpstreamError>((resume) => {
        this.waiter = resume
      })
    }
    this.stop = undefined
    // Only once the values are taken: resuming may read (and decode) the next data at once.
    if (this.paused) {
      this.paused = false
      this.resumeSocket?.()
    }
    return ready
  }

  /**
   * Hands the values decoded since the last pull or write to the writer, then the end or the failure, unless the
   * writer asked to wait: the socket is then paused until the writer resumes.
   */
  private flush(write: Push.Writer<A>): void {
    if (this.paused) return
    if (this.out.length > 0) {
      const values = this.out
      this.out = []
      this.unpulled = 0
      let more: boolean
      try {
        more = write(values, this.resumeWriter)
      } catch (error) {
        return this.finishPush(Effect.die(error))
      }
      if (!more) {
        this.paused = true
        return
      }
    }
    if (this.failure !== undefined) this.finishPush(Effect.fail(this.failure))
    else if (this.defect !== undefined) this.finishPush(Effect.die(this.defect))
    else if (this.ended) this.finishPush(Effect.void)
  }

  private finishPush(effect: Effect.Effect<void, Upstream.UpstreamError>): void {
    const end = this.endPush
    this.writer = undefined
    this.endPush = undefined
    end?.(effect)
  }

  /** The writer can take more: what was decoded meanwhile goes to it, then the socket reads on. */
  private readonly resumeWriter = (): void => {
    if (!this.paused || this.writer === undefined) return
    this.paused = false
    this.flush(this.writer)
    if (!this.paused) this.resumeSocket?.()
  }

  /**
   * Writes the values of each network read to `write` as soon as they are decoded, in the socket's callback: no
   * fiber is resumed per read. Its wait has no canceler, as a pull's has none: an interruption ends the writing
   * (`close` forgets the writer), and the scope's close aborts the request.
   */
  readonly push: Push.Push<A, Upstream.UpstreamError> = (write) =>
    Effect.async<void, Upstream.UpstreamError>((resume) => {
      if (this.closed) return
      this.writer = write
      this.endPush = resume
      // Paused by a pull's high-water mark: resumed as by the writer, which takes what is there first.
      if (this.paused) this.resumeWriter()
      else this.flush(write)
    })

  onConnect(abort: (reason?: Error) => void): void {
    if (this.closed) abort()
    else this.abort = abort
  }

  onHeaders(statusCode: number, headers: HttpClient.Headers, resume: () => void, touch: () => void): boolean {
    this.status = statusCode
    this.headers = headers
    this.resumeSocket = resume
    this.touch = touch
    return true
  }

  onData(chunk: Buffer): boolean {
    if (this.drainTimer !== undefined) {
      this.touch()
      this.drained += chunk.length
      if (this.drained > DRAIN_BYTES) this.abandon()
      return true
    }
    if (this.status >= 300) {
      this.touch()
      this.errorChunks.push(chunk)
      this.errorLength += chunk.length
      return true
    }
    if (this.stopped) {
      this.touch()
      return true
    }
    this.unpulled += chunk.length
    this.parser.feed(this.textOf(chunk))
    // Until the first content, every read (its pings: the first content has a deadline of its own); after it, only a
    // read that brought something other than keep-alives.
    if (this.active || !this.contentCame) {
      this.active = false
      this.touch()
    }
    if (this.writer !== undefined) {
      this.flush(this.writer)
      return !this.paused
    }
    this.deliver()
    // Back-pressure from the client, as a `Readable` body would apply it: past a high-water mark of values nobody has
    // pulled yet, the socket waits until they are.
    if (this.out.length > 0 && this.waiter === undefined && this.unpulled >= HIGH_WATER_MARK) this.paused = true
    return !this.paused
  }

  /**
   * Marks the request over: true when the stream is to hear how it ended; false when it was over already, or when a
   * drain was reading it (see `close`): drained, or cut by the upstream, nobody reads the stream any more.
   */
  private over(): boolean {
    if (this.finished) return false
    this.finished = true
    if (this.drainTimer === undefined) return true
    clearTimeout(this.drainTimer)
    return false
  }

  onComplete(): void {
    if (!this.over()) return
    if (this.status >= 300) {
      this.failure = errorFromResponse(
        this.source,
        this.status,
        this.headers,
        textOf(this.errorChunks, this.errorLength)
      )
      this.errorChunks = []
    } else if (!this.stopped) {
      const rest = this.decoder.end()
      if (rest.length > 0) this.endsWithCR = rest.charCodeAt(rest.length - 1) === CR
      this.parser.feed(rest)
      // A body whose last byte is a CR (SSE's bare CR line ends): the parser holds that line until it knows whether a
      // LF follows, and only the body's end says none will. A LF makes the CR end its line, as it did: an event whose
      // blank line that was is sent, and an event without one still is not.
      if (this.endsWithCR && !this.stopped) this.parser.feed("\n")
      if (!this.stopped) {
        try {
          this.decode.end(this.out)
          this.ended = true
        } catch (error) {
          this.fail(error)
        }
      }
    }
    this.deliver()
  }

  onError(error: Error): void {
    if (!this.over()) return
    if (this.status >= 300) {
      this.failure = errorFromResponse(this.source, this.status, this.headers, "")
      this.errorChunks = []
    } else if (!this.stopped) {
      this.failure = classifyThrown(error)
    }
    this.deliver()
  }

  /**
   * The stream's scope closed: aborts the request unless its body was read to the end, or reads it to the end when
   * only the end is left (its last event, or an in-band error, came: see `DRAIN_MS`).
   */
  close(): void {
    this.closed = true
    if (this.contentTimer !== undefined) clearTimeout(this.contentTimer)
    this.waiter = undefined
    this.writer = undefined
    this.endPush = undefined
    if (this.finished) return
    if (this.onlyEndLeft && this.status < 300 && this.abort !== undefined) {
      this.out = []
      this.drainTimer = setTimeout(abandonDrain, DRAIN_MS, this)
      if (this.paused) {
        this.paused = false
        this.resumeSocket?.()
      }
      return
    }
    this.finished = true
    this.abort?.()
  }

  /** A drain that took too long or read too much: aborted after all. */
  abandon(): void {
    if (this.finished) return
    this.finished = true
    clearTimeout(this.drainTimer)
    this.abort?.()
  }
}

const abandonDrain = (handler: { readonly abandon: () => void }): void => handler.abandon()

const ignore = (): void => {}

const contentLate = (handler: { readonly contentLate: () => void }): void => handler.contentLate()

/**
 * POSTs JSON and opens the server-sent events of the answer in the caller's scope: each pull gives the events decoded
 * by `decoder` since the previous pull (the events of one network read, or more when the reader is slower), or
 * undefined at the end. Closing the scope before the body has ended aborts the request. Back-pressure: once 64 KiB
 * have been read ahead of the reader, the socket waits until it pulls.
 */
export const openEventStream = <A>(
  transport: Transport,
  call: HttpCall,
  decoder: EventDecoder<A>
): Effect.Effect<Pull<A>, never, Scope.Scope> =>
  // The scope's finalizer first, then the request: an interruption in between closes a request never sent. Not
  // `Effect.acquireRelease`, which diffs and patches the fiber's refs (the whole runtime context) for its release. The
  // scope read from the fiber's context, which the type requires to hold one: `Effect.scopeWith` takes three Effect
  // steps to look it up, this one.
  Effect.withFiberRuntime((fiber) => {
    const scope = Context.get(fiber.currentContext as Context.Context<Scope.Scope>, Scope.Scope)
    const handler = new EventStreamHandler(call, decoder, transport.timeouts.firstContentMs)
    return Effect.zipRight(
      Scope.addFinalizer(scope, closing(handler)),
      Effect.sync(() => {
        dispatch(transport, call, handler)
        return Push.pushable(PullUntil.withUntil(handler.pull, handler.until), handler.push)
      })
    )
  })

/**
 * A stream's finalizer, made out of `openEventStream`'s closure: a closure there would share its context, which holds
 * the call and its body, for as long as the scope lives.
 */
const closing = <A>(handler: EventStreamHandler<A>): Effect.Effect<void> => Effect.sync(() => handler.close())
