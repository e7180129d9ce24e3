// `BENCH_SCENARIOS=batches npm run bench` (or `node bench/batches.mjs` after `npm run build`): batch throughput.
//
// Starts the fake Anthropic upstream (bench/upstream.mjs, answers at once) and one or three compiled gateway processes
// (`packages/server/dist/bundle/model-gateway.js`, as `npm start` runs it) sharing one store, submits one batch of 5,000 requests to
// `/v1/messages`, polls it until it completes, and reports requests per second (from the submission's answer to the
// poll that saw it completed), the gateways' CPU time per request (and, for comparison, the first gateway's per live
// request of the same body, 16 at a time, right after), and each process's peak RSS (VmHWM). One process
// runs on SQLite and on PostgreSQL, three on PostgreSQL (skipped, with a line saying so, when PostgreSQL is
// unreachable). The workers run with their default limits (16 requests per batch and 64 per process, in each
// process). A benchmark, not a test: it exits 1 only when something is broken.
//
// Environment:
//   BENCH_BATCH_ITEMS      requests in the batch (default 5000)
//   BENCH_BATCH_RUNS       comma-separated runs among sqlite-1, pg-1, pg-3 (default all three), and memory-1
//   BENCH_BATCH_PER_BATCH  the workers' per-batch limit (default: the gateway's, 16)
//   BENCH_PG_URL           PostgreSQL (default postgres://postgres@127.0.0.1:5432/test)
import { fork, spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { dirname, join, resolve as resolvePath } from "node:path"
import { fileURLToPath } from "node:url"
import { CLIENT_KEY, gatewayConfig } from "./fixtures.mjs"
import { dropSchema, PG_URL, reachable, schemaUrl } from "./postgres.mjs"

const here = dirname(fileURLToPath(import.meta.url))
const MAIN = resolvePath(here, "../packages/server/dist/bundle/model-gateway.js")
const ITEMS = Number(process.env.BENCH_BATCH_ITEMS ?? 5000)
const RUNS = (process.env.BENCH_BATCH_RUNS ?? "sqlite-1,pg-1,pg-3").split(",").map((s) => s.trim()).filter(Boolean)
const PER_BATCH = process.env.BENCH_BATCH_PER_BATCH ? Number(process.env.BENCH_BATCH_PER_BATCH) : undefined

const children = new Set()
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL")
})

const startUpstream = () =>
  new Promise((resolve, reject) => {
    const child = fork(resolvePath(here, "upstream.mjs"), [], { stdio: ["ignore", "ignore", "inherit", "ipc"] })
    children.add(child)
    child.on("message", (message) => message?.type === "ready" && resolve({ child, url: message.url }))
    child.on("exit", (code) => {
      children.delete(child)
      reject(new Error(`upstream exited (${code})`))
    })
  })

/** A gateway process; resolves with its URL once it listens. Its log (a line per request) is read and dropped. */
const startGateway = (configPath, databaseUrl, cwd) =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN], {
      cwd,
      env: { PATH: process.env.PATH, GATEWAY_CONFIG: configPath, DATABASE_URL: databaseUrl, PORT: "0" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    children.add(child)
    let output = ""
    let listening = false
    const timer = setTimeout(() => reject(new Error(`gateway did not start: ${output}`)), 60_000)
    const onData = (data) => {
      if (listening) return
      output += data
      const match = /listening on (http:\/\/[\d.:]+)/.exec(output)
      if (match) {
        listening = true
        clearTimeout(timer)
        resolve({ child, url: match[1] })
      }
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    child.on("exit", (code) => {
      children.delete(child)
      clearTimeout(timer)
      if (!child.stopping) reject(new Error(`gateway exited (${code}): ${output}`))
    })
  })

/** CPU time (user + system) a process has used so far (Linux), in ms. */
const cpuMs = (pid) => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "").split(" ")
    // utime and stime are fields 14 and 15 of the line, in clock ticks (100 a second on Linux).
    return (Number(fields[11]) + Number(fields[12])) * 10
  } catch {
    return NaN
  }
}

/** Peak resident set of a process (Linux), in MiB. */
const peakRss = (pid) => {
  try {
    const kb = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1])
    return Number.isFinite(kb) ? kb / 1024 : undefined
  } catch {
    return undefined
  }
}

const api = async (url, method, path, body) => {
  const response = await fetch(`${url}/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${CLIENT_KEY}`, ...(body ? { "content-type": "application/json" } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {})
  })
  const json = await response.json()
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`)
  return json
}

/** The same gateway's CPU per live `POST /v1/messages` (the same body, 16 at a time), for comparison. */
const liveCpu = async (gateway, n = 1000) => {
  const body = JSON.stringify({ model: "bench/model", max_tokens: 64, messages: [{ role: "user", content: "Say hello." }] })
  const before = cpuMs(gateway.child.pid)
  let sent = 0
  const client = async () => {
    while (sent < n) {
      sent++
      const response = await fetch(`${gateway.url}/v1/messages`, {
        method: "POST",
        headers: { authorization: `Bearer ${CLIENT_KEY}`, "content-type": "application/json" },
        body
      })
      if (response.status !== 200) throw new Error(`live request: ${response.status}`)
      await response.arrayBuffer()
    }
  }
  await Promise.all(Array.from({ length: 16 }, client))
  return (cpuMs(gateway.child.pid) - before) / n
}

/** One run: `processes` gateways on `storage`, one batch of ITEMS requests. */
const run = async (upstream, storage, processes) => {
  const dir = mkdtempSync(join(tmpdir(), "mg-bench-batches-"))
  const schema = `mg_bench_batches_${randomUUID().replaceAll("-", "")}`
  const databaseUrl = storage === "memory"
    ? "memory:"
    : storage === "sqlite"
    ? `sqlite:${join(dir, "gateway.db")}`
    : schemaUrl(schema)
  const configPath = join(dir, "config.json")
  writeFileSync(configPath, JSON.stringify({
    ...gatewayConfig(upstream.url),
    batches: { pollMs: 100, ...(PER_BATCH === undefined ? {} : { perBatchConcurrency: PER_BATCH }) }
  }))
  // One first (it migrates the schema), then the others.
  const gateways = [await startGateway(configPath, databaseUrl, dir)]
  gateways.push(
    ...await Promise.all(Array.from({ length: processes - 1 }, () => startGateway(configPath, databaseUrl, dir)))
  )
  try {
    const requests = Array.from({ length: ITEMS }, (_, i) => ({
      custom_id: `r${i}`,
      body: { max_tokens: 64, messages: [{ role: "user", content: `Request ${i}: say hello.` }] }
    }))
    const cpuBefore = gateways.reduce((sum, g) => sum + cpuMs(g.child.pid), 0)
    const started = performance.now()
    const created = await api(gateways[0].url, "POST", "/batches", { endpoint: "/v1/messages", model: "bench/model", requests })
    const submitted = performance.now()
    let batch = created
    while (!["completed", "failed", "expired", "cancelled"].includes(batch.status)) {
      await new Promise((r) => setTimeout(r, 50))
      batch = await api(gateways[0].url, "GET", `/batches/${created.id}`)
    }
    const finished = performance.now()
    if (batch.status !== "completed" || batch.request_counts.completed !== ITEMS) {
      throw new Error(`batch ended ${batch.status}: ${JSON.stringify(batch.request_counts)}`)
    }
    const cpuAfter = gateways.reduce((sum, g) => sum + cpuMs(g.child.pid), 0)
    return {
      liveCpuPerRequestMs: await liveCpu(gateways[0]),
      run: `${{ pg: "PostgreSQL", sqlite: "SQLite", memory: "memory" }[storage]}, ${processes} process${
        processes === 1 ? "" : "es"
      }`,
      submitMs: submitted - started,
      seconds: (finished - submitted) / 1000,
      perSecond: ITEMS / ((finished - submitted) / 1000),
      cpuPerRequestMs: (cpuAfter - cpuBefore) / ITEMS,
      rss: gateways.map((g) => peakRss(g.child.pid))
    }
  } finally {
    for (const g of gateways) {
      g.child.stopping = true
      g.child.kill("SIGTERM")
    }
    await Promise.all(gateways.map((g) => new Promise((r) => (g.child.exitCode !== null ? r() : g.child.once("exit", r)))))
    rmSync(dir, { recursive: true, force: true })
    if (storage === "pg") await dropSchema(PG_URL, schema)
  }
}

const main = async () => {
  const pgUp = await reachable(PG_URL)
  const upstream = await startUpstream()
  console.log(`batch benchmark: one batch of ${ITEMS} requests to /v1/messages, upstream answering at once`)
  console.log(`  load average before: ${loadavg().map((n) => n.toFixed(2)).join(" ")} (${cpus().length} CPUs)`)
  const rows = []
  for (const name of RUNS) {
    const [storage, n] = name.split("-")
    if (storage === "pg" && !pgUp) {
      console.log(`  ${name}: skipped, PostgreSQL at ${new URL(PG_URL).host} is unreachable`)
      continue
    }
    process.stdout.write(`  ${name} ... `)
    const row = await run(upstream, storage, Number(n))
    console.log(`${row.perSecond.toFixed(0)} requests/s`)
    rows.push(row)
  }
  console.log("")
  console.log(
    "| run | submit (ms) | submitted to completed (s) | requests/s | gateway CPU per request (ms) " +
      "| the same, live (ms) | peak RSS per process (MiB) |"
  )
  console.log("|---|---|---|---|---|---|---|")
  for (const r of rows) {
    const rss = r.rss.map((m) => (m === undefined ? "?" : m.toFixed(0))).join(", ")
    console.log(
      `| ${r.run} | ${r.submitMs.toFixed(0)} | ${r.seconds.toFixed(2)} | ${r.perSecond.toFixed(0)} | ${
        r.cpuPerRequestMs.toFixed(2)
      } | ${r.liveCpuPerRequestMs.toFixed(2)} | ${rss} |`
    )
  }
  upstream.child.kill("SIGTERM")
}

main().then(() => process.exit(0), (error) => {
  console.error(`\nbatch benchmark failed: ${error?.stack ?? error}`)
  process.exit(1)
})
