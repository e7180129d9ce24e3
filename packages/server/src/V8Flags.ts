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
 * **The old generation grows by at most 2x its live size between two full collections** (`--heap-growing-percent=100`).
 * Under load, V8 lets it grow by up to 4x: the little a request leaves there (some 2–5 KB promoted, the requests alive
 * across two scavenges) piles up dead until the next full collection. With ~25 MB live, that was an old generation of
 * ~90 MB, more at higher rates, and an RSS peak of 179–286 MB over 60 s at 32 connections. At 2x: 132 MB,
 * at no CPU cost that a same-run A/B could tell apart (docs/benchmarks.md, log "the old generation's growth").
 *
 * A command line that names one of these flags, in either spelling, is left alone for that flag (Node refuses both in
 * `NODE_OPTIONS`, hence the call at start).
 */
import { setFlagsFromString } from "node:v8"

/** Each default flag, and what a node option naming the same flag looks like. */
const DEFAULTS: ReadonlyArray<{ readonly flag: string; readonly named: RegExp }> = [
  { flag: "--no-allocation-site-pretenuring", named: /^--(no-)?allocation[-_]site[-_]pretenuring$/ },
  { flag: "--heap-growing-percent=100", named: /^--heap[-_]growing[-_]percent(=|$)/ }
]

/** The V8 flags to set, given the process's own node options (`process.execArgv`): those it did not choose itself. */
export const flagsFor = (execArgv: ReadonlyArray<string>): ReadonlyArray<string> =>
  DEFAULTS.filter(({ named }) => !execArgv.some((arg) => named.test(arg))).map(({ flag }) => flag)

/** Sets the flags `flagsFor` gives for this process. */
export const apply = (): void => {
  for (const flag of flagsFor(process.execArgv)) setFlagsFromString(flag)
}
