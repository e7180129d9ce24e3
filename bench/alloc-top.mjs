// Summarises a sampling heap profile written by bench/alloc-watch.mjs: what the process allocated over its life (the
// objects collected since included), by area, by function (self) and by gateway function (self + callees), in MB and,
// given the number of requests answered, in KB per request.
//
//   node bench/alloc-top.mjs [file.heapprofile] [--top N] [--requests N]
// --requests: the requests served, for the KB-per-request columns (by default, what alloc-watch.mjs counted).
// Without a file, the newest bench/.prof/alloc-*.heapprofile is used. Run the gateway unbundled (BENCH_UNBUNDLED=1)
// for frames named by source module. A profile of bench/run.mjs's load runs holds their measured runs only (see
// alloc-watch.mjs); any other holds the start-up's allocations too.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { areaOf, describe, isGatewayCode, keyOf } from "./frames.mjs"

const here = dirname(fileURLToPath(import.meta.url))
const args = process.argv.slice(2)
const option = (name, fallback) => {
  const i = args.indexOf(name)
  return i === -1 ? fallback : Number(args.splice(i, 2)[1])
}
const TOP = option("--top", 30)
let REQUESTS = option("--requests", undefined)
let file = args[0]
if (file === undefined) {
  const dir = join(here, ".prof")
  file = (existsSync(dir) ? readdirSync(dir) : [])
    .filter((f) => f.startsWith("alloc-") && f.endsWith(".heapprofile"))
    .map((f) => ({ f: join(dir, f), t: statSync(join(dir, f)).mtimeMs }))
    .sort((a, b) => b.t - a.t)[0]?.f
  if (file === undefined) {
    console.error("no profile given and none in bench/.prof (see bench/alloc-watch.mjs)")
    process.exit(2)
  }
}

const profile = JSON.parse(readFileSync(file, "utf8"))
// Written by bench/alloc-watch.mjs beside the profile: the requests the process served.
const meta = existsSync(`${file}.json`) ? JSON.parse(readFileSync(`${file}.json`, "utf8")) : {}
if (REQUESTS === undefined) REQUESTS = meta.requests
let total = 0
const byArea = new Map()
const self = new Map()
const inclusive = new Map()
// Returns the node's inclusive bytes; a function on the stack twice counts once.
const walk = (node, onStack) => {
  const frame = node.callFrame
  const key = keyOf(frame)
  total += node.selfSize
  byArea.set(areaOf(frame), (byArea.get(areaOf(frame)) ?? 0) + node.selfSize)
  const entry = self.get(key) ?? { frame, bytes: 0 }
  entry.bytes += node.selfSize
  self.set(key, entry)
  const first = !onStack.has(key)
  if (first) onStack.add(key)
  let sum = node.selfSize
  for (const child of node.children ?? []) sum += walk(child, onStack)
  if (first) {
    onStack.delete(key)
    const all = inclusive.get(key) ?? { frame, bytes: 0 }
    all.bytes += sum
    inclusive.set(key, all)
  }
  return sum
}
walk(profile.head, new Set())

const size = (bytes) =>
  `${(bytes / 2 ** 20).toFixed(1).padStart(8)} MB` +
  (REQUESTS === undefined ? "" : ` ${(bytes / 1024 / REQUESTS).toFixed(2).padStart(8)} KB/req`)
const pct = (bytes) => `${((100 * bytes) / total).toFixed(1).padStart(5)}%`

console.log(
  `profile: ${relative(process.cwd(), file)}: ${size(total)} allocated in all` +
    (meta.runs > 0 ? ` (${meta.runs} measured run(s) only, ${REQUESTS} requests)` : " (start-up included)")
)
console.log("\nby area (self)")
for (const [area, bytes] of [...byArea].sort((a, b) => b[1] - a[1])) console.log(`  ${pct(bytes)} ${size(bytes)}  ${area}`)
console.log(`\ntop ${TOP} functions by self allocation`)
for (const { frame, bytes } of [...self.values()].sort((a, b) => b.bytes - a.bytes).slice(0, TOP)) {
  console.log(`  ${pct(bytes)} ${size(bytes)}  [${areaOf(frame)}] ${describe(frame)}`)
}
console.log(`\ntop ${TOP} gateway functions by inclusive allocation (self + callees)`)
for (
  const { frame, bytes } of [...inclusive.values()].filter((e) => isGatewayCode(e.frame)).sort((a, b) =>
    b.bytes - a.bytes
  ).slice(0, TOP)
) {
  console.log(`  ${pct(bytes)} ${size(bytes)}  ${describe(frame)}`)
}
