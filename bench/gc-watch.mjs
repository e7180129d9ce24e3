// A diagnostic preload for a benchmark child: every 5 s, on standard error, the event loop's delay (p50, p99, max)
// and the garbage collections of those 5 s by kind (count, total and longest pause, how many paused over 1 ms).
// What a stream's inter-chunk delay is made of, when it is not the gateway's code:
//
//   BENCH_GATEWAY_ARGS="--import $PWD/bench/gc-watch.mjs" BENCH_SCENARIOS=interchunk node bench/run.mjs
import { constants, monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks"

const KINDS = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: "minor",
  [constants.NODE_PERFORMANCE_GC_MAJOR]: "major",
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: "incremental",
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: "weak callbacks"
}
const EVERY_MS = 5_000

let collections = new Map()
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const kind = KINDS[entry.detail?.kind] ?? String(entry.detail?.kind)
    const seen = collections.get(kind) ?? { count: 0, totalMs: 0, maxMs: 0, overOneMs: 0 }
    seen.count++
    seen.totalMs += entry.duration
    seen.maxMs = Math.max(seen.maxMs, entry.duration)
    if (entry.duration > 1) seen.overOneMs++
    collections.set(kind, seen)
  }
}).observe({ entryTypes: ["gc"] })

const delay = monitorEventLoopDelay({ resolution: 1 })
delay.enable()

const ms = (ns) => (ns / 1e6).toFixed(2)
setInterval(() => {
  const gc = [...collections].map(([kind, s]) =>
    `${kind} ${s.count}x, ${s.totalMs.toFixed(1)} ms, longest ${s.maxMs.toFixed(2)}, over 1 ms ${s.overOneMs}`
  )
  process.stderr.write(
    `[gc-watch ${process.pid}] loop delay p50 ${ms(delay.percentile(50))} p99 ${ms(delay.percentile(99))} max ` +
      `${ms(delay.max)} ms (1 ms resolution); gc: ${gc.join("; ") || "none"}\n`
  )
  delay.reset()
  collections = new Map()
}, EVERY_MS).unref()
