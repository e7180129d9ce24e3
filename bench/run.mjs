// `npm run bench`: the gateway measured against the Node floor and against Portkey, in the same run (issue 11).
//
// Starts, each in its own process: the fake upstream (bench/upstream.mjs, Anthropic Messages and OpenAI chat
// completions), the pipe-only node:http proxy (bench/proxy.mjs, the reference), the gateway process itself as
// `npm start` runs it (packages/server/dist/bundle/model-gateway.js with bench/server-child.mjs preloaded), and Portkey's gateway
// (bench/portkey.mjs installs it into bench/.portkey; without a registry the run says so and goes on without it).
// "direct" is the upstream itself. Then, in order:
//
//   1. idle RSS of every server, and correctness: every target asked once per upstream protocol, JSON and streamed
//      (bench/checks.mjs); a wrong answer stops the run with exit code 1
//   2. memory probes (bench/probes-memory.mjs): RSS during 60 s at 32 connections; 1,000 streams open at once
//   3. load runs (bench/load.mjs): Anthropic / OpenAI upstream x JSON / stream x upstream latency x connections; in
//      each, the targets alternate within a round, every other round in reverse order, BENCH_ROUNDS rounds
//   4. latency probes (bench/probes-latency.mjs): sequential requests; added delay of each streamed chunk
//   5. the report: medians, the same-run ratios with their per-round values (the noise), the issue's targets judged
//
// A benchmark, not a test: it exits 0 when a target is missed, 1 only when something is broken (a child does not
// start, a target answers wrongly, a probe's stream is cut). Settings: bench/settings.mjs, docs/benchmarks.md.
import { fork } from "node:child_process"
import { existsSync, mkdirSync, writeFileSync } from "node:fs"
import { availableParallelism, cpus, loadavg } from "node:os"
import { dirname, join, relative, resolve as resolvePath } from "node:path"
import { fileURLToPath } from "node:url"
import { callChild, fail, sample, setGrace, startChild, startGateway, startPortkey, stopChildren } from "./children.mjs"
import { checkTarget, closeChecks } from "./checks.mjs"
import { gatewayConfig } from "./fixtures.mjs"
import { storageFor } from "./storage.mjs"
import { fmt, mb, measure, scenarioName, warmUp } from "./load.mjs"
import { ensurePortkey } from "./portkey.mjs"
import { interChunkProbe, interChunkTable, sequentialProbe, sequentialTable } from "./probes-latency.mjs"
import { openStreamsProbe, openStreamsTable, sustainedProbe, sustainedTable } from "./probes-memory.mjs"
import { ratioReport, summarise, table } from "./report.mjs"
import { PROVIDERS } from "./requests.mjs"
import * as S from "./settings.mjs"

const here = dirname(fileURLToPath(import.meta.url))
const PROFILE = S.PROFILED.size > 0
const PROFILE_DIR = join(here, ".prof")
const STAMP = new Date().toISOString().replace(/[-:]/g, "").replace(/\..*/, "")
const profileFile = (name) => join(PROFILE_DIR, `${name}-${STAMP}.cpuprofile`)
const profileArgs = (name) =>
  S.PROFILED.has(name) ? ["--cpu-prof", "--cpu-prof-dir", PROFILE_DIR, "--cpu-prof-name", `${name}-${STAMP}.cpuprofile`] : []
if (PROFILE) setGrace(30_000)

/** The batch benchmark, in a process of its own (it starts gateway processes of its own). */
const runBatches = () =>
  new Promise((resolve, reject) => {
    const child = fork(resolvePath(here, "batches.mjs"), [], { stdio: "inherit" })
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`bench/batches.mjs exited with ${code}`))))
  })

/** What each gateway process's storage leaves behind (a PostgreSQL schema), removed at the end of the run. */
const cleanups = []

/** A configuration with a storage of its own for one gateway process (BENCH_STORAGE); a run stops without one. */
const configFor = async (upstream, label) => {
  const store = await storageFor(S.STORAGE, label)
  if (store.skipped !== undefined) await fail(new Error(`BENCH_STORAGE=${S.STORAGE}: ${store.skipped}`))
  cleanups.push(store.cleanup)
  return gatewayConfig(upstream.url, store.url)
}

/** Starts every target; Portkey only when it can be installed (otherwise a line saying why). */
const startTargets = async (upstream, notes) => {
  const env = { UPSTREAM_URL: upstream.url }
  const want = (name) => S.TARGETS.includes(name)
  let portkeyMain
  if (want("portkey")) {
    const installed = await ensurePortkey((line) => console.log(line))
    if (installed.error) notes.push(`portkey: not measured, ${installed.error}`)
    else portkeyMain = installed.main
  }
  const started = await Promise.all([
    want("proxy") ? startChild("proxy", "proxy.mjs", env, [...S.nodeArgs("BENCH_PROXY_ARGS"), ...profileArgs("proxy")]) : undefined,
    want("proxy-undici") ? startChild("proxy-undici", "proxy-undici.mjs", env, profileArgs("proxy-undici")) : undefined,
    startGateway("gateway", resolvePath(here, ".."), await configFor(upstream, "gateway"), [
      ...S.nodeArgs("BENCH_GATEWAY_ARGS"),
      ...profileArgs("gateway")
    ]),
    S.BASELINE === undefined
      ? undefined
      : startGateway("baseline", resolvePath(S.BASELINE), await configFor(upstream, "baseline"), S.nodeArgs("BENCH_BASELINE_ARGS")),
    portkeyMain === undefined ? undefined : startPortkey(portkeyMain, profileArgs("portkey"))
  ])
  return [{ ...upstream, name: "direct" }, ...started.filter((t) => t !== undefined)]
}

/** Portkey failing its checks is reported and Portkey dropped; any other target failing them stops the run. */
const checkAll = async (targets, upstream, notes) => {
  const passed = []
  for (const target of targets) {
    try {
      for (const provider of PROVIDERS) {
        for (const stream of [false, true]) await checkTarget(target, upstream, provider, stream)
      }
      passed.push(target)
    } catch (error) {
      if (target.name !== "portkey") throw error
      notes.push(`portkey: not measured, its answer is wrong: ${error.message}`)
    }
  }
  await closeChecks()
  return passed
}

const runLoad = async (targets, upstream) => {
  const rows = []
  const warmed = new Set()
  let latency
  for (const scenario of S.LOAD_SCENARIOS) {
    if (scenario.latencyMs !== latency) {
      latency = scenario.latencyMs
      await callChild(upstream.child, "configure", { latencyMs: latency })
    }
    // Each target warmed up once per protocol and kind (the JIT's paths), at the first scenario that uses them.
    const kind = `${scenario.provider}-${scenario.stream}`
    if (!warmed.has(kind)) {
      warmed.add(kind)
      for (const target of targets) rows.push({ warm: true, ...(await warmUp(scenario, target, upstream.url, S.WARMUP)) })
    }
    for (let round = 1; round <= S.ROUNDS; round++) {
      for (const target of round % 2 === 1 ? targets : [...targets].reverse()) {
        rows.push(await measure({ ...scenario, name: scenarioName(scenario) }, target, upstream, round, S.ROUNDS, S.DURATION))
      }
    }
  }
  await callChild(upstream.child, "configure", {})
  return rows
}

const main = async () => {
  if (S.BATCHES) {
    await runBatches()
    if (S.SCENARIOS.length === 1) process.exit(0)
    console.log("")
  }
  console.log("model-gateway benchmark (issue 11)")
  console.log(
    `  node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model.trim() ?? "unknown"}), ` +
      `load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`
  )
  console.log(`  scenarios: ${S.SCENARIOS.join(", ")}; targets: ${S.TARGETS.join(", ")}${S.BASELINE ? ", baseline" : ""}`)
  if (S.STORAGE !== "memory") console.log(`  gateway storage: ${S.STORAGE} (memory: by default)`)
  if (S.LOAD_SCENARIOS.length > 0) {
    console.log(
      `  load: connections ${S.CONNECTIONS.join(", ")}; upstream latency ${S.LATENCIES.join(", ")} ms; per target ` +
        `${S.WARMUP} s warm-up, then ${S.ROUNDS} alternating round(s) of ${S.DURATION} s; autocannon in this process`
    )
  }
  if (PROFILE) mkdirSync(PROFILE_DIR, { recursive: true })
  const notes = []
  const upstream = await startChild("upstream", "upstream.mjs")
  const started = await startTargets(upstream, notes)

  // Idle memory: each server started, no request yet; a second to settle.
  await new Promise((resolve) => setTimeout(resolve, 1_000))
  const idle = new Map()
  for (const target of started) idle.set(target.name, await sample(target.child))

  const targets = await checkAll(started, upstream, notes)
  console.log(`  checks passed (${targets.map((t) => t.name).join(", ")}): each answers the upstream's message, ` +
    "the gateway with its model, usage and cost, on Anthropic and OpenAI upstreams, JSON and streamed\n")
  for (const note of notes) console.log(`  NOTE ${note}`)

  const servers = targets.filter((t) => t.name !== "direct")
  const probeProvider = S.PROBE_PROVIDERS[0]
  const sustained = S.has("memory") ? await sustainedProbe(servers, upstream, probeProvider, S.MEMORY_SECONDS) : []
  const open = S.has("streams")
    ? await openStreamsProbe(servers, upstream, probeProvider, { streams: S.OPEN_STREAMS, bodyKb: S.STREAM_BODY_KB })
    : []
  const rows = await runLoad(targets, upstream)
  const measured = rows.filter((r) => !r.warm)
  let sequential = []
  if (S.has("sequential")) {
    console.log(`  sequential probe: ${S.SEQUENTIAL} requests per target and scenario, one connection ...`)
    sequential = await sequentialProbe(targets, upstream, S.PROBE_PROVIDERS, S.SEQUENTIAL, S.SEQUENTIAL_WARMUP)
  }
  let interChunk = []
  if (S.has("interchunk")) {
    const { streams, deltas, intervalMs } = S.INTERCHUNK
    console.log(`  inter-chunk probe: ${streams} streams at once, ${deltas} deltas ${intervalMs} ms apart, ${S.ROUNDS} round(s) ...`)
    interChunk = await interChunkProbe(targets, upstream, S.PROBE_PROVIDERS, S.INTERCHUNK)
  }

  // ----- report -----
  const verdicts = []
  const judge = (met, text) => verdicts.push({ met, text: `${met ? "MET   " : "MISSED"} ${text}` })
  if (measured.length > 0) {
    console.log(`\nload runs, median of ${S.ROUNDS} round(s):`)
    console.log(table(summarise(measured)))
    const { lines, verdicts: v } = ratioReport(measured, S.LOAD_SCENARIOS.map((s) => ({ ...s, name: scenarioName(s) })), !!S.BASELINE)
    console.log("\nsame-run ratios (median, then each round):")
    console.log(lines.join("\n"))
    verdicts.push(...v)
  }
  if (sequential.length > 0) {
    console.log("\nsequential probe (one connection; added = the target's percentile minus direct's):")
    console.log(sequentialTable(sequential))
    for (const r of sequential.filter((r) => r.target === "gateway")) {
      const limit = r.stream ? 0.5 : 0.3
      judge(r.added.p50 <= limit, `${r.provider}-${r.stream ? "stream first byte" : "json"} sequential added p50: ` +
        `${fmt(r.added.p50, 3)} ms (target <= ${limit} ms)`)
    }
  }
  if (interChunk.length > 0) {
    console.log("\ninter-chunk probe (arrival minus the upstream's write, each delta; added = minus direct's):")
    console.log(interChunkTable(interChunk))
    for (const r of interChunk.filter((r) => r.target === "gateway")) {
      const direct = interChunk.find((d) => d.target === "direct" && d.provider === r.provider)
      const text = `${r.provider} inter-chunk added p99: ${fmt(r.added.p99, 3)} ms (target <= 1 ms)`
      // Direct's own p99 is the floor: above 1 ms the machine's scheduling, not the target, decides the p99s.
      if (direct.p99 > 1) verdicts.push({ met: false, text: `UNSURE ${text}: direct's own p99 is ${fmt(direct.p99, 1)} ms, a busy machine` })
      else judge(r.added.p99 <= 1, text)
    }
  }
  if (sustained.length > 0) {
    console.log(`\nmemory during ${S.MEMORY_SECONDS} s at 32 connections (RSS read every 0.5 s inside each process):`)
    console.log(sustainedTable(sustained, S.MEMORY_SECONDS))
    for (const r of sustained.filter((r) => r.target === "gateway")) {
      judge(r.peak <= 200 * 2 ** 20, `peak RSS during ${S.MEMORY_SECONDS} s at 32 connections: ${mb(r.peak)} MB (target <= 200 MB)`)
    }
  }
  if (open.length > 0) {
    const size = S.STREAM_BODY_KB > 0 ? `, requests of ${S.STREAM_BODY_KB} KB` : ""
    console.log(`\n${S.OPEN_STREAMS} streams open at once (RSS read every 0.25 s${size}):`)
    console.log(openStreamsTable(open))
    // The target is for the benchmark's own request; larger ones are a measurement, not judged.
    for (const r of open.filter((r) => r.target === "gateway" && S.STREAM_BODY_KB === 0)) {
      judge(r.peak <= 200 * 2 ** 20, `peak RSS with ${r.streams} open streams: ${mb(r.peak)} MB (target <= 200 MB; ` +
        `the upstream had ${r.heldAtOnce} open at once)`)
    }
  }
  console.log("\nmemory (resident set size, MB; idle = started, no request yet; peak = the process's high-water mark):")
  for (const target of targets) {
    const end = await sample(target.child)
    console.log(
      `  ${target.name.padEnd(12)} idle ${mb(idle.get(target.name).rss).padStart(4)}, at the end ${mb(end.rss).padStart(4)}, ` +
        `peak ${mb(end.peakRss).padStart(4)}` + (target.name === "direct" ? " (the fake upstream, serving every target)" : "")
    )
  }
  judge(idle.get("gateway").rss <= 80 * 2 ** 20, `gateway idle RSS: ${mb(idle.get("gateway").rss)} MB (target <= 80 MB)`)

  const bad = summarise(measured).filter((r) => r.errors > 0 || r.non2xx > 0)
  if (bad.length > 0) console.log(`\nWARNING: errors or non-2xx answers in ${bad.map((r) => `${r.target} (${r.scenario})`).join(", ")}`)
  // One upstream request per answered request (no hidden retries), give or take the requests in flight at the edges.
  for (const r of measured) {
    if (r.target !== "direct" && Math.abs(r.upstreamRequests - r.requests) > 2 * r.connections) {
      console.log(`WARNING: ${r.target} (${r.scenario}, round ${r.round}) answered ${r.requests} requests but the upstream saw ${r.upstreamRequests}`)
    }
  }
  const others = measured.map((r) => r.others).filter(Number.isFinite)
  if (others.length > 0) {
    const worst = Math.max(...others)
    console.log(`\nCPU used by processes outside the benchmark during measured runs: ${fmt(Math.min(...others), 2)}-` +
      `${fmt(worst, 2)} cores${worst > 0.25 ? " (a busy machine: numbers are noisier; rerun when it is quiet)" : ""}`)
  }
  for (const note of notes) console.log(`NOTE ${note}`)
  if (S.GATEWAY_API === "chat") {
    console.log("\nissue 11's targets are judged on /v1/messages: not on this run (BENCH_GATEWAY_API=chat)")
  } else {
    console.log(`\nissue 11's targets, judged on this run (${verdicts.filter((v) => v.met).length} of ${verdicts.length} met):`)
    for (const v of verdicts) console.log(`  ${v.text}`)
  }

  await stopChildren()
  for (const cleanup of cleanups) await cleanup()
  if (PROFILE) {
    // The request count next to each profile lets bench/profile-top.mjs show µs per request, and the measured runs'
    // windows let it count only what they cost.
    const served = new Map()
    const runs = new Map()
    for (const r of rows) {
      served.set(r.target, (served.get(r.target) ?? 0) + r.requests)
      if (r.window === undefined) continue
      const [from, to] = r.window
      runs.set(r.target, [...(runs.get(r.target) ?? []), { scenario: r.scenario, from, to, requests: r.requests }])
    }
    for (const name of S.PROFILED) {
      const file = profileFile(name)
      if (!existsSync(file)) {
        console.log(`\nno CPU profile was written for ${name}`)
        continue
      }
      writeFileSync(`${file}.json`, JSON.stringify({
        target: name,
        // Warm-ups included: what the whole profile served.
        requests: served.get(name) ?? 0,
        runs: runs.get(name) ?? [],
        scenarios: S.SCENARIOS
      }))
      console.log(`\n${name} CPU profile: ${relative(process.cwd(), file)}`)
      console.log(`  summarise with: node bench/profile-top.mjs ${relative(process.cwd(), file)}`)
    }
  }
  process.exit(0)
}

main().catch(fail)
