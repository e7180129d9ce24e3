import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import { setFlagsFromString } from "node:v8"
import { tellResult } from "../../src/execution/Admission.js"
import type { FramePull } from "../../src/execution/Outcome.js"
import { streamOutcome } from "../../src/execution/Outcome.js"
import type { QuotaStatus } from "../../src/limits/Quotas.js"

describe("the limits' status told on an answer", () => {
  it.effect("a streamed outcome keeps its frames, made when read, and gets the status", () =>
    Effect.gen(function*() {
      let pulls = 0
      const pull: FramePull = Effect.sync(() => (pulls++ === 0 ? Chunk.of("data: a\n\n") : undefined))
      const quota: QuotaStatus = { requests: { limit: 10, remaining: 9, resetsAt: 60_000 } }
      const told = tellResult({
        outcome: streamOutcome(Effect.succeed(pull), undefined),
        answer: undefined,
        charge: undefined
      }, quota)
      const outcome = told.outcome
      assert.strictEqual(outcome._tag, "Stream")
      if (outcome._tag !== "Stream") return
      assert.deepStrictEqual(outcome.quota, quota)
      // Not pulled until the frames are read.
      assert.strictEqual(pulls, 0)
      const frames = yield* Stream.runCollect(outcome.frames)
      assert.deepStrictEqual(Chunk.toReadonlyArray(frames), ["data: a\n\n"])
    }))

  it.effect("a JSON outcome gets the status, its body unchanged", () =>
    Effect.sync(() => {
      const quota: QuotaStatus = { budget: { limit: 100, remaining: 50, resetsAt: 0 } }
      const body = { id: "msg_1" }
      const told = tellResult({ outcome: { _tag: "Json", body }, answer: undefined, charge: undefined }, quota)
      assert.deepStrictEqual(told.outcome, { _tag: "Json", body, quota })
    }))
})

describe("a streamed outcome", () => {
  it("is an object in V8's fast mode (a literal with a getter is a property dictionary, held by every open stream)", () => {
    setFlagsFromString("--allow-natives-syntax")
    const hasFastProperties = new Function("o", "return %HasFastProperties(o)") as (o: object) => boolean
    const outcome = streamOutcome(Effect.succeed(Effect.succeed(undefined)), undefined)
    assert.isTrue(hasFastProperties(outcome))
    // What the test tells apart: the object literal it replaced.
    assert.isFalse(hasFastProperties({
      _tag: "Stream",
      open: 1,
      claim: 2,
      get frames() {
        return 3
      }
    }))
  })
})
