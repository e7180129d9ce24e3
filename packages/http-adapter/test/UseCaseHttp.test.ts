import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { setFlagsFromString } from "node:v8"
import * as UseCaseHttp from "../src/UseCaseHttp.js"

describe("a streamed outcome's response", () => {
  const frames = Stream.make("data: a\n\n")
  let read = 0
  const outcome = {
    _tag: "Stream" as const,
    open: Effect.succeed(Effect.succeed(undefined)),
    claim: undefined,
    get frames() {
      read++
      return frames
    }
  }

  it("has the outcome's frames, read only when a binding asks for the stream", () => {
    const response = UseCaseHttp.responseOf(outcome, "req_1")
    expect(response.status).toBe(200)
    expect(response.headers["request-id"]).toBe("req_1")
    expect(read).toBe(0)
    if (response.body._tag !== "Stream") throw new Error("expected a stream body")
    expect(response.body.open).toBe(outcome.open)
    expect(response.body.stream).toBe(frames)
    expect(read).toBe(1)
  })

  it("has a body in V8's fast mode (a literal with a getter is a property dictionary, held by every open stream)", () => {
    setFlagsFromString("--allow-natives-syntax")
    const hasFastProperties = new Function("o", "return %HasFastProperties(o)") as (o: object) => boolean
    expect(hasFastProperties(UseCaseHttp.responseOf(outcome, "req_1").body)).toBe(true)
  })
})
