// The child side of the benchmark's IPC protocol, shared by the upstream, proxy and gateway children.
//
//   child -> parent  { type: "ready", url }                 once the server listens
//   parent -> child  { type: "cpu", id, window? }           -> { type: "cpu", id, usage: process.cpuUsage(), heap, rss, peakRss }
//                                                            (`window`: "start" or "end" of a measured run, told to the
//                                                            process first as its `bench:window` event: alloc-watch.mjs)
//   parent -> child  { type: "call", id, name, args }       -> { type: "call", id, value } (child-specific extras, and
//                                                            `heapSnapshot` { file } in every child: see commonCall)
//   parent -> child  { type: "shutdown" }                   closes the server, then exits 0 (so --cpu-prof is written)
//
// A child also exits when the parent goes away (IPC disconnect) or on SIGINT/SIGTERM, always through
// process.exit so that a `--cpu-prof` profile is flushed.
import { writeHeapSnapshot } from "node:v8"

/**
 * The answer to `{ type: "cpu", id, window }`. heap: V8 heap in use; rss: resident set now; peakRss: the process's
 * high-water mark (getrusage maxrss); bytes. A measured run's start or end (`window`) is emitted on the process first
 * (`bench:window`), for a diagnostic preload to count that run alone (bench/alloc-watch.mjs).
 */
export const cpuSample = (id, window) => {
  // Whatever the listener does is outside the run: before the reading at its start, after it at its end.
  if (window === "start") process.emit("bench:window", window)
  const reading = cpuReading(id)
  if (window === "end") process.emit("bench:window", window)
  return reading
}

const cpuReading = (id) => ({
  type: "cpu",
  id,
  usage: process.cpuUsage(),
  heap: process.memoryUsage().heapUsed,
  rss: process.memoryUsage.rss(),
  peakRss: process.resourceUsage().maxRSS * 1024
})

/** What every child answers to `call`: `heapSnapshot` writes one to `args.file` and answers with it. */
export const commonCall = (message) =>
  message.name === "heapSnapshot" ? writeHeapSnapshot(message.args.file) : undefined

/**
 * @param {string} name
 * @param {() => Promise<{ url: string, close: () => Promise<void>, calls?: Record<string, (args: unknown) => unknown> }>} start
 */
export const serveChild = async (name, start) => {
  if (process.send === undefined) {
    console.error(`[bench/${name}] must be started by bench/run.mjs (needs an IPC channel)`)
    process.exit(2)
  }
  let running
  let exiting = false
  const exit = async (code) => {
    if (exiting) return
    exiting = true
    const timer = setTimeout(() => process.exit(code), 3_000)
    timer.unref()
    try {
      await running?.close()
    } catch {
      // closing is best effort
    }
    process.exit(code)
  }
  process.on("message", (message) => {
    switch (message?.type) {
      case "cpu":
        process.send(cpuSample(message.id, message.window))
        break
      case "call":
        process.send({
          type: "call",
          id: message.id,
          value: running?.calls?.[message.name]?.(message.args) ?? commonCall(message)
        })
        break
      case "shutdown":
        void exit(0)
        break
    }
  })
  process.on("disconnect", () => void exit(0))
  process.on("SIGINT", () => void exit(0))
  process.on("SIGTERM", () => void exit(0))
  try {
    running = await start()
  } catch (error) {
    console.error(`[bench/${name}] failed to start:`, error)
    process.exit(1)
  }
  process.send({ type: "ready", url: running.url })
}
