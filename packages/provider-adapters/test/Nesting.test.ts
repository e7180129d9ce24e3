import { describe, expect, it } from "vitest"
import { MAX_UPSTREAM_DEPTH, tooDeep } from "../src/internal/Nesting.js"

const arrays = (n: number) => "[".repeat(n) + "]".repeat(n)
const objects = (n: number) => "{\"a\":".repeat(n) + "1" + "}".repeat(n)

describe("Nesting.tooDeep", () => {
  it("accepts exactly the limit and refuses one level more, arrays and objects alike", () => {
    expect(tooDeep(arrays(MAX_UPSTREAM_DEPTH))).toBe(false)
    expect(tooDeep(arrays(MAX_UPSTREAM_DEPTH + 1))).toBe(true)
    expect(tooDeep(objects(MAX_UPSTREAM_DEPTH))).toBe(false)
    expect(tooDeep(objects(MAX_UPSTREAM_DEPTH + 1))).toBe(true)
    expect(tooDeep(arrays(4), 3)).toBe(true)
    expect(tooDeep(arrays(3), 3)).toBe(false)
  })

  it("counts depth, not brackets: many siblings at one level are shallow", () => {
    expect(tooDeep(`[${Array.from({ length: 10_000 }, () => "[1]").join(",")}]`)).toBe(false)
  })

  it("does not count brackets inside strings, escaped quotes included", () => {
    const inString = JSON.stringify({ text: "[".repeat(10_000) + "\"" + "{".repeat(10_000) })
    expect(tooDeep(inString)).toBe(false)
    expect(tooDeep(`{"a":"\\\\",${arrays(300).slice(0, -1)}]}`, 256)).toBe(true)
  })
})
