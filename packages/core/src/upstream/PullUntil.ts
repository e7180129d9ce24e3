/**
 * Pulling until, an optional capability of a pull, as pushing is (`Push`): `until(stop)` gives the values that have
 * arrived once one of them satisfies `stop`, or the stream has ended or failed, rather than those of each network
 * read. A streamed answer's attempt waits for its first content so (`StreamCommit`): one fiber resumption for the
 * events before it, where an upstream that writes `message_start`, `content_block_start` and `ping` apart would cost
 * one per read. A source may give its values before `stop` is met when it holds too many to wait on (its read-ahead
 * limit): the caller checks what it got and asks again. A pull that lacks it is pulled as before.
 */
import type * as Chunk from "effect/Chunk"
import type * as Effect from "effect/Effect"

type Pull<A, E> = Effect.Effect<Chunk.Chunk<A> | undefined, E>

/** The next values, not before one satisfies `stop` (or the end, a failure, or the source's read-ahead limit). */
export type Until<A, E> = (stop: (value: A) => boolean) => Pull<A, E>

const UntilId: unique symbol = Symbol.for("@model-gateway/core/PullUntil")

/**
 * `pull`, able to pull until as `until` does. `pull` itself is marked (no copy is made): it must be this source's own
 * effect, never one shared with others (such as `Effect.void`).
 */
export const withUntil = <A, E>(pull: Pull<A, E>, until: Until<A, E>): Pull<A, E> =>
  Object.defineProperty(pull, UntilId, { value: until, enumerable: false })

/** How `pull` pulls until, if it can. */
export const untilOf = <A, E>(pull: Pull<A, E>): Until<A, E> | undefined =>
  (pull as { readonly [UntilId]?: Until<A, E> })[UntilId]
