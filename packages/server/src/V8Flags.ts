/**
 * The V8 settings of the `model-gateway` process (`main.ts` applies them before it serves). An embedder that runs the
 * gateway in its own process chooses its own (README, "Memory").
 *
 * **Allocation-site pretenuring is turned off.** V8 watches the sites that allocate objects. When most of one site's
 * objects outlive a young-generation collection, V8 allocates that site's objects in the old generation directly.
 * A gateway's per-request objects live exactly that long: a request spans a collection or two, then dies. So
 * V8 pretenures some of their sites under load, and those objects die in the old generation. Until the next full
 * collection, these dead objects still point at the young objects they were given. Scavenges therefore keep those
 * young objects and promote them too.
 *
 * Measured at 32 connections (docs/benchmarks.md, log "allocation-site pretenuring"), with → without pretenuring:
 * - streams, promoted per scavenge (`--trace-gc-nvp`): 1.55 MB → 0.39 MB; scavenge pause 4.6 ms → 2.9 ms;
 * - CPU per request in same-run A/Bs: 0.91x for JSON, 0.81–0.85x for streams.
 *
 * A command line that names the flag either way (`--allocation-site-pretenuring` or its `--no-` form) is left alone.
 */
import { setFlagsFromString } from "node:v8"

const PRETENURING = /^--(no-)?allocation[-_]site[-_]pretenuring$/

/** The V8 flags to set, given the process's own node options (`process.execArgv`): those it did not choose itself. */
export const flagsFor = (execArgv: ReadonlyArray<string>): ReadonlyArray<string> =>
  execArgv.some((arg) => PRETENURING.test(arg)) ? [] : ["--no-allocation-site-pretenuring"]

/** Sets the flags `flagsFor` gives for this process. */
export const apply = (): void => {
  for (const flag of flagsFor(process.execArgv)) setFlagsFromString(flag)
}
