// A diagnostic preload for a benchmark child: every second, one line appended to bench/.prof/heap-watch-<pid>.log with
// the process's RSS, V8's heap (committed, in use), external memory, and the committed size of each heap space, in MB.
// What a peak RSS is made of: the old generation's garbage between two full collections, or live data.
//
//   BENCH_GATEWAY_ARGS="--import $PWD/bench/heap-watch.mjs" BENCH_SCENARIOS=memory node bench/run.mjs
import { appendFileSync, mkdirSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { getHeapSpaceStatistics } from "node:v8"

const dir = join(dirname(fileURLToPath(import.meta.url)), ".prof")
mkdirSync(dir, { recursive: true })
const file = join(dir, `heap-watch-${process.pid}.log`)
const mb = (bytes) => Math.round(bytes / 2 ** 20)
appendFileSync(file, "seconds rss heapTotal heapUsed external | space:committed ...\n")
const start = Date.now()
setInterval(() => {
  const m = process.memoryUsage()
  const spaces = getHeapSpaceStatistics()
    .filter((s) => s.space_size > 0)
    .map((s) => `${s.space_name.replace(/_space$/, "")}:${mb(s.space_size)}`)
  const seconds = Math.round((Date.now() - start) / 1000)
  appendFileSync(file, `${seconds} ${mb(m.rss)} ${mb(m.heapTotal)} ${mb(m.heapUsed)} ${mb(m.external)} | ${spaces.join(" ")}\n`)
}, 1000).unref()
