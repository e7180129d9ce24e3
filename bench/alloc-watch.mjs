// A diagnostic preload for a benchmark child: V8's sampling heap profiler over the process's whole life, counting
// the objects collected since (young and old), so that the profile is what was allocated, not what is still held.
// Written at exit to bench/.prof/alloc-<pid>.heapprofile, with the number of HTTP requests the process served beside it
// (FILE.json, as bench/run.mjs writes for CPU profiles); `node bench/alloc-top.mjs` summarises it, per request.
//
//   BENCH_UNBUNDLED=1 BENCH_GATEWAY_ARGS="--import $PWD/bench/alloc-watch.mjs" \
//     BENCH_SCENARIOS=anthropic-stream BENCH_CONNECTIONS=32 BENCH_LATENCY=0 BENCH_TARGETS=direct,gateway node bench/run.mjs
// BENCH_ALLOC_INTERVAL: the mean bytes between samples (default 4096; smaller is finer and slower).
import { subscribe } from "node:diagnostics_channel"
import { Session } from "node:inspector"
import { mkdirSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { isMainThread } from "node:worker_threads"

if (isMainThread) {
  const dir = join(dirname(fileURLToPath(import.meta.url)), ".prof")
  mkdirSync(dir, { recursive: true })
  const session = new Session()
  session.connect()
  // The main thread's session dispatches synchronously: the profile can be taken in an exit handler.
  session.post("HeapProfiler.startSampling", {
    samplingInterval: Number(process.env.BENCH_ALLOC_INTERVAL ?? 4096),
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true
  })
  let requests = 0
  subscribe("http.server.request.start", () => requests++)
  process.on("exit", () => {
    session.post("HeapProfiler.stopSampling", (error, result) => {
      if (error) return console.error("[bench/alloc-watch]", error)
      const file = join(dir, `alloc-${process.pid}.heapprofile`)
      writeFileSync(file, JSON.stringify(result.profile))
      writeFileSync(`${file}.json`, JSON.stringify({ requests }))
    })
  })
}
