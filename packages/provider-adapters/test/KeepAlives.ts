/** Streams read against an upstream that only keeps them open after their first events (the fakes' `keepAliveStall`). */
import type { Upstream } from "@model-gateway/core"
import { PullUntil } from "@model-gateway/core"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Scope from "effect/Scope"
import type { FakeUpstream } from "./fakes/index.js"

/**
 * A stream of `open` on an upstream that sends `afterEvents` events, then only keep-alives (every 50 ms, for 5 s):
 * pulled until its first content as the executor does (see `PullUntil`), then plainly. What it gave before failing,
 * how, and when.
 */
export const afterKeepAlives = <A>(
  fake: FakeUpstream,
  afterEvents: number,
  open: Effect.Effect<
    Effect.Effect<Chunk.Chunk<A> | undefined, Upstream.UpstreamError>,
    Upstream.UpstreamError,
    Scope.Scope
  >,
  isContent: (value: A) => boolean
) =>
  Effect.scoped(Effect.gen(function*() {
    fake.script({ kind: "keepAliveStall", afterEvents })
    const started = Date.now()
    const pull = yield* open
    const values: Array<A> = []
    let next = PullUntil.untilOf(pull)!(isContent)
    for (;;) {
      const chunk = yield* Effect.either(next)
      if (Either.isLeft(chunk)) return { values, error: chunk.left, elapsed: Date.now() - started }
      if (chunk.right === undefined) return { values, error: undefined, elapsed: Date.now() - started }
      values.push(...Chunk.toReadonlyArray(chunk.right))
      next = pull
    }
  }))
