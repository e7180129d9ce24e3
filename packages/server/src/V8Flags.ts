/**
 * The V8 settings of the `model-gateway` process (`main.ts` applies them first, `Serve.ts` those of serving once it
 * listens). An embedder that runs the gateway in its own process chooses its own (README, "Memory").
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
 * **The young generation stays at its smallest until the gateway serves** (`--semi-space-growth-factor=1` at start,
 * V8's 2 again once it listens: `serving`). Start-up keeps much of what it allocates (modules, the storage's
 * migrations), so V8 doubles the young generation's semi-spaces at each scavenge, to 8 MB each. A process at rest gives
 * them back only when V8's memory reducer runs, some 9 s after start. Kept at 1 MB until serving, the idle RSS is
 * 65–69 / 70–71 / 72–74 MB (memory, SQLite, PostgreSQL storage) against 73–74 / 82–85 / 85, for the same start-up
 * time. Under load the young generation grows within the first second as before, to the same size
 * (docs/benchmarks.md, log "the young generation at start").
 *
 * A command line that names one of these flags, in either spelling, is left alone for that flag (Node refuses them
 * in `NODE_OPTIONS`, hence the call at start).
 */
import { setFlagsFromString } from "node:v8"

/**
 * Each default flag, what a node option naming the same flag looks like, and, for a flag of the start-up only, the
 * value it takes once the gateway serves.
 */
const DEFAULTS: ReadonlyArray<{ readonly flag: string; readonly named: RegExp; readonly serving?: string }> = [
  { flag: "--no-allocation-site-pretenuring", named: /^--(no-)?allocation[-_]site[-_]pretenuring$/ },
  { flag: "--heap-growing-percent=100", named: /^--heap[-_]growing[-_]percent(=|$)/ },
  {
    flag: "--semi-space-growth-factor=1",
    named: /^--semi[-_]space[-_]growth[-_]factor(=|$)/,
    // V8's default
    serving: "--semi-space-growth-factor=2"
  }
]

/** The defaults the process's own node options (`process.execArgv`) did not choose themselves. */
const unchosen = (execArgv: ReadonlyArray<string>) =>
  DEFAULTS.filter(({ named }) => !execArgv.some((arg) => named.test(arg)))

/** The V8 flags to set at start, given the process's own node options: those it did not choose itself. */
export const flagsFor = (execArgv: ReadonlyArray<string>): ReadonlyArray<string> =>
  unchosen(execArgv).map(({ flag }) => flag)

/** The V8 flags to set once the gateway serves: the start-up's own flags back to V8's defaults. */
export const servingFlagsFor = (execArgv: ReadonlyArray<string>): ReadonlyArray<string> =>
  unchosen(execArgv).flatMap(({ serving }) => (serving === undefined ? [] : [serving]))

/** Sets the flags `flagsFor` gives for this process. */
export const apply = (): void => {
  for (const flag of flagsFor(process.execArgv)) setFlagsFromString(flag)
}

/** Sets the flags `servingFlagsFor` gives for this process: the gateway listens, start-up is over. */
export const serving = (): void => {
  for (const flag of servingFlagsFor(process.execArgv)) setFlagsFromString(flag)
}
