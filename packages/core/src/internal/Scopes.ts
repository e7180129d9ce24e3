/**
 * Scope helpers for the hot path.
 *
 * `Effect.addFinalizer` (and `Effect.acquireRelease`, built on it) records the fiber's refs when it is added and diffs
 * and patches them twice when the finalizer runs: with the gateway's runtime context that is a walk over every
 * service, twice per finalizer, on every streamed request. A finalizer that needs none of the adding fiber's refs is
 * added to the enclosing scope directly instead.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"

/** Closes `inner` when the enclosing scope closes (without restoring the adding fiber's refs for it). */
export const closeWithEnclosing = (inner: Scope.CloseableScope): Effect.Effect<void, never, Scope.Scope> =>
  Effect.scopeWith((enclosing) => Scope.addFinalizer(enclosing, Scope.close(inner, Exit.void)))
