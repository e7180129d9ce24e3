import { describe, expect, it } from "@effect/vitest"
import { fixedChunks } from "../src/internal/StatementChunks.js"

describe("fixedChunks", () => {
  it("keeps every item, in order, in chunks of 256, 64, 16, 4 or 1: at most five statement texts per table", () => {
    const sizes = new Set<number>()
    for (let n = 0; n <= 1_200; n++) {
      const items = Array.from({ length: n }, (_, i) => i)
      const chunks = fixedChunks(items)
      expect(chunks.flat()).toEqual(items)
      for (const chunk of chunks) sizes.add(chunk.length)
      // largest first, so a batch of n rows is a handful of statements
      expect(chunks.length).toBeLessThanOrEqual(Math.floor(n / 256) + 12)
    }
    expect([...sizes].sort((a, b) => a - b)).toEqual([1, 4, 16, 64, 256])
  })

  it("never makes a chunk larger than asked", () => {
    expect(fixedChunks(Array.from({ length: 100 }, (_, i) => i), 16).every((c) => c.length <= 16)).toBe(true)
  })
})
