// How many Effect instructions the fiber runtime executes per non-streaming request, through the real node
// server (compiled gateway, memory storage) against a local fake upstream, and which ones. Every instruction
// costs the runtime roughly 0.3-1 µs (more under load), so this count is the first thing to look at when the
// gateway's CPU per request grows. A diagnostic, not a benchmark: it patches the runtime to count.
//
//   npm run build && node bench/effect-ops.mjs            counts by instruction kind
//   node bench/effect-ops.mjs --detail                    and by the code each instruction runs
//   node bench/effect-ops.mjs --stream                    a streamed request (26 events) instead
import { Config, Gateway } from "@model-gateway/server"
import http from "node:http"
import { Agent, request } from "undici"
import { gatewayConfig, MESSAGE, requestBody, requestHeaders, SSE_EVENTS } from "./fixtures.mjs"

// The runtime's own module: the same instance the gateway's `effect` loads (the same file).
const { FiberRuntime } = await import(new URL("../node_modules/effect/dist/esm/internal/fiberRuntime.js", import.meta.url))

const detail = process.argv.includes("--detail")
const stream = process.argv.includes("--stream")
const kinds = new Map()
const sources = new Map()
let counting = false
let total = 0
let fibers = 0
const INSTRUCTIONS = [
  "Async", "Commit", "Failure", "OnFailure", "OnSuccess", "OnSuccessAndFailure", "Success", "Sync", "Tag",
  "UpdateRuntimeFlags", "While", "Iterator", "WithRuntime", "Yield", "RevertFlags"
]
for (const kind of INSTRUCTIONS) {
  const original = FiberRuntime.prototype[kind]
  if (original === undefined) continue
  FiberRuntime.prototype[kind] = function(instruction) {
    if (counting) {
      total++
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1)
      if (detail) {
        const code = instruction.commit ?? instruction.effect_instruction_i1 ?? instruction.effect_instruction_i0 ?? ""
        const key = `${kind.padEnd(20)} ${String(code).replace(/\s+/g, " ").slice(0, 100)}`
        sources.set(key, (sources.get(key) ?? 0) + 1)
      }
    }
    return original.call(this, instruction)
  }
}
const start = FiberRuntime.prototype.start
FiberRuntime.prototype.start = function(...args) {
  if (counting) fibers++
  return start.apply(this, args)
}

const text = JSON.stringify(MESSAGE)
const upstream = http.createServer((req, res) => {
  req.resume()
  req.on("end", () => {
    if (stream) {
      // One write per event, the event loop yielded in between: one network read per event, as bench/upstream.mjs.
      res.writeHead(200, { "content-type": "text/event-stream" })
      let i = 0
      const next = () => (i < SSE_EVENTS.length ? res.write(SSE_EVENTS[i++], () => setImmediate(next)) : res.end())
      next()
      return
    }
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
    res.end(text)
  })
})
await new Promise((resolve) => upstream.listen(0, "127.0.0.1", resolve))
const { config } = Config.decode(gatewayConfig(`http://127.0.0.1:${upstream.address().port}`))
const running = await Gateway.startServer(config, { host: "127.0.0.1", port: 0 })
const agent = new Agent()
const body = requestBody(stream)
const once = async () => {
  const response = await request(`${running.url}/v1/messages`, { method: "POST", headers: requestHeaders, body, dispatcher: agent })
  await response.body.text()
  if (response.statusCode !== 200) throw new Error(`status ${response.statusCode}`)
}
for (let i = 0; i < 200; i++) await once()
const N = 1_000
counting = true
for (let i = 0; i < N; i++) await once()
counting = false

console.log(
  `Effect instructions per ${stream ? "streamed " : ""}request: ${total / N} (fibers started per request: ${fibers / N})`
)
for (const [kind, n] of [...kinds].sort((a, b) => b[1] - a[1])) console.log(`  ${String(n / N).padStart(4)}  ${kind}`)
if (detail) {
  console.log("\nby the code they run:")
  for (const [key, n] of [...sources].sort((a, b) => b[1] - a[1])) console.log(`  ${String(n / N).padStart(4)}  ${key}`)
}
await running.close(100)
await agent.close()
upstream.close()
process.exit(0)
