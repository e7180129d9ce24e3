/**
 * The gateway process turns V8's allocation-site pretenuring off, bounds the old generation's growth and keeps the
 * young generation small until it serves, unless its node options chose a flag themselves.
 */
import { describe, expect, it } from "vitest"
import * as V8Flags from "../src/V8Flags.js"

const DEFAULTS = ["--no-allocation-site-pretenuring", "--heap-growing-percent=100", "--semi-space-growth-factor=1"]
const GROWTH = "--semi-space-growth-factor=1"

describe("V8Flags.flagsFor", () => {
  it("sets every flag by default, whatever else the node options set", () => {
    expect(V8Flags.flagsFor([])).toEqual(DEFAULTS)
    expect(V8Flags.flagsFor(["--max-old-space-size=64", "--enable-source-maps"])).toEqual(DEFAULTS)
  })

  it("leaves pretenuring to node options that name it, either way and in either spelling", () => {
    const growing = ["--heap-growing-percent=100", GROWTH]
    expect(V8Flags.flagsFor(["--allocation-site-pretenuring"])).toEqual(growing)
    expect(V8Flags.flagsFor(["--no-allocation-site-pretenuring"])).toEqual(growing)
    expect(V8Flags.flagsFor(["--allocation_site_pretenuring"])).toEqual(growing)
    expect(V8Flags.flagsFor(["--max-old-space-size=64", "--no-allocation_site_pretenuring"])).toEqual(growing)
  })

  it("leaves the heap's growth to node options that name it, in either spelling", () => {
    const pretenuring = ["--no-allocation-site-pretenuring", GROWTH]
    expect(V8Flags.flagsFor(["--heap-growing-percent=300"])).toEqual(pretenuring)
    expect(V8Flags.flagsFor(["--heap_growing_percent=50"])).toEqual(pretenuring)
    expect(V8Flags.flagsFor(["--heap-growing-percent"])).toEqual(pretenuring)
    expect(V8Flags.flagsFor(["--heap-growing-percent=0", "--allocation-site-pretenuring"])).toEqual([GROWTH])
  })

  it("keeps the young generation from growing until serving, then gives it V8's default growth back", () => {
    expect(V8Flags.servingFlagsFor([])).toEqual(["--semi-space-growth-factor=2"])
    expect(V8Flags.servingFlagsFor(["--heap-growing-percent=0", "--allocation-site-pretenuring"])).toEqual([
      "--semi-space-growth-factor=2"
    ])
  })

  it("leaves the young generation's growth to node options that name it, at start and once serving", () => {
    for (
      const chosen of ["--semi-space-growth-factor=4", "--semi_space_growth_factor=2", "--semi-space-growth-factor"]
    ) {
      expect(V8Flags.flagsFor([chosen])).toEqual(["--no-allocation-site-pretenuring", "--heap-growing-percent=100"])
      expect(V8Flags.servingFlagsFor([chosen])).toEqual([])
    }
  })

  it("does not take a longer flag that merely starts the same for one of its own", () => {
    expect(V8Flags.flagsFor(["--allocation-site-pretenuring-x"])).toEqual(DEFAULTS)
    expect(V8Flags.flagsFor(["--heap-growing-percentage=5"])).toEqual(DEFAULTS)
    expect(V8Flags.flagsFor(["--semi-space-growth-factors=5"])).toEqual(DEFAULTS)
  })
})
