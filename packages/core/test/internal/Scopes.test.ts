/**
 * `eitherIn`: the effect runs with the given scope as its Scope (what it adds there runs when that scope closes), its
 * failure is a `Left`, and the fiber's context is as before once it is done, whether it succeeded or failed. The effect
 * sees its scope alone: its type asks for nothing else, and a copy of the caller's context would cost every attempt.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Either, Exit, Option, Scope } from "effect"
import { eitherIn } from "../../src/internal/Scopes.js"

describe("Scopes.eitherIn", () => {
  it.effect("runs the effect in the scope given, and puts the context back after a success or a failure", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const inner = yield* Scope.make()
      const added = Effect.zipRight(
        Effect.addFinalizer(() => Effect.sync(() => log.push("released"))),
        Effect.succeed(42)
      )
      const result = yield* eitherIn(added, inner)
      assert.deepStrictEqual(result, Either.right(42))
      assert.isTrue(Option.isNone(yield* Effect.serviceOption(Scope.Scope)))
      assert.deepStrictEqual(log, [])
      yield* Scope.close(inner, Exit.void)
      assert.deepStrictEqual(log, ["released"])

      const failing = Effect.zipRight(Effect.scope, Effect.fail("refused" as const))
      assert.deepStrictEqual(yield* eitherIn(failing, yield* Scope.make()), Either.left("refused"))
      assert.isTrue(Option.isNone(yield* Effect.serviceOption(Scope.Scope)))
    }))

  it.scoped("inside a scope of its own: the effect sees the scope given, the caller its own again", () =>
    Effect.gen(function*() {
      const outer = yield* Effect.scope
      const inner = yield* Scope.make()
      const seen = yield* eitherIn(Effect.scope, inner)
      assert.strictEqual(Either.getOrThrow(seen), inner)
      assert.strictEqual(yield* Effect.scope, outer)
    }))

  it.effect("the effect's context is its scope alone; the caller's services are the caller's again after", () =>
    Effect.gen(function*() {
      class Marker extends Context.Tag("test/Marker")<Marker, string>() {}
      const inner = yield* Scope.make()
      const seen = yield* Effect.provideService(
        Effect.zip(eitherIn(Effect.serviceOption(Marker), inner), Marker),
        Marker,
        "the caller's"
      )
      assert.deepStrictEqual(seen, [Either.right(Option.none()), "the caller's"])
    }))
})
