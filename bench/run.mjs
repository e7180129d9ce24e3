// `npm run bench`: the gateway's overhead budget, measured.
//
// Starts, each in its own process: a fake Anthropic upstream (bench/upstream.mjs), a pass-through
// node:http + undici proxy (bench/proxy.mjs) and the gateway process itself, what `npm start` runs
// (packages/server/dist/bundle/model-gateway.js with bench/server-child.mjs preloaded, configured by a file). Checks
// that the gateway answers correctly, warms every target up, then loads each target with autocannon
// (in this process) in a few interleaved rounds, and reads the CPU time of the server under test from
// inside its process (process.cpuUsage() over IPC, before and after each measured run) to report CPU
// µs per request. The table shows the median over rounds; the ratio is the median of the per-round
// gateway/proxy ratios (proxy and gateway measured back to back, under the same conditions).
//
// Budget (the issue): gateway CPU per non-streaming request <= 2x the proxy's, same run.
// A benchmark, not a test: it exits 0 when the budget is missed, and 1 only when something is broken
// (a child does not start, the gateway answers wrongly).
//
// Environment:
//   BENCH_DURATION     seconds of each measured run (default 6)
//   BENCH_WARMUP       seconds of each target's warm-up run, not measured (default 5; the JIT needs it)
//   BENCH_ROUNDS       measured runs per target, interleaved across targets (default 5)
//   BENCH_CONNECTIONS  concurrent connections of the load generator (default 32)
//   BENCH_SCENARIOS    comma-separated subset of "json,stream,batches" (default json,stream; batches runs
//                      bench/batches.mjs: a 5,000-request batch on one and three processes, see that file)
//   BENCH_BASELINE=DIR another checkout of this repository, built: its gateway process (DIR/packages/server/dist/
//                      main.js) runs as a fourth target, "baseline", and the run prints gateway/baseline (an A/B of
//                      two builds)
//   BENCH_CPU_PROF=1   run the gateway child with --cpu-prof into bench/.prof (summarise with
//                      `node bench/profile-top.mjs`); BENCH_CPU_PROF=proxy,gateway profiles both
//   BENCH_REQUEST_LOG=0 the gateway without its per-request log line (on by default, as in production)
//   BENCH_GATEWAY_ARGS node options for the gateway child, e.g. "--max-semi-space-size=4" (BENCH_BASELINE_ARGS: the
//                      baseline's)
//
// Memory: every server's resident set size is read inside its process, idle (started and settled for a second, no
// request yet) and at the end, with its peak over the whole run (getrusage maxrss).
import autocannon from "autocannon"
import { fork } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os"
import { dirname, join, relative, resolve as resolvePath } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { isDeepStrictEqual } from "node:util"
import { Agent, request } from "undici"
import {
  DELTAS,
  EXPECTED_COST,
  gatewayConfig,
  INPUT_TOKENS,
  MESSAGE,
  OUTPUT_TOKENS,
  requestBody,
  requestHeaders,
  SSE_EVENTS,
  TEXT,
  UPSTREAM_KEY
} from "./fixtures.mjs"

const here = dirname(fileURLToPath(import.meta.url))

const numberFromEnv = (name, fallback) => {
  const raw = process.env[name]
  if (raw === undefined || raw === "") return fallback
  const n = Number(raw)
  if (!Number.isFinite(n) || n <= 0) {
    console.error(`${name} must be a positive number, got ${JSON.stringify(raw)}`)
    process.exit(2)
  }
  return n
}

const DURATION = numberFromEnv("BENCH_DURATION", 6)
const WARMUP = numberFromEnv("BENCH_WARMUP", 5)
const ROUNDS = Math.round(numberFromEnv("BENCH_ROUNDS", 5))
const CONNECTIONS = Math.round(numberFromEnv("BENCH_CONNECTIONS", 32))
/** Another checkout, built, whose gateway runs as a fourth target "baseline": an A/B of two builds in one run. */
const BASELINE = process.env.BENCH_BASELINE || undefined
const ALL_SCENARIOS = (process.env.BENCH_SCENARIOS ?? "json,stream").split(",").map((s) => s.trim()).filter(Boolean)
/** `batches` is a benchmark of its own (bench/batches.mjs), run first when asked for; the others are HTTP loads. */
const BATCHES = ALL_SCENARIOS.includes("batches")
const SCENARIOS = ALL_SCENARIOS.filter((s) => s !== "batches")
// BENCH_CPU_PROF=1 profiles the gateway; a list ("proxy,gateway") names the children to profile.
const PROFILED = new Set(
  process.env.BENCH_CPU_PROF === "1"
    ? ["gateway"]
    : (process.env.BENCH_CPU_PROF ?? "").split(",").map((s) => s.trim()).filter((s) => s !== "" && s !== "0")
)
const PROFILE = PROFILED.size > 0
const PROFILE_DIR = join(here, ".prof")
const STAMP = new Date().toISOString().replace(/[-:]/g, "").replace(/\..*/, "")
const profileFile = (name) => join(PROFILE_DIR, `${name}-${STAMP}.cpuprofile`)
const profileArgs = (name) =>
  PROFILED.has(name) ? ["--cpu-prof", "--cpu-prof-dir", PROFILE_DIR, "--cpu-prof-name", `${name}-${STAMP}.cpuprofile`] : []
const BUDGET = 2
/** Node options for a child, from an environment variable (space-separated). */
const nodeArgs = (name) => (process.env[name] ?? "").split(" ").filter(Boolean)

for (const s of ALL_SCENARIOS) {
  if (s !== "json" && s !== "stream" && s !== "batches") {
    console.error(`BENCH_SCENARIOS: unknown scenario ${JSON.stringify(s)} (use json, stream, batches)`)
    process.exit(2)
  }
}

// ---------------------------------------------------------------------------------------------------
// children
// ---------------------------------------------------------------------------------------------------

/** @type {Set<import("node:child_process").ChildProcess>} */
const children = new Set()
let shuttingDown = false

const startChild = (name, file, env = {}, execArgv = []) =>
  new Promise((resolve, reject) => {
    const merged = { ...process.env, ...env }
    for (const key of Object.keys(merged)) if (merged[key] === undefined) delete merged[key]
    const child = fork(resolvePath(here, file), [], {
      env: merged,
      execArgv,
      // Standard output to /dev/null: the gateway logs a line per request, as in production, and its cost counts.
      stdio: ["ignore", "ignore", "inherit", "ipc"]
    })
    children.add(child)
    child.benchName = name
    const timer = setTimeout(() => reject(new Error(`${name} did not become ready within 30 s`)), 30_000)
    child.on("message", (message) => {
      if (message?.type === "ready") {
        clearTimeout(timer)
        resolve({ name, child, url: message.url })
      }
    })
    child.on("exit", (code, signal) => {
      children.delete(child)
      clearTimeout(timer)
      if (!shuttingDown) {
        const error = new Error(`${name} exited unexpectedly (code ${code}, signal ${signal})`)
        reject(error)
        fail(error)
      }
    })
  })

let nextId = 0
/** Asks a child something over IPC. */
const ask = (child, message) =>
  new Promise((resolve, reject) => {
    const id = ++nextId
    const timer = setTimeout(() => {
      child.off("message", onMessage)
      reject(new Error(`${child.benchName} did not answer ${message.type} within 10 s`))
    }, 10_000)
    const onMessage = (reply) => {
      if (reply?.id !== id) return
      clearTimeout(timer)
      child.off("message", onMessage)
      resolve(reply)
    }
    child.on("message", onMessage)
    child.send({ ...message, id })
  })

/** CPU time (user + system) the child has used so far, in µs, read inside the child. */
const cpuOf = async (child) => (await sample(child)).cpu

/** CPU µs so far, V8 heap in use, resident set size and its peak so far, read inside the child. */
const sample = async (child) => {
  const { usage, heap, rss, peakRss } = await ask(child, { type: "cpu" })
  return { cpu: usage.user + usage.system, heap, rss, peakRss }
}

const callChild = async (child, name) => (await ask(child, { type: "call", name })).value

/** Asks every child to exit (so a --cpu-prof profile gets written), then kills what is left. */
const stopChildren = async (graceMs) => {
  shuttingDown = true
  const exits = [...children].map((child) =>
    new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve()
      const timer = setTimeout(() => {
        child.kill("SIGKILL")
        resolve()
      }, graceMs)
      child.once("exit", () => {
        clearTimeout(timer)
        resolve()
      })
      try {
        child.send({ type: "shutdown" })
      } catch {
        child.kill("SIGTERM")
      }
    })
  )
  await Promise.all(exits)
}

let failing = false
const fail = async (error) => {
  if (failing) return
  failing = true
  console.error(`\nbench failed: ${error?.stack ?? error}`)
  await stopChildren(PROFILE ? 15_000 : 3_000)
  process.exit(1)
}

process.on("SIGINT", async () => {
  console.error("\ninterrupted; stopping children")
  await stopChildren(PROFILE ? 15_000 : 3_000)
  process.exit(130)
})
process.on("SIGTERM", async () => {
  await stopChildren(3_000)
  process.exit(143)
})
process.on("uncaughtException", fail)
process.on("unhandledRejection", fail)
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL")
  if (configDir !== undefined) rmSync(configDir, { recursive: true, force: true })
})

/** Where the gateway processes' configuration file is written (removed at exit). */
let configDir

/**
 * A gateway process, as `npm start` runs it: `packages/server/dist/bundle/model-gateway.js` of this checkout (or of `root`), its
 * configuration from a file (memory storage, one Anthropic provider at the fake upstream, one model, one key), and
 * bench/server-child.mjs preloaded to answer the benchmark over IPC. `BENCH_REQUEST_LOG=0`: LOG_LEVEL=warning, which
 * silences the per-request line.
 */
const startGateway = (name, root, upstreamUrl, execArgv) => {
  configDir ??= mkdtempSync(join(tmpdir(), "model-gateway-bench-"))
  const config = join(configDir, "gateway.config.json")
  if (!existsSync(config)) writeFileSync(config, JSON.stringify(gatewayConfig(upstreamUrl), null, 2))
  // The configuration file alone decides: none of the environment's overrides (PORT, DATABASE_URL, ...) applies.
  const env = {
    GATEWAY_CONFIG: config,
    LOG_FORMAT: "logfmt",
    LOG_LEVEL: process.env.BENCH_REQUEST_LOG === "0" ? "warning" : "info",
    PORT: undefined,
    HOST: undefined,
    DATABASE_URL: undefined,
    GATEWAY_API_KEY: undefined
  }
  // The bundled server, as `npm start` runs it; a checkout from before the bundle (2026-11-24): its dist/main.js.
  const bundled = resolvePath(root, "packages/server/dist/bundle/model-gateway.js")
  const main = existsSync(bundled) ? bundled : resolvePath(root, "packages/server/dist/main.js")
  if (!existsSync(main)) throw new Error(`${main} does not exist: build that checkout first (npm run build)`)
  const preload = ["--import", pathToFileURL(join(here, "server-child.mjs")).href]
  return startChild(name, main, env, [...execArgv, ...preload])
}

// ---------------------------------------------------------------------------------------------------
// correctness checks (before anything is measured)
// ---------------------------------------------------------------------------------------------------

const checkAgent = new Agent({ connections: 1 })

const post = async (url, stream) => {
  const response = await request(`${url}/v1/messages`, {
    method: "POST",
    headers: requestHeaders,
    body: requestBody(stream),
    dispatcher: checkAgent
  })
  return { status: response.statusCode, headers: response.headers, text: await response.body.text() }
}

/** Parses an SSE body into [{ event, data }]. */
const parseSse = (text) =>
  text.split("\n\n").filter((block) => block.trim() !== "").map((block) => {
    let event
    const data = []
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) event = line.slice(6).trim()
      else if (line.startsWith("data:")) data.push(line.slice(5).trimStart())
    }
    return { event, data: JSON.parse(data.join("\n")) }
  })

const expectOk = (what, got, contentType) => {
  if (got.status !== 200) {
    throw new Error(`${what}: expected status 200, got ${got.status}: ${got.text.slice(0, 500)}`)
  }
  const type = String(got.headers["content-type"] ?? "")
  if (!type.startsWith(contentType)) throw new Error(`${what}: expected content-type ${contentType}, got ${type}`)
}

const show = (value) => (value === undefined ? "undefined" : JSON.stringify(value)?.slice(0, 300))

/** Throws "<what>: <field>: expected …, got …" unless actual deep-equals expected. */
const expect = (what) => (field, actual, expected) => {
  if (!isDeepStrictEqual(actual, expected)) {
    throw new Error(`${what}: ${field}: expected ${show(expected)}, got ${show(actual)}`)
  }
}

/** The upstream's view of the last request: what the gateway (or proxy) actually sent. */
const checkForwarded = async (upstream, what, stream) => {
  const last = await callChild(upstream.child, "last")
  const eq = expect(`${what}, request as the upstream received it`)
  eq("path", last.url, "/v1/messages")
  eq("x-api-key", last.headers["x-api-key"], UPSTREAM_KEY)
  eq("anthropic-version", last.headers["anthropic-version"], "2023-06-01")
  const body = JSON.parse(last.body)
  eq("max_tokens", body.max_tokens, 64)
  eq("messages", body.messages, [{ role: "user", content: "Hello, world" }])
  if (what.startsWith("gateway") || what.startsWith("baseline")) {
    eq("model (the endpoint's upstream model id)", body.model, "m")
    eq("stream", body.stream, stream)
  }
}

/** The gateway under test, or the baseline build it is compared with (`BENCH_BASELINE`). */
const isGateway = (target) => target.name === "gateway" || target.name === "baseline"

const checkJson = async (target, upstream) => {
  const what = `${target.name} (non-streaming)`
  const got = await post(target.url, false)
  expectOk(what, got, "application/json")
  const body = JSON.parse(got.text)
  const eq = expect(what)
  if (!isGateway(target)) {
    eq("body", body, MESSAGE)
  } else {
    for (const field of ["id", "type", "role", "content", "stop_reason", "stop_sequence"]) {
      eq(field, body[field], MESSAGE[field])
    }
    eq("model", body.model, "bench/model")
    eq("usage.input_tokens", body.usage?.input_tokens, INPUT_TOKENS)
    eq("usage.output_tokens", body.usage?.output_tokens, OUTPUT_TOKENS)
    eq("usage.cache_creation_input_tokens", body.usage?.cache_creation_input_tokens, 0)
    eq("usage.cache_read_input_tokens", body.usage?.cache_read_input_tokens, 0)
    eq("usage.cost", body.usage?.cost, EXPECTED_COST)
  }
  if (target.name !== "direct") await checkForwarded(upstream, what, false)
}

const checkStream = async (target, upstream) => {
  const what = `${target.name} (streaming)`
  const got = await post(target.url, true)
  expectOk(what, got, "text/event-stream")
  const eq = expect(what)
  if (!isGateway(target)) {
    eq("body", got.text, SSE_EVENTS.join(""))
  } else {
    const events = parseSse(got.text)
    const types = events.map((e) => e.data.type)
    eq("event names (must equal data.type)", events.map((e) => e.event), types)
    if (types.includes("error")) throw new Error(`${what}: in-band error event: ${got.text.slice(0, 500)}`)
    eq("first event", types[0], "message_start")
    eq("last event", types.at(-1), "message_stop")
    eq("message_start model", events[0].data.message?.model, "bench/model")
    const deltas = events.filter((e) => e.data.type === "content_block_delta")
    eq("content_block_delta count", deltas.length, DELTAS.length)
    eq("text", deltas.map((e) => e.data.delta?.text).join(""), TEXT)
    const messageDelta = events.find((e) => e.data.type === "message_delta")
    eq("message_delta usage.output_tokens", messageDelta?.data.usage?.output_tokens, OUTPUT_TOKENS)
    eq("message_delta usage.cost", messageDelta?.data.usage?.cost, EXPECTED_COST)
  }
  if (target.name !== "direct") await checkForwarded(upstream, what, true)
}

// ---------------------------------------------------------------------------------------------------
// load
// ---------------------------------------------------------------------------------------------------

/** One autocannon run; latencies of 2xx answers are kept at full resolution (autocannon's own are whole ms). */
const load = (url, body, duration) =>
  new Promise((resolve, reject) => {
    const latencies = []
    const instance = autocannon({
      url: `${url}/v1/messages`,
      method: "POST",
      headers: requestHeaders,
      body,
      connections: CONNECTIONS,
      pipelining: 1,
      duration
    }, (error, result) => (error ? reject(error) : resolve({ result, latencies })))
    instance.on("response", (_client, statusCode, _bytes, responseTime) => {
      if (statusCode >= 200 && statusCode < 300) latencies.push(responseTime)
    })
  })

const percentile = (sorted, p) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]

const median = (values) => {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b)
  if (sorted.length === 0) return NaN
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** Busy and total jiffies of the whole machine (Linux), to see what other processes used meanwhile. */
const machineTicks = () => {
  try {
    const fields = readFileSync("/proc/stat", "utf8").split("\n", 1)[0].trim().split(/\s+/).slice(1).map(Number)
    const [user, nice, system, idle, iowait, irq, softirq, steal] = fields
    return { busy: user + nice + system + irq + softirq + steal, total: fields.slice(0, 8).reduce((a, b) => a + b, 0) }
  } catch {
    return undefined
  }
}
const TICK_US = 10_000 // USER_HZ = 100 on Linux

/** CPU µs used so far by this process and every child (the whole benchmark). */
const benchCpu = async () => {
  const own = process.cpuUsage()
  let total = own.user + own.system
  for (const child of children) total += await cpuOf(child)
  return total
}

const warmUp = async (scenario, target) => {
  process.stdout.write(`  warm-up  ${scenario.padEnd(6)} ${target.name.padEnd(8)} ${WARMUP} s ... `)
  const { result } = await load(target.url, requestBody(scenario === "stream"), WARMUP)
  const bad = result.errors + result.timeouts + result.non2xx
  console.log(`${Math.round(result.requests.total / result.duration)} req/s${bad > 0 ? `, ${bad} errors/non-2xx` : ""}`)
  return { target: target.name, requests: result.requests.total }
}

const measure = async (scenario, target, upstream, round) => {
  const body = requestBody(scenario === "stream")
  process.stdout.write(`  round ${round}/${ROUNDS} ${scenario.padEnd(6)} ${target.name.padEnd(8)} ${DURATION} s ... `)
  const upstreamBefore = await callChild(upstream.child, "requests")
  const allBefore = await benchCpu()
  const ticksBefore = machineTicks()
  const wallBefore = performance.now()
  const before = await sample(target.child)
  const { result, latencies } = await load(target.url, body, DURATION)
  const after = await sample(target.child)
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
    scenario,
    target: target.name,
    round,
    requests: completed,
    rps: completed / result.duration,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    cpuPerRequest: completed === 0 ? NaN : (after.cpu - before.cpu) / completed,
    heapBefore: before.heap,
    heapAfter: after.heap,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    upstreamRequests: upstreamAfter - upstreamBefore,
    others
  }
  console.log(
    `${fmt(row.rps, 0).padStart(6)} req/s, p50 ${fmt(row.p50, 2)} ms, ${fmt(row.cpuPerRequest, 1)} µs CPU/req, ` +
      `heap ${mb(before.heap)}->${mb(after.heap)} MB` +
      (Number.isFinite(others) ? `, other processes ${others.toFixed(2)} cores` : "")
  )
  return row
}

// ---------------------------------------------------------------------------------------------------
// report
// ---------------------------------------------------------------------------------------------------

const fmt = (n, digits) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a")
const mb = (bytes) => (bytes / 1024 / 1024).toFixed(0)

/** One row per (scenario, target): the median over rounds of each column, errors summed. */
const summarise = (rows) => {
  const keys = [...new Set(rows.map((r) => `${r.scenario} ${r.target}`))]
  return keys.map((key) => {
    const runs = rows.filter((r) => `${r.scenario} ${r.target}` === key)
    return {
      scenario: runs[0].scenario,
      target: runs[0].target,
      rps: median(runs.map((r) => r.rps)),
      p50: median(runs.map((r) => r.p50)),
      p99: median(runs.map((r) => r.p99)),
      cpuPerRequest: median(runs.map((r) => r.cpuPerRequest)),
      cpuRounds: runs.map((r) => r.cpuPerRequest),
      errors: runs.reduce((n, r) => n + r.errors, 0),
      non2xx: runs.reduce((n, r) => n + r.non2xx, 0)
    }
  })
}

const table = (rows) => {
  const header = ["scenario", "target", "req/s", "p50 ms", "p99 ms", "CPU µs/req", "errors/non-2xx"]
  const lines = rows.map((r) => [
    r.scenario === "json" ? "non-streaming" : "streaming",
    r.target,
    fmt(r.rps, 0),
    fmt(r.p50, 2),
    fmt(r.p99, 2),
    fmt(r.cpuPerRequest, 1),
    `${r.errors}/${r.non2xx}`
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)))
  const right = [false, false, true, true, true, true, true]
  const cell = (text, i) => (right[i] ? text.padStart(widths[i]) : text.padEnd(widths[i]))
  const out = [
    `| ${header.map(cell).join(" | ")} |`,
    `|${widths.map((w, i) => (right[i] ? `${"-".repeat(w + 1)}:` : `${"-".repeat(w + 2)}`)).join("|")}|`,
    ...lines.map((l) => `| ${l.map(cell).join(" | ")} |`)
  ]
  return out.join("\n")
}

/** gateway/proxy CPU per request, round by round (each round measures both minutes apart at most), and their median. */
const ratioOf = (rows, scenario, of = "gateway", to = "proxy") => {
  const perRound = []
  for (let round = 1; round <= ROUNDS; round++) {
    const proxy = rows.find((r) => r.scenario === scenario && r.target === to && r.round === round)
    const gateway = rows.find((r) => r.scenario === scenario && r.target === of && r.round === round)
    if (proxy && gateway) perRound.push(gateway.cpuPerRequest / proxy.cpuPerRequest)
  }
  return perRound.length === 0 ? undefined : { median: median(perRound), perRound }
}

// ---------------------------------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------------------------------

/** The batch benchmark, in a process of its own (it starts gateway processes of its own). */
const runBatches = () =>
  new Promise((resolve, reject) => {
    const child = fork(resolvePath(here, "batches.mjs"), [], { stdio: "inherit" })
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`bench/batches.mjs exited with ${code}`))))
  })

const main = async () => {
  if (BATCHES) {
    await runBatches()
    if (SCENARIOS.length === 0) process.exit(0)
    console.log("")
  }
  const cpuInfo = cpus()
  console.log("model-gateway overhead benchmark")
  console.log(
    `  node ${process.version}, ${availableParallelism()} CPUs (${cpuInfo[0]?.model.trim() ?? "unknown"}), ` +
      `load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`
  )
  console.log(
    `  ${CONNECTIONS} connections; per target ${WARMUP} s warm-up, then ${ROUNDS} interleaved round(s) of ${DURATION} s`
  )
  console.log("  the load generator (autocannon) runs in this process: client and servers share the CPUs")

  if (PROFILE) mkdirSync(PROFILE_DIR, { recursive: true })
  const upstream = await startChild("upstream", "upstream.mjs")
  const env = { UPSTREAM_URL: upstream.url }
  const [proxy, gateway, ...extra] = await Promise.all([
    startChild("proxy", "proxy.mjs", env, profileArgs("proxy")),
    startGateway("gateway", resolvePath(here, ".."), upstream.url, [
      ...nodeArgs("BENCH_GATEWAY_ARGS"),
      ...profileArgs("gateway")
    ]),
    ...(BASELINE === undefined
      ? []
      : [startGateway("baseline", resolvePath(BASELINE), upstream.url, nodeArgs("BENCH_BASELINE_ARGS"))])
  ])
  const direct = { ...upstream, name: "direct" }
  const gateways = [gateway, ...extra]

  // Idle memory: each server started, no request yet; a second to settle.
  await new Promise((resolve) => setTimeout(resolve, 1_000))
  const servers = [direct, proxy, ...gateways]
  const idle = new Map()
  for (const target of servers) idle.set(target.name, await sample(target.child))

  // Correctness first: a fast wrong answer is not a result.
  for (const target of [direct, proxy, ...gateways]) {
    if (SCENARIOS.includes("json")) await checkJson(target, upstream)
    if (SCENARIOS.includes("stream")) await checkStream(target, upstream)
  }
  await checkAgent.close()
  console.log("  checks passed: the gateway answers 200 with the upstream's message (model, usage, cost)\n")

  const plan = SCENARIOS.flatMap((scenario) =>
    (scenario === "json" ? [direct, proxy, ...gateways] : [proxy, ...gateways]).map((target) => ({ scenario, target }))
  )
  const warmRows = []
  for (const { scenario, target } of plan) warmRows.push(await warmUp(scenario, target))
  const rows = []
  for (let round = 1; round <= ROUNDS; round++) {
    // Every other round in reverse order, so that a slow drift of the machine favours no target.
    for (const { scenario, target } of round % 2 === 1 ? plan : [...plan].reverse()) {
      rows.push(await measure(scenario, target, upstream, round))
    }
  }

  const summary = summarise(rows)
  console.log("")
  if (ROUNDS > 1) console.log(`median of ${ROUNDS} rounds:`)
  console.log(table(summary))
  console.log("")
  if (ROUNDS > 1) {
    for (const r of summary) {
      console.log(`  CPU µs/req by round, ${r.scenario} ${r.target}: ${r.cpuRounds.map((c) => fmt(c, 1)).join(", ")}`)
    }
    console.log("")
  }

  const json = ratioOf(rows, "json")
  const stream = ratioOf(rows, "stream")
  const rounds = (ratio) => (ratio.perRound.length > 1 ? ` (by round: ${ratio.perRound.map((r) => r.toFixed(2)).join(", ")})` : "")
  if (json !== undefined) {
    console.log(`gateway/proxy CPU per request, non-streaming: ${json.median.toFixed(2)}x${rounds(json)}`)
    console.log(
      json.median <= BUDGET
        ? `BUDGET MET: gateway CPU per non-streaming request is within ${BUDGET}x the pass-through proxy's`
        : `BUDGET MISSED: gateway CPU per non-streaming request is ${json.median.toFixed(2)}x the pass-through ` +
          `proxy's (budget ${BUDGET}x)`
    )
  }
  if (BASELINE !== undefined) {
    for (const scenario of SCENARIOS) {
      const ab = ratioOf(rows, scenario, "gateway", "baseline")
      const base = ratioOf(rows, scenario, "baseline", "proxy")
      if (ab === undefined || base === undefined) continue
      console.log(`gateway/baseline CPU per request, ${scenario}: ${ab.median.toFixed(3)}x${rounds(ab)}`)
      console.log(`baseline/proxy CPU per request, ${scenario}: ${base.median.toFixed(2)}x${rounds(base)}`)
    }
  }
  if (stream !== undefined) {
    console.log(`gateway/proxy CPU per request, streaming: ${stream.median.toFixed(2)}x${rounds(stream)} (no budget)`)
  }
  const bad = summary.filter((r) => r.errors > 0 || r.non2xx > 0)
  if (bad.length > 0) {
    console.log(`WARNING: errors or non-2xx answers in ${bad.map((r) => `${r.target} (${r.scenario})`).join(", ")}`)
  }
  // One upstream request per answered request (no hidden retries), give or take the requests in flight at the edges.
  for (const r of rows) {
    if (r.target !== "direct" && Math.abs(r.upstreamRequests - r.requests) > 2 * CONNECTIONS) {
      console.log(
        `WARNING: ${r.target} (${r.scenario}, round ${r.round}) answered ${r.requests} requests ` +
          `but the upstream saw ${r.upstreamRequests}`
      )
    }
  }
  console.log("")
  console.log("memory (resident set size, MB; peak = the process's high-water mark over the whole run):")
  for (const target of servers) {
    const end = await sample(target.child)
    console.log(
      `  ${target.name.padEnd(8)} idle ${mb(idle.get(target.name).rss).padStart(4)}, after the run ` +
        `${mb(end.rss).padStart(4)}, peak ${mb(end.peakRss).padStart(4)}` +
        (target.name === "direct" ? " (the fake upstream: its peak includes serving every target)" : "")
    )
  }
  const others = rows.map((r) => r.others).filter(Number.isFinite)
  if (others.length > 0) {
    const worst = Math.max(...others)
    console.log(
      `  CPU used by processes outside the benchmark during measured runs: ${Math.min(...others).toFixed(2)}-` +
        `${worst.toFixed(2)} cores${worst > 0.25 ? " (a busy machine: numbers are noisier; rerun when it is quiet)" : ""}`
    )
  }

  await stopChildren(PROFILE ? 30_000 : 3_000)
  if (PROFILE) {
    // The request count next to each profile lets bench/profile-top.mjs show µs per request.
    const served = new Map()
    for (const r of [...warmRows, ...rows]) served.set(r.target, (served.get(r.target) ?? 0) + r.requests)
    for (const name of PROFILED) {
      const file = profileFile(name)
      if (!existsSync(file)) {
        console.log(`\nno CPU profile was written for ${name}`)
        continue
      }
      writeFileSync(`${file}.json`, JSON.stringify({ target: name, requests: served.get(name) ?? 0, scenarios: SCENARIOS }))
      console.log(`\n${name} CPU profile: ${relative(process.cwd(), file)}`)
      console.log(`  summarise with: node bench/profile-top.mjs ${relative(process.cwd(), file)}`)
    }
  }
  process.exit(0)
}

main().catch(fail)
