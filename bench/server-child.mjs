// Preloaded (`node --import bench/server-child.mjs packages/server/dist/bundle/model-gateway.js`) into the real gateway process, the
// one `npm start` runs, so that bench/run.mjs measures exactly that process: it speaks the children's IPC protocol of
// bench/child.mjs from inside it. The process reads its configuration from GATEWAY_CONFIG like any other start.
// Portkey's process (bench/portkey.mjs) is measured the same way; BENCH_LISTEN_LOOPBACK=1 makes its server, which
// listens on every interface, listen on 127.0.0.1 only.
//
//   child -> parent  { type: "ready", url }   once the gateway's HTTP server listens
//   parent -> child  { type: "cpu", id, window? } -> { type: "cpu", id, usage, heap, rss, peakRss } (see bench/child.mjs)
//   parent -> child  { type: "call", id, name: "heapSnapshot", args: { file } }
//                                             writes a heap snapshot to `file` (bench/stream-heap.mjs), -> { value: file }
//   parent -> child  { type: "shutdown" }     SIGTERM to itself: the gateway's own graceful shutdown, then exit 0
import { Server } from "node:net"
import { isMainThread } from "node:worker_threads"
import { commonCall, cpuSample } from "./child.mjs"

// A worker thread started with the process's command line (the default) loads this preload too: it has no server and
// no IPC channel, and must be left alone (an exit here ended the thread).
if (isMainThread) serve()

function serve() {
  if (process.send === undefined) {
    console.error("[bench/server-child] must be started by bench/run.mjs (needs an IPC channel)")
    process.exit(2)
  }

  // The first server that listens is the gateway's: report its address once it does.
  const listen = Server.prototype.listen
  Server.prototype.listen = function(...args) {
    Server.prototype.listen = listen
    // listen(port, hostname?, callback?) with no hostname: bind the loopback address instead of every interface.
    if (process.env.BENCH_LISTEN_LOOPBACK === "1" && typeof args[0] === "number" && typeof args[1] !== "string") {
      args = [args[0], "127.0.0.1", ...args.slice(typeof args[1] === "function" ? 1 : 2)]
    }
    this.once("listening", () => {
      const { address, port, family } = this.address()
      process.send({ type: "ready", url: `http://${family === "IPv6" ? `[${address}]` : address}:${port}` })
    })
    return listen.apply(this, args)
  }

  process.on("message", (message) => {
    switch (message?.type) {
      case "cpu":
        process.send(cpuSample(message.id, message.window))
        break
      case "call":
        process.send({ type: "call", id: message.id, value: commonCall(message) })
        break
      case "shutdown":
        process.kill(process.pid, "SIGTERM")
        break
    }
  })
  process.on("disconnect", () => process.kill(process.pid, "SIGTERM"))
  // The IPC channel must not keep the process alive once the gateway has stopped.
  process.channel?.unref()
}
