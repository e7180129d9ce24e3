import { describe, expect, it } from "vitest"
import { billedUsage, tokensOf } from "../../src/execution/UntoldUsage.js"

const told = { input: 100, output: 10, cacheRead: 0, cacheWrite: 0 }
const none = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }

describe("what a stream is billed", () => {
  it("a complete stream whose upstream told its usage: exactly that, whatever its content", () => {
    expect(billedUsage(told, true, 4_000, 8_000)).toBe(told)
  })

  it("a stream cut short: the input told stands, the output is the larger of the told and the estimate", () => {
    expect(billedUsage({ ...told, output: 1 }, false, 41, 8_000)).toEqual({ ...told, output: 11 })
    expect(billedUsage(told, false, 8, 8_000)).toEqual(told)
  })

  it("nothing told: the prompt estimated from the body's size, the output from the content carried", () => {
    expect(billedUsage(none, false, 400, 1_001)).toEqual({ input: 251, output: 100, cacheRead: 0, cacheWrite: 0 })
    // A complete stream from a server that tells no usage is estimated the same way.
    expect(billedUsage(none, true, 400, 1_001)).toEqual({ input: 251, output: 100, cacheRead: 0, cacheWrite: 0 })
    expect(billedUsage(none, false, 0, undefined)).toEqual(none)
  })

  it("a prompt told only as cache reads or writes is told: not estimated again", () => {
    const cached = { input: 0, output: 0, cacheRead: 900, cacheWrite: 0 }
    expect(billedUsage(cached, false, 40, 8_000)).toEqual({ ...cached, output: 10 })
  })

  it("four characters a token, rounded up", () => {
    expect([0, 1, 4, 5, 8].map(tokensOf)).toEqual([0, 1, 1, 2, 2])
  })
})
