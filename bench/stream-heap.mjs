// What an open stream holds, by kind of object: a heap snapshot of a server with `BENCH_HEAP_STREAMS` (200) streams
// open through it, against one of the same process with none open, the difference per stream. The live state of the
// streams in flight is what each young-generation collection copies, and what is promoted when streams outlive a
// collection (at 256 connections they do: docs/benchmarks.md, "what 256 connections cost").
//
//   npm run build && node bench/stream-heap.mjs
//   BENCH_HEAP_STREAMS=500 BENCH_HEAP_TARGETS=gateway BENCH_HEAP_PROVIDER=openai BENCH_HEAP_TOP=40 node bench/stream-heap.mjs
//   BENCH_UNBUNDLED=1 BENCH_HEAP_KEEP=1 node bench/stream-heap.mjs   # the gateway's own names; the snapshots kept
//
// Each server (the gateway as `npm start` runs it, memory storage; the pipe-only proxy) runs in its own process, as in
// bench/run.mjs, so its snapshot holds its own objects only: not the client's, not the upstream's. It is warmed up
// first (JSON and streamed requests), then snapshot "idle"; then the streams are opened (the upstream sends 20 deltas
// 500 ms apart) and, once each client has its first content (or after 8 s; the report says how many had it, and how
// many the upstream held open), snapshot "open".
// Snapshots are taken after a full collection (V8 does one first): what is live, not what was allocated.
import { Agent } from "node:http"
import { mkdirSync, readFileSync, rmSync } from "node:fs"
import { join, relative, resolve as resolvePath } from "node:path"
import { fileURLToPath } from "node:url"
import { ask, callChild, fail, startChild, startGateway, stopChildren, tempDir } from "./children.mjs"
import { gatewayConfig } from "./fixtures.mjs"
import { send } from "./probes-latency.mjs"
import { requestFor } from "./requests.mjs"

const here = fileURLToPath(new URL(".", import.meta.url))
const STREAMS = Number(process.env.BENCH_HEAP_STREAMS ?? 200)
const TARGETS = (process.env.BENCH_HEAP_TARGETS ?? "gateway,proxy").split(",")
const PROVIDER = process.env.BENCH_HEAP_PROVIDER ?? "anthropic"
const TOP = Number(process.env.BENCH_HEAP_TOP ?? 25)
/** Keeps the snapshots in bench/.prof (git-ignored), to be read in Chrome's DevTools (Memory, Load): who retains what. */
const KEEP = process.env.BENCH_HEAP_KEEP === "1"
const PROFILE_DIR = join(here, ".prof")
const DELTAS = 20
const INTERVAL_MS = 500

/** Objects by kind: `object:Constructor`, `closure:name`, `hidden:system / Context`, or the node type alone. */
const summarise = (file) => {
  const snapshot = JSON.parse(readFileSync(file, "utf8"))
  const { node_fields: fields, node_types: types } = snapshot.snapshot.meta
  const typeNames = types[0]
  const width = fields.length
  const [typeAt, nameAt, sizeAt] = ["type", "name", "self_size"].map((f) => fields.indexOf(f))
  const { nodes, strings } = snapshot
  const kinds = new Map()
  let total = 0
  for (let i = 0; i < nodes.length; i += width) {
    const type = typeNames[nodes[i + typeAt]]
    const size = nodes[i + sizeAt]
    const named = type === "object" || type === "closure" || type === "hidden" || type === "native"
    const key = named ? `${type}:${strings[nodes[i + nameAt]].slice(0, 60)}` : type
    const entry = kinds.get(key) ?? { count: 0, size: 0 }
    entry.count++
    entry.size += size
    kinds.set(key, entry)
    total += size
  }
  return { kinds, total }
}

const snapshot = async (target, label) => {
  const file = join(KEEP ? PROFILE_DIR : tempDir(), `${target.name}-${label}.heapsnapshot`)
  await ask(target.child, { type: "call", name: "heapSnapshot", args: { file } }, 120_000)
  const summary = summarise(file)
  if (KEEP) console.log(`  ${target.name} ${label}: ${relative(process.cwd(), file)}`)
  else rmSync(file, { force: true })
  return summary
}

const warm = async (target, upstream) => {
  const agent = new Agent({ keepAlive: true, maxSockets: 16 })
  for (const stream of [false, true]) {
    const req = requestFor(target, PROVIDER, stream, upstream.url)
    for (let round = 0; round < 25; round++) {
      await Promise.all(Array.from({ length: 16 }, () => send(target, req, agent)))
    }
  }
  agent.destroy()
}

const measureTarget = async (target, upstream) => {
  await warm(target, upstream)
  const idle = await snapshot(target, "idle")
  await callChild(upstream.child, "configure", { deltas: DELTAS, intervalMs: INTERVAL_MS })
  await callChild(upstream.child, "resetStreams")
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity })
  const req = requestFor(target, PROVIDER, true, upstream.url)
  let firstContent = 0
  let markedAll
  const allHaveContent = new Promise((resolve) => (markedAll = resolve))
  const streams = Array.from({ length: STREAMS }, () => {
    let seen = false
    return send(target, req, agent, (chunk) => {
      if (seen || !/@@\d+@@/.test(chunk)) return
      seen = true
      if (++firstContent === STREAMS) markedAll()
    })
  })
  const timeout = setTimeout(() => markedAll(), 8_000)
  await allHaveContent
  clearTimeout(timeout)
  const { open: upstreamOpen } = await callChild(upstream.child, "streams")
  const open = await snapshot(target, "open")
  const results = await Promise.allSettled(streams)
  agent.destroy()
  await callChild(upstream.child, "configure", {})
  const complete = results.filter((r) => r.status === "fulfilled" && r.value.status === 200).length
  return { idle, open, firstContent, upstreamOpen, complete }
}

const report = (name, { idle, open, firstContent, upstreamOpen, complete }) => {
  console.log(
    `\n${name}: ${STREAMS} streams opened, ${firstContent} with content and ${upstreamOpen} open upstream at the ` +
      `snapshot, ${complete} complete; heap ${(idle.total / 1e6).toFixed(1)} MB idle, ` +
      `${(open.total / 1e6).toFixed(1)} MB open: ${((open.total - idle.total) / STREAMS / 1024).toFixed(1)} KB a stream`
  )
  const rows = []
  for (const [key, after] of open.kinds) {
    const before = idle.kinds.get(key) ?? { count: 0, size: 0 }
    rows.push({ key, count: (after.count - before.count) / STREAMS, size: (after.size - before.size) / STREAMS })
  }
  for (const [key, before] of idle.kinds) {
    if (!open.kinds.has(key)) rows.push({ key, count: -before.count / STREAMS, size: -before.size / STREAMS })
  }
  rows.sort((a, b) => b.size - a.size)
  console.log("  per stream:  objects     bytes  kind")
  for (const r of rows.slice(0, TOP)) {
    console.log(`  ${r.count.toFixed(1).padStart(16)} ${r.size.toFixed(0).padStart(9)}  ${r.key}`)
  }
}

const main = async () => {
  if (KEEP) mkdirSync(PROFILE_DIR, { recursive: true })
  const upstream = await startChild("upstream", "upstream.mjs")
  const env = { UPSTREAM_URL: upstream.url }
  for (const name of TARGETS) {
    const target = name === "gateway"
      ? await startGateway("gateway", resolvePath(here, ".."), gatewayConfig(upstream.url))
      : await startChild(name, `${name}.mjs`, env)
    report(name, await measureTarget(target, upstream))
  }
  await stopChildren()
  process.exit(0)
}

main().catch(fail)
