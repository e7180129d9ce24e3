// The load runs: autocannon (in the benchmark's own process) against one target for one scenario, with the CPU time
// of the server under test read from inside its process before and after (CPU µs per request), and how much CPU the
// machine's other processes used meanwhile.
import autocannon from "autocannon"
import { readFileSync } from "node:fs"
import { callChild, children, sample } from "./children.mjs"
import { answerFormat, requestFor, withCodingSession } from "./requests.mjs"

/** "anthropic-json c32 0ms" (and " 200KB" with a coding session's body): what a scenario is called in the output. */
export const scenarioName = (s) =>
  `${s.provider}-${s.stream ? "stream" : "json"} c${s.connections} ${s.latencyMs}ms${s.bodyKb > 0 ? ` ${s.bodyKb}KB` : ""}`

/** Bodies of coding sessions made once per target kind and scenario kind (each a few hundred KB of JSON). */
const sessions = new Map()

/** The request of `target` in `scenario`: the fixture's, or with a coding session of `scenario.bodyKb` KB. */
const requestOf = (target, scenario, upstreamUrl) => {
  const req = requestFor(target, scenario.provider, scenario.stream, upstreamUrl)
  if (!(scenario.bodyKb > 0)) return req
  const key = `${target.name} ${scenario.provider} ${scenario.stream} ${scenario.bodyKb}`
  if (!sessions.has(key)) {
    sessions.set(key, withCodingSession(req, scenario.bodyKb, answerFormat(target, scenario.provider)))
  }
  return sessions.get(key)
}

/** One autocannon run; latencies of 2xx answers are kept at full resolution (autocannon's own are whole ms). */
export const load = (target, scenario, upstreamUrl, duration, connections = scenario.connections) =>
  new Promise((resolve, reject) => {
    const { path, headers, body } = requestOf(target, scenario, upstreamUrl)
    const latencies = []
    const instance = autocannon({
      url: `${target.url}${path}`,
      method: "POST",
      headers,
      body,
      connections,
      pipelining: 1,
      duration
    }, (error, result) => (error ? reject(error) : resolve({ result, latencies })))
    instance.on("response", (_client, statusCode, _bytes, responseTime) => {
      if (statusCode >= 200 && statusCode < 300) latencies.push(responseTime)
    })
  })

export const percentile = (sorted, p) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]

export const median = (values) => {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b)
  if (sorted.length === 0) return NaN
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

export const fmt = (n, digits) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a")
export const mb = (bytes) => (bytes / 1024 / 1024).toFixed(0)

/** Busy and total jiffies of the whole machine (Linux), to see what other processes used meanwhile. */
const machineTicks = () => {
  try {
    const fields = readFileSync("/proc/stat", "utf8").split("\n", 1)[0].trim().split(/\s+/).slice(1).map(Number)
    const [user, nice, system, , , irq, softirq, steal] = fields
    return { busy: user + nice + system + irq + softirq + steal }
  } catch {
    return undefined
  }
}
const TICK_US = 10_000 // USER_HZ = 100 on Linux

/** CPU µs used so far by this process and every child (the whole benchmark). */
const benchCpu = async () => {
  const own = process.cpuUsage()
  let total = own.user + own.system
  for (const child of children) total += (await sample(child)).cpu
  return total
}

export const warmUp = async (scenario, target, upstreamUrl, seconds) => {
  process.stdout.write(`  warm-up  ${scenarioName(scenario).padEnd(24)} ${target.name.padEnd(12)} ${seconds} s ... `)
  const { result } = await load(target, scenario, upstreamUrl, seconds)
  const bad = result.errors + result.timeouts + result.non2xx
  console.log(`${Math.round(result.requests.total / result.duration)} req/s${bad > 0 ? `, ${bad} errors/non-2xx` : ""}`)
  return { target: target.name, requests: result.requests.total }
}

/** One measured run of `target` in `scenario`: a row of the results. */
export const measure = async (scenario, target, upstream, round, rounds, duration) => {
  const name = scenarioName(scenario)
  process.stdout.write(`  round ${round}/${rounds} ${name.padEnd(24)} ${target.name.padEnd(12)} ${duration} s ... `)
  const upstreamBefore = await callChild(upstream.child, "requests")
  const allBefore = await benchCpu()
  const ticksBefore = machineTicks()
  const wallBefore = performance.now()
  const before = await sample(target.child, undefined, "start")
  // In µs of the machine's monotonic clock, the time base of V8's CPU profiles (bench/profile-top.mjs).
  const windowStart = Number(process.hrtime.bigint() / 1000n)
  const { result, latencies } = await load(target, scenario, upstream.url, duration)
  const windowEnd = Number(process.hrtime.bigint() / 1000n)
  const after = await sample(target.child, undefined, "end")
  const wallUs = (performance.now() - wallBefore) * 1000
  const ticksAfter = machineTicks()
  const allAfter = await benchCpu()
  const upstreamAfter = await callChild(upstream.child, "requests")
  const completed = result.requests.total
  latencies.sort((a, b) => a - b)
  const others = ticksBefore && ticksAfter
    ? Math.max(0, ((ticksAfter.busy - ticksBefore.busy) * TICK_US - (allAfter - allBefore)) / wallUs)
    : NaN
  const row = {
    scenario: name,
    provider: scenario.provider,
    stream: scenario.stream,
    connections: scenario.connections,
    latencyMs: scenario.latencyMs,
    target: target.name,
    round,
    requests: completed,
    rps: completed / result.duration,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    cpuPerRequest: completed === 0 ? NaN : (after.cpu - before.cpu) / completed,
    systemPerRequest: completed === 0 ? NaN : (after.system - before.system) / completed,
    rss: after.rss,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    upstreamRequests: upstreamAfter - upstreamBefore,
    others,
    window: [windowStart, windowEnd]
  }
  console.log(
    `${fmt(row.rps, 0).padStart(6)} req/s, p50 ${fmt(row.p50, 2)} ms, ${fmt(row.cpuPerRequest, 1)} µs CPU/req ` +
      `(kernel ${fmt(row.systemPerRequest, 1)}), ` +
      `rss ${mb(after.rss)} MB` + (row.errors + row.non2xx > 0 ? `, ${row.errors}/${row.non2xx} errors/non-2xx` : "") +
      (Number.isFinite(others) ? `, others ${others.toFixed(2)} cores` : "")
  )
  return row
}
