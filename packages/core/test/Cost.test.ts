import { describe, expect, it } from "@effect/vitest"
import * as Cost from "../src/pricing/Cost.js"

const pricing = { prompt: "0.000003", completion: "0.000015", request: "0", image: "0" }

describe("Cost", () => {
  it("computes exactly in decimal", () => {
    expect(Cost.cost(pricing, { input: 1000, output: 500, cacheRead: 0, cacheWrite: 0 })).toBe("0.0105")
  })

  it("never drifts where floating point would", () => {
    const tenth = { prompt: "0.1", completion: "0.2", request: "0", image: "0" }
    expect(0.1 + 0.2).not.toBe(0.3)
    expect(Cost.cost(tenth, { input: 1, output: 1, cacheRead: 0, cacheWrite: 0 })).toBe("0.3")
    expect(Cost.sumDecimals(Array.from({ length: 10 }, () => "0.1"))).toBe("1")
  })

  it("bills cache reads and writes at their own prices, defaulting to the prompt price", () => {
    const cached = { ...pricing, inputCacheRead: "0.0000003", inputCacheWrite: "0.00000375" }
    expect(Cost.cost(cached, { input: 100, output: 0, cacheRead: 1000, cacheWrite: 1000 })).toBe("0.00435")
    expect(Cost.cost(pricing, { input: 100, output: 0, cacheRead: 1000, cacheWrite: 0 })).toBe("0.0033")
  })

  it("adds the per-request and per-image prices", () => {
    const p = { prompt: "0", completion: "0", request: "0.005", image: "0.001" }
    expect(Cost.cost(p, { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, images: 3 })).toBe("0.008")
  })

  it("formats without exponent or trailing zeros", () => {
    expect(Cost.formatDecimal(Cost.parseDecimal("0.000000000001"))).toBe("0.000000000001")
    expect(Cost.formatDecimal(Cost.parseDecimal("12.500"))).toBe("12.5")
    expect(Cost.isDecimal("1e-6")).toBe(false)
  })
})
