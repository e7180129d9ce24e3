/**
 * Pushing, an optional capability of a pull (`EventPull`, `JsonPull`, a dialect's `Pull`, a `FramePull`): the source
 * hands its values to a writer as they arrive, in the callback that read them, rather than resuming a fiber that pulls
 * for each network read. A stream written this way costs one Effect wait in all instead of a fiber resumption and its
 * instructions per read. A pull that lacks it (one that wraps another with `Effect.map`, say) is read by pulling, as
 * before: the capability is an optimisation, never a requirement.
 */
import type * as Chunk from "effect/Chunk"
import type * as Effect from "effect/Effect"

/**
 * Takes the next values of a pushed source, synchronously, as they arrive: an array the writer may keep (the source
 * makes a new one for its next values), not a `Chunk`, whose making and mapping would cost every network read of every
 * stream its allocations. Returning false asks the source to hand nothing more until `resume` is called (the client's
 * socket is full, say). A throw is a defect of the push. `last` says that the values hold the answer's end event or
 * come after it (a chat stream's usage chunk follows its finish): a writer may then hold them back to the end of its
 * turn, to send them with the end of its output in one piece.
 */
export type Writer<A> = (values: ReadonlyArray<A>, resume: () => void, last?: boolean) => boolean

/**
 * Writes the rest of a source's values to `write`, until its end (the effect succeeds) or its failure (the effect
 * fails). Interrupting it stops the writing; the source is released with the pull's scope, as when it is pulled.
 * Used instead of the pull, never beside it.
 */
export type Push<A, E> = (write: Writer<A>) => Effect.Effect<void, E>

const PushId: unique symbol = Symbol.for("@model-gateway/core/Push")

type Pull<A, E> = Effect.Effect<Chunk.Chunk<A> | undefined, E>

/**
 * `pull`, able to push as `push` does. `pull` itself is marked (no copy is made): it must be this source's own effect,
 * never one shared with others (such as `Effect.void`).
 */
export const pushable = <A, E>(pull: Pull<A, E>, push: Push<A, E>): Pull<A, E> =>
  Object.defineProperty(pull, PushId, { value: push, enumerable: false })

/** How `pull` pushes, if it can. */
export const pushOf = <A, E>(pull: Pull<A, E>): Push<A, E> | undefined =>
  (pull as { readonly [PushId]?: Push<A, E> })[PushId]
