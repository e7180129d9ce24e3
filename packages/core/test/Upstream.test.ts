import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, Stream } from "effect"
import { pullStream, UpstreamError } from "../src/upstream/Upstream.js"

describe("Upstream.pullStream", () => {
  it.scoped("reads a stream's events in order, then undefined at its end", () =>
    Effect.gen(function*() {
      const pull = yield* pullStream(Stream.make({ type: "message_start" }, { type: "message_stop" }))
      const seen: Array<string> = []
      for (;;) {
        const chunk = yield* pull
        if (chunk === undefined) break
        for (const event of chunk) seen.push(event.type)
      }
      expect(seen).toEqual(["message_start", "message_stop"])
    }))

  it.scoped("gives the stream's failure after the events before it", () =>
    Effect.gen(function*() {
      const error = new UpstreamError({ kind: "transport", message: "cut" })
      const pull = yield* pullStream(Stream.concat(Stream.make({ type: "ping" }), Stream.fail(error)))
      const first = yield* pull
      expect(first === undefined ? [] : Chunk.toArray(first).map((e) => e.type)).toEqual(["ping"])
      expect(yield* Effect.either(pull)).toEqual(Either.left(error))
    }))
})
