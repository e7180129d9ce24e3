/**
 * A dialect: what the executor needs to know of one API's wire format (Anthropic messages, OpenAI chat completions,
 * embeddings, responses) to run attempts, fall back, commit a stream, decorate what the client receives and bill it.
 * The executor (`Attempts`, `StreamCommit`) is the same for every API; each use case gives it its dialect.
 */
import type * as Chunk from "effect/Chunk"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as GatewayError from "../errors/GatewayError.js"
import type { JsonObject } from "../messages/Wire.js"
import type * as Cost from "../pricing/Cost.js"
import type { Attempt } from "../routing/RoutePlanner.js"
import type { UpstreamError } from "../upstream/Upstream.js"
import type { Charge } from "./Charging.js"

/** A streamed answer being read: the events of one network read per pull, `undefined` at the end. */
export type Pull<E> = Effect.Effect<Chunk.Chunk<E> | undefined, UpstreamError>

/** What the frames of a committed stream have shown so far; read when its scope closes. */
export interface StreamState {
  /** The upstream's usage as the dialect keeps it (updated by the events that carry it). */
  usage: JsonObject
  /** The end event was seen: the stream is complete. */
  sawEnd: boolean
  /**
   * The characters of content (text, reasoning, tool arguments) the frames have carried so far, roughly: what a stream
   * whose upstream never told its usage is billed by (see `UntoldUsage`). Counted by the dialect's `frame`.
   */
  generated: number
  /**
   * One past the number of the last event framed, in a protocol that numbers its events (a Responses event's
   * `sequence_number`), 0 before any: the number its in-band error frame carries. Kept by the dialect's `frame`.
   */
  sequence: number
  /** The type of the in-band error frame sent, if any. */
  errorType: string | null
  failure: UpstreamError | undefined
  /**
   * The fields every frame of the stream repeats, as the dialect's frames noted them (a chat chunk's `id` and
   * `created`): its in-band error frame must repeat them too.
   */
  identity?: JsonObject | undefined
}

/** A stream's state before its first frame. */
export const streamState = (): StreamState => ({
  usage: {},
  sawEnd: false,
  generated: 0,
  sequence: 0,
  errorType: null,
  failure: undefined,
  identity: undefined
})

/** What decorating a frame may read: the attempt that answers, and the charge so far. */
export interface FrameContext {
  readonly attempt: Attempt
  readonly state: StreamState
  /** The charge of the usage seen so far (with earlier sub-requests'). */
  readonly charge: () => Charge
  /**
   * What the stream would be billed if it ended whole now: the usage seen so far when the upstream told some, else
   * estimated (see `UntoldUsage`: the prompt from the request's size, the output from the content so far).
   */
  readonly billed: () => Charge
  /** The pipeline so far, when the client asked for service metadata; undefined otherwise. */
  readonly pipeline: ReadonlyArray<unknown> | undefined
  readonly requestId: string
}

/** How one API's events are committed, decorated and ended. */
export interface FrameDialect<E> {
  /** The first event of real content: until it, lifecycle events are held back and a failure can fall back. */
  readonly isContent: (event: E) => boolean
  /** The event that completes an answer (`message_stop`, a finish reason): a stream without it ends in error. */
  readonly isEnd: (event: E) => boolean
  /**
   * One event as the client receives it (the SSE text); keeps the usage it carries, and adds the content it carries to
   * `generated`, in `context.state`.
   */
  readonly frame: (event: E, context: FrameContext) => string
  /** An in-band error frame, for a failure after content or an end without the end event. */
  readonly error: (error: GatewayError.GatewayError, requestId: string, context: FrameContext) => string
  /** Written after the last event of a complete stream and after an in-band error (`data: [DONE]`, or nothing). */
  readonly trailer: string
  /** The message of the in-band error when the upstream ends without the end event. */
  readonly unfinished: string
  /**
   * The id under which the upstream stored the answer an event describes, for a later request to continue it (a
   * Responses stream's `response.created`); absent for APIs that store nothing.
   */
  readonly storedAs?: ((event: E) => string | undefined) | undefined
}

/** One API's wire format as the executor sees it: `A` a JSON answer, `E` a stream event. */
export interface Dialect<A, E> {
  /** The JSON answer of an attempt. */
  readonly json: (attempt: Attempt) => Effect.Effect<A, UpstreamError>
  /** Opens an attempt's streamed answer in the caller's scope. */
  readonly open: (attempt: Attempt) => Effect.Effect<Pull<E>, UpstreamError, Scope.Scope>
  /** A JSON answer's usage, as billed. */
  readonly usage: (answer: A) => Cost.BilledUsage
  /**
   * The characters of content (text, reasoning, tool arguments) of a JSON answer: what it is billed by when its upstream
   * told no usage (see `UntoldUsage`). None counted when absent.
   */
  readonly generated?: ((answer: A) => number) | undefined
  /** A stream's usage (as `StreamState.usage` keeps it), as billed. */
  readonly streamUsage: (usage: JsonObject) => Cost.BilledUsage
  /** Work on a JSON answer before it is told (plugins, e.g. response healing); none by default. */
  readonly finish?: ((answer: A) => Effect.Effect<A>) | undefined
  /** A JSON answer as the client receives it: the answering model's id, the provider, the usage with its cost. */
  readonly respond: (
    answer: A,
    attempt: Attempt,
    charge: Charge,
    pipeline: ReadonlyArray<unknown> | undefined
  ) => JsonObject
  readonly frames: FrameDialect<E>
  /**
   * What the client is told of an upstream failure when nothing is left to try, or in band after content: its status
   * and type. `Upstream.toGatewayError` (the messages route's table) by default.
   */
  readonly failure?: ((error: UpstreamError) => GatewayError.GatewayError) | undefined
  /** The id under which the upstream stored a JSON answer (see `FrameDialect.storedAs`); absent where none is. */
  readonly storedAs?: ((answer: A) => string | undefined) | undefined
}
