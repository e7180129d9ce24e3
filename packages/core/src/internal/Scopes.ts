/**
 * Scope helpers for the hot path.
 *
 * `Effect.addFinalizer` (and `Effect.acquireRelease`, built on it) records the fiber's refs when it is added and diffs
 * and patches them twice when the finalizer runs: with the gateway's runtime context that is a walk over every
 * service, twice per finalizer, on every streamed request. A finalizer that needs none of the adding fiber's refs is
 * added to the enclosing scope directly instead.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as Scope from "effect/Scope"

/** Closes `inner` when the enclosing scope closes (without restoring the adding fiber's refs for it). */
export const closeWithEnclosing = (inner: Scope.CloseableScope): Effect.Effect<void, never, Scope.Scope> =>
  Effect.scopeWith((enclosing) => Scope.addFinalizer(enclosing, Scope.close(inner, Exit.void)))

/**
 * `Effect.either(Scope.extend(effect, scope))`, without the acquire-use-release by which Effect provides a service
 * (`FiberRef.locally`: an uninterruptible region, the exit kept and matched, some 15 Effect instructions) on every
 * attempt of every streamed request: the context is set, `effect` run to its outcome, and the context put back.
 *
 * `effect` runs with `scope` as its whole context, all its type asks for: not the fiber's context with `scope` added,
 * whose copy (every service of the runtime, in a new `Map`) cost a streamed request some 3.5 KB and a walk over the
 * services. A fiber interrupted meanwhile (or dying of a defect) unwinds with that context, not its own: its caller
 * puts its own back when it fails (`StreamCommit.stream`'s `onExit`), before anything up the stack reads a service.
 */
export const eitherIn = <A, E>(
  effect: Effect.Effect<A, E, Scope.Scope>,
  scope: Scope.Scope
): Effect.Effect<Either.Either<A, E>> =>
  Effect.withFiberRuntime((fiber) => {
    const context = fiber.currentContext
    return Effect.zipRight(
      FiberRef.set(FiberRef.currentContext, Context.make(Scope.Scope, scope)),
      Effect.flatMap(
        // Its Scope is in the context now, which the type cannot tell.
        Effect.either(effect as Effect.Effect<A, E>),
        (result) => Effect.as(FiberRef.set(FiberRef.currentContext, context), result)
      )
    )
  })
