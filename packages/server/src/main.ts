#!/usr/bin/env node
/**
 * The `model-gateway` process's entry: V8's flags first (V8Flags.ts: pretenuring off, the old generation's growth
 * bounded, the young generation kept small until the gateway listens), then the program (`Program.ts`), loaded only
 * now: a flag set after the modules have loaded would come after the allocations it is about.
 */
import * as V8Flags from "./V8Flags.js"

V8Flags.apply()
await import("./Program.js")
