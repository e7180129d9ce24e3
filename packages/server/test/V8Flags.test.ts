/** The gateway process turns V8's allocation-site pretenuring off, unless its command line chose either way. */
import { describe, expect, it } from "vitest"
import * as V8Flags from "../src/V8Flags.js"

describe("V8Flags.flagsFor", () => {
  it("turns allocation-site pretenuring off by default, whatever else the command line sets", () => {
    expect(V8Flags.flagsFor([])).toEqual(["--no-allocation-site-pretenuring"])
    expect(V8Flags.flagsFor(["--max-old-space-size=64", "--enable-source-maps"])).toEqual([
      "--no-allocation-site-pretenuring"
    ])
  })

  it("leaves the flag to a command line that names it, either way and in either spelling", () => {
    expect(V8Flags.flagsFor(["--allocation-site-pretenuring"])).toEqual([])
    expect(V8Flags.flagsFor(["--no-allocation-site-pretenuring"])).toEqual([])
    expect(V8Flags.flagsFor(["--allocation_site_pretenuring"])).toEqual([])
    expect(V8Flags.flagsFor(["--max-old-space-size=64", "--no-allocation_site_pretenuring"])).toEqual([])
  })

  it("does not take a longer flag that merely starts the same for it", () => {
    expect(V8Flags.flagsFor(["--allocation-site-pretenuring-x"])).toEqual(["--no-allocation-site-pretenuring"])
  })
})
