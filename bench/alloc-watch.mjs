// A diagnostic preload for a benchmark child: V8's sampling heap profiler over the process's whole life, counting
// the objects collected since (young and old), so that the profile is what was allocated, not what is still held.
// Written at exit to bench/.prof/alloc-<pid>.heapprofile, with the number of HTTP requests the process served beside it
// (FILE.json, as bench/run.mjs writes for CPU profiles); `node bench/alloc-top.mjs` summarises it, per request.
//
//   BENCH_UNBUNDLED=1 BENCH_GATEWAY_ARGS="--import $PWD/bench/alloc-watch.mjs" \
//     BENCH_SCENARIOS=anthropic-stream BENCH_CONNECTIONS=32 BENCH_LATENCY=0 BENCH_TARGETS=direct,gateway node bench/run.mjs
// BENCH_ALLOC_INTERVAL: the mean bytes between samples (default 4096; smaller is finer and slower).
//
// When bench/run.mjs marks its measured runs (the process's `bench:window` event, see bench/child.mjs), only the
// samples taken inside them are kept, over the requests served inside them: not the start-up (the loading of the
// modules), the checks or the warm-ups. A process whose runs were not marked (bench/growth.mjs) keeps every sample.
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
  /** The newest sample's ordinal: samples are numbered in the order they are taken. */
  const lastOrdinal = () => {
    let last = 0
    session.post("HeapProfiler.getSamplingProfile", (error, result) => {
      if (error) return console.error("[bench/alloc-watch]", error)
      for (const s of result.profile.samples) if (s.ordinal > last) last = s.ordinal
    })
    return last
  }
  let requests = 0
  let measuredRequests = 0
  let from
  const windows = []
  process.on("bench:window", (phase) => {
    if (phase === "start") from = lastOrdinal()
    else if (from !== undefined) {
      windows.push([from, lastOrdinal()])
      from = undefined
    }
  })
  subscribe("http.server.request.start", () => {
    requests++
    if (from !== undefined) measuredRequests++
  })
  process.on("exit", () => {
    session.post("HeapProfiler.stopSampling", (error, result) => {
      if (error) return console.error("[bench/alloc-watch]", error)
      const profile = result.profile
      if (windows.length > 0) keepWindows(profile, windows)
      const file = join(dir, `alloc-${process.pid}.heapprofile`)
      writeFileSync(file, JSON.stringify(profile))
      writeFileSync(
        `${file}.json`,
        JSON.stringify(
          windows.length > 0 ? { requests: measuredRequests, allRequests: requests, runs: windows.length } : { requests }
        )
      )
    })
  })
}

/**
 * Each node's own bytes made those of its samples inside the windows (ordinals `(from, to]`), but for what reading the
 * ordinals at a window's bounds allocated (the profile read through the inspector).
 */
function keepWindows(profile, windows) {
  const bytes = new Map()
  for (const s of profile.samples) {
    if (windows.some(([from, to]) => s.ordinal > from && s.ordinal <= to)) {
      bytes.set(s.nodeId, (bytes.get(s.nodeId) ?? 0) + s.size)
    }
  }
  const walk = (node, ours) => {
    const inspecting = ours || node.callFrame.url === "node:inspector"
    node.selfSize = inspecting ? 0 : bytes.get(node.id) ?? 0
    for (const child of node.children ?? []) walk(child, inspecting)
  }
  walk(profile.head, false)
  profile.samples = []
}
