// Summarises a V8 .cpuprofile (as written by `BENCH_CPU_PROF=1 npm run bench`): where the gateway's CPU
// goes by area (gateway code, effect, undici, node internals, GC), the hottest functions by self time,
// the gateway functions by inclusive time, and the hottest source lines of gateway code. Locations in
// compiled dist/*.js are mapped back to src/*.ts through the source maps next to them.
//
//   node bench/profile-top.mjs [file.cpuprofile] [--top N] [--area TEXT] [--requests N] [--whole] [--scenario TEXT]
// --area limits the "functions by self time" list to areas whose name contains TEXT (e.g. undici, effect).
// --requests gives the number of requests the profiled process answered, for µs/req columns; bench/run.mjs
// writes it next to its profiles (FILE.json), so it is needed only for other profiles (bench/handler.mjs:
// 8 rounds × BENCH_HANDLER_N + 1).
// bench/run.mjs also writes there when its measured runs began and ended (the profile's clock is the machine's
// monotonic one, as `process.hrtime` is): only the samples taken during them count then, the requests of those runs
// over the time they took, without the start-up, the checks, the warm-ups and the idle rounds of the other targets
// (which made a request look 20-40% dearer, the start-up's share mostly the loading of modules). --whole counts
// every sample, as for a profile without windows. --scenario keeps the measured runs of the scenarios whose name
// contains TEXT (e.g. "anthropic-stream c32"), for a profile of a run of several.
// Without a file, the newest profile in bench/.prof is used.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { areaOf, describe, isGatewayCode, keyOf, locate } from "./frames.mjs"

const here = dirname(fileURLToPath(import.meta.url))
const args = process.argv.slice(2)
const topIndex = args.indexOf("--top")
const TOP = topIndex === -1 ? 25 : Number(args.splice(topIndex, 2)[1])
const areaIndex = args.indexOf("--area")
const AREA = areaIndex === -1 ? undefined : args.splice(areaIndex, 2)[1]
const requestsIndex = args.indexOf("--requests")
const REQUESTS = requestsIndex === -1 ? undefined : Number(args.splice(requestsIndex, 2)[1])
const wholeIndex = args.indexOf("--whole")
const WHOLE = wholeIndex !== -1
if (WHOLE) args.splice(wholeIndex, 1)
const scenarioIndex = args.indexOf("--scenario")
const SCENARIO = scenarioIndex === -1 ? undefined : args.splice(scenarioIndex, 2)[1]
let file = args[0]
if (file === undefined) {
  const dir = join(here, ".prof")
  const newest = existsSync(dir)
    ? readdirSync(dir)
      .filter((f) => f.startsWith("gateway-") && f.endsWith(".cpuprofile"))
      .map((f) => ({ f: join(dir, f), t: statSync(join(dir, f)).mtimeMs }))
      .sort((a, b) => b.t - a.t)[0]
    : undefined
  if (newest === undefined) {
    console.error("no profile given and none in bench/.prof (run BENCH_CPU_PROF=1 npm run bench)")
    process.exit(2)
  }
  file = newest.f
}

const profile = JSON.parse(readFileSync(file, "utf8"))
// Written by bench/run.mjs next to the profile: how many requests the profiled process answered.
const meta = REQUESTS > 0
  ? { requests: REQUESTS, target: "given by --requests", scenarios: [] }
  : existsSync(`${file}.json`)
  ? JSON.parse(readFileSync(`${file}.json`, "utf8"))
  : undefined

const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
const parent = new Map()
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)

// Time per node, in µs: each sample counts for the time since the one before it, and only inside the measured runs
// when their windows are known (see the header).
const runs = WHOLE || !Array.isArray(meta?.runs)
  ? undefined
  : meta.runs.filter((r) => SCENARIO === undefined || r.scenario.includes(SCENARIO))
if (runs !== undefined && runs.length === 0) {
  console.error(`no measured run${SCENARIO === undefined ? "" : ` of a scenario matching "${SCENARIO}"`} in this profile`)
  process.exit(2)
}
const windows = runs?.map((r) => [r.from, r.to])
const inWindow = (t) => windows === undefined || windows.some(([from, to]) => t >= from && t <= to)
const hits = new Map()
/** Samples per node in all: a line's ticks (samples, not time) are scaled to the node's time inside the windows. */
const allSamples = new Map()
let t = profile.startTime
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i]
  const delta = profile.timeDeltas[i] ?? 0
  t += delta
  allSamples.set(id, (allSamples.get(id) ?? 0) + 1)
  if (!inWindow(t)) continue
  hits.set(id, (hits.get(id) ?? 0) + delta)
}
const served = runs === undefined ? meta?.requests : runs.reduce((sum, r) => sum + r.requests, 0)
const requests = served > 0 ? served : undefined
const measuredSeconds = windows === undefined
  ? (profile.endTime - profile.startTime) / 1e6
  : windows.reduce((sum, [from, to]) => sum + Math.max(0, Math.min(to, profile.endTime) - Math.max(from, profile.startTime)), 0) / 1e6

// ---- aggregate -------------------------------------------------------------------------------------

let busyUs = 0
const byArea = new Map()
const selfByFunction = new Map()
for (const [id, count] of hits) {
  const frame = nodes.get(id).callFrame
  const area = areaOf(frame)
  if (area === "idle") continue
  busyUs += count
  byArea.set(area, (byArea.get(area) ?? 0) + count)
  const key = keyOf(frame)
  const entry = selfByFunction.get(key) ?? { frame, count: 0 }
  entry.count += count
  selfByFunction.set(key, entry)
}

// Inclusive samples per function (a function on the stack twice counts once).
const subtotal = new Map()
const totalOf = (id) => {
  if (subtotal.has(id)) return subtotal.get(id)
  let sum = hits.get(id) ?? 0
  for (const c of nodes.get(id).children ?? []) sum += totalOf(c)
  subtotal.set(id, sum)
  return sum
}
const inclusive = new Map()
const rootNode = profile.nodes.find((n) => !parent.has(n.id))
const walk = (id, onStack) => {
  const node = nodes.get(id)
  const key = keyOf(node.callFrame)
  const first = !onStack.has(key)
  if (first) {
    const entry = inclusive.get(key) ?? { frame: node.callFrame, count: 0 }
    entry.count += totalOf(id)
    inclusive.set(key, entry)
    onStack.add(key)
  }
  for (const c of node.children ?? []) walk(c, onStack)
  if (first) onStack.delete(key)
}
walk(rootNode.id, new Set())

// Hot source lines of gateway code (self samples by line, from positionTicks).
const lines = new Map()
for (const n of profile.nodes) {
  if (!isGatewayCode(n.callFrame) || n.positionTicks === undefined) continue
  for (const { line, ticks } of n.positionTicks) {
    // The last mapping on the line: tsc emits one generated line per source line, near enough.
    const where = locate(n.callFrame.url, line - 1, 100_000)
    const entry = lines.get(where) ?? { where, fn: n.callFrame.functionName || "(anonymous)", count: 0 }
    const all = allSamples.get(n.id) ?? 0
    // Ticks are samples, not time: scaled to the node's time inside the windows.
    entry.count += all === 0 ? 0 : (ticks * (hits.get(n.id) ?? 0)) / all
    lines.set(where, entry)
  }
}

// ---- print -----------------------------------------------------------------------------------------

const pct = (count) => `${((100 * count) / busyUs).toFixed(1).padStart(5)}%`
const ms = (us) =>
  `${(us / 1000).toFixed(0).padStart(7)} ms` +
  (requests === undefined ? "" : ` ${(us / requests).toFixed(1).padStart(6)} µs/req`)

console.log(`profile: ${relative(process.cwd(), file)}`)
console.log(
  `  ${profile.samples.length} samples over ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s` +
    (windows === undefined ? "" : `, of them ${measuredSeconds.toFixed(1)} s in ${windows.length} measured run(s)`) +
    `: ${(busyUs / 1e6).toFixed(1)} s busy (percentages below are of busy time)`
)
console.log(
  requests === undefined
    ? "  (no request count next to the profile: µs/req not shown)\n"
    : `  ${requests} requests answered (${
      [meta.target, ...(runs === undefined ? meta.scenarios : [...new Set(runs.map((r) => r.scenario))])].join(", ")
    }): ` +
      `${(busyUs / requests).toFixed(1)} µs busy per request, ` +
      `${windows === undefined ? "start-up included" : "measured runs only"}\n`
)

console.log("self time by area")
for (const [area, count] of [...byArea].sort((a, b) => b[1] - a[1])) console.log(`  ${pct(count)} ${ms(count)}  ${area}`)

console.log(`\ntop ${TOP} functions by self time${AREA === undefined ? "" : ` in areas matching "${AREA}"`}`)
for (
  const { frame, count } of [...selfByFunction.values()]
    .filter((e) => AREA === undefined || areaOf(e.frame).includes(AREA))
    .sort((a, b) => b.count - a.count)
    .slice(0, TOP)
) {
  console.log(`  ${pct(count)} ${ms(count)}  [${areaOf(frame)}] ${describe(frame)}`)
}

console.log(`\ntop ${TOP} gateway functions by inclusive time (self + callees)`)
for (
  const { frame, count } of [...inclusive.values()]
    .filter((e) => isGatewayCode(e.frame))
    .sort((a, b) => b.count - a.count)
    .slice(0, TOP)
) {
  console.log(`  ${pct(count)} ${ms(count)}  ${describe(frame)}`)
}

console.log(`\ntop ${TOP} lines of gateway code by self time`)
for (const { where, fn, count } of [...lines.values()].sort((a, b) => b.count - a.count).slice(0, TOP)) {
  console.log(`  ${pct(count)} ${ms(count)}  ${where}  (${fn || "(anonymous)"})`)
}
