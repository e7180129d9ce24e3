/**
 * What an execution answers: one JSON body, or SSE frames read as pulls (and, for bindings that take one, as a
 * `Stream`).
 */
import * as Channel from "effect/Channel"
import type * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { QuotaStatus } from "../limits/Quotas.js"
import type { JsonObject } from "../messages/Wire.js"
import type { Charge } from "./Charging.js"

/**
 * SSE frames being written: each pull gives the next frames (those of one upstream read, say; maybe none), or
 * `undefined` at the end, after which it is not pulled again. It never fails: a failure after content is an in-band
 * error frame. The pull of a committed stream whose upstream can push (see `Push`) can push its frames too: a binding
 * then pulls once (the frames held until the first content) and has the rest pushed, each upstream read's frames
 * written in the read's own callback.
 */
export type FramePull = Effect.Effect<Chunk.Chunk<string> | undefined>

export type Outcome =
  | {
    readonly _tag: "Json"
    readonly body: JsonObject
    /** What the answer was billed, exactly (the body's `usage.cost` is a JSON number). */
    readonly charge?: Charge | undefined
    /** What is left of the request's limits, when any applies (told in response headers). */
    readonly quota?: QuotaStatus | undefined
  }
  | {
    readonly _tag: "Stream"
    readonly quota?: QuotaStatus | undefined
    /**
     * Opens the frames in the caller's scope. Closing the scope releases the upstream request (aborting it if it is
     * still running) and records the usage. The fastest way to write them: a loop of pulls.
     */
    readonly open: Effect.Effect<FramePull, never, Scope.Scope>
    /**
     * The same frames without a scope, for a binding that releases them itself: the pull, and the release that the
     * binding runs once, however the writing ends (claim them uninterruptibly, with the release made sure at once; see
     * the node binding). Spares the binding a scope of its own for the stream. Use `open`, `claim` or `frames`, once.
     */
    readonly claim?: Effect.Effect<ClaimedFrames> | undefined
    /** The same frames as a `Stream`, for bindings that take one. Use `open`, `claim` or `frames`, once. */
    readonly frames: Stream.Stream<string>
  }

/** Frames claimed (see `Outcome`'s `claim`): the pull, and what releases the upstream request and records the usage. */
export interface ClaimedFrames {
  readonly pull: FramePull
  readonly release: Effect.Effect<void>
}

/** A streamed outcome (see `Outcome`): its frames as a `Stream` are made only when read. */
export const streamOutcome = (
  open: Effect.Effect<FramePull, never, Scope.Scope>,
  claim: Effect.Effect<ClaimedFrames> | undefined,
  quota?: QuotaStatus | undefined
): Outcome => new StreamOutcome(open, claim, quota)

/**
 * A class, not an object literal with a `frames` getter: V8 makes such a literal in dictionary mode, a property
 * dictionary of some 450 bytes that every open stream held. Not to be spread (the getter is the prototype's): a copy
 * with another `quota` is `streamOutcome(open, claim, quota)`.
 */
class StreamOutcome {
  readonly _tag = "Stream" as const
  constructor(
    readonly open: Effect.Effect<FramePull, never, Scope.Scope>,
    readonly claim: Effect.Effect<ClaimedFrames> | undefined,
    readonly quota: QuotaStatus | undefined
  ) {}
  get frames(): Stream.Stream<string> {
    return framesOf(this.open)
  }
}

/** The frames of `open` as a `Stream`: a channel that loops over the pulls. */
export const framesOf = (open: Effect.Effect<FramePull, never, Scope.Scope>): Stream.Stream<string> =>
  Stream.unwrapScoped(Effect.map(open, (pull) => {
    const loop: Channel.Channel<Chunk.Chunk<string>> = Channel.flatMap(
      Channel.fromEffect(pull),
      (frames) => frames === undefined ? Channel.void : Channel.zipRight(Channel.write(frames), loop)
    )
    return Stream.fromChannel(loop)
  }))
