// `npm run bench:growth` (or `node bench/growth.mjs` after `npm run build`): does the gateway's memory grow under
// steady load? Issue 11's target: RSS growth <= 1 MB/min after warm-up, with memory, SQLite and PostgreSQL storage.
//
// Starts the fake upstream (bench/upstream.mjs) and, for each storage in turn, a fresh gateway process as `npm start`
// runs it (bench/children.mjs startGateway: packages/server/dist/bundle/model-gateway.js, bench/server-child.mjs preloaded), then
// loads it steadily for BENCH_GROWTH_MINUTES: four autocannon instances at a fixed total rate, Anthropic and OpenAI
// upstream x JSON and streamed, 8 connections each. The process's RSS and V8 heap are read inside it every
// BENCH_GROWTH_SAMPLE seconds; the slope is the least-squares line through the samples after the warm-up (the first 2
// minutes; for runs shorter than 4 minutes, the first half), in MB per minute. PostgreSQL runs in a schema of its
// own, dropped afterwards; when it is unreachable that storage is skipped with a line saying so. A benchmark, not a
// test: it exits 0 when the target is missed, 1 only when something is broken.
//
// Environment:
//   BENCH_GROWTH_MINUTES   minutes of load per storage (default 10)
//   BENCH_GROWTH_STORAGE   comma-separated subset of memory,sqlite,postgres (default all three)
//   BENCH_GROWTH_RATE      total requests per second (default 400: 100 of each kind)
//   BENCH_GROWTH_SAMPLE    seconds between two readings (default 10)
//   BENCH_PG_URL           PostgreSQL (default postgres://postgres@127.0.0.1:5432/test)
//   BENCH_GATEWAY_ARGS     node options of the gateway (e.g. "--max-old-space-size=96"), as in bench/run.mjs
import autocannon from "autocannon"
import { cpus, loadavg } from "node:os"
import { dirname, resolve as resolvePath } from "node:path"
import { fileURLToPath } from "node:url"
import { fail, sample, startChild, startGateway, stopChild, stopChildren } from "./children.mjs"
import { gatewayConfig } from "./fixtures.mjs"
import { storageFor, STORAGES as KNOWN_STORAGES } from "./storage.mjs"
import { fmt, mb } from "./load.mjs"
import { markdown } from "./report.mjs"
import { checkTarget, closeChecks } from "./checks.mjs"
import { PROVIDERS, requestFor } from "./requests.mjs"

const here = dirname(fileURLToPath(import.meta.url))
const GATEWAY_ARGS = (process.env.BENCH_GATEWAY_ARGS ?? "").split(" ").filter(Boolean)
const positive = (name, fallback) => {
  const n = Number(process.env[name] || fallback)
  if (!Number.isFinite(n) || n <= 0) {
    console.error(`${name} must be a positive number, got ${JSON.stringify(process.env[name])}`)
    process.exit(2)
  }
  return n
}
const MINUTES = positive("BENCH_GROWTH_MINUTES", 10)
const RATE = positive("BENCH_GROWTH_RATE", 400)
const SAMPLE_SECONDS = positive("BENCH_GROWTH_SAMPLE", 10)
const WARMUP_MINUTES = MINUTES >= 4 ? 2 : MINUTES / 2
const STORAGES = (process.env.BENCH_GROWTH_STORAGE ?? "memory,sqlite,postgres").split(",").map((s) => s.trim())
  .filter(Boolean)
for (const s of STORAGES) {
  if (!KNOWN_STORAGES.includes(s)) {
    console.error(`BENCH_GROWTH_STORAGE: unknown storage ${JSON.stringify(s)} (use memory, sqlite, postgres)`)
    process.exit(2)
  }
}
const LIMIT_MB_PER_MIN = 1

/** Least-squares slope of y over x. */
export const slope = (points) => {
  const n = points.length
  if (n < 2) return NaN
  const mx = points.reduce((a, p) => a + p.x, 0) / n
  const my = points.reduce((a, p) => a + p.y, 0) / n
  const sxx = points.reduce((a, p) => a + (p.x - mx) ** 2, 0)
  const sxy = points.reduce((a, p) => a + (p.x - mx) * (p.y - my), 0)
  return sxx === 0 ? NaN : sxy / sxx
}

/** Steady load: four autocannon instances (protocol x streamed or not), RATE/4 requests per second each. */
const steadyLoad = (target, upstreamUrl, seconds) =>
  Promise.all(["anthropic", "openai"].flatMap((provider) =>
    [false, true].map((stream) =>
      new Promise((resolve, reject) => {
        const { path, headers, body } = requestFor(target, provider, stream, upstreamUrl)
        autocannon({
          url: `${target.url}${path}`,
          method: "POST",
          headers,
          body,
          connections: 8,
          overallRate: RATE / 4,
          duration: seconds
        }, (error, result) => (error ? reject(error) : resolve(result)))
      })
    )
  ))

const runStorage = async (storage, upstream) => {
  const store = await storageFor(storage, "growth")
  if (store.skipped !== undefined) return { storage, skipped: store.skipped }
  const started = await startGateway(`gateway-${storage}`, resolvePath(here, ".."), gatewayConfig(upstream.url, store.url), GATEWAY_ARGS)
  // Asked and checked like the gateway target of bench/run.mjs (the requests and checks go by the name "gateway").
  const gateway = { ...started, name: "gateway" }
  try {
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    const idle = await sample(gateway.child)
    for (const provider of PROVIDERS) {
      for (const stream of [false, true]) await checkTarget(gateway, upstream, provider, stream)
    }
    console.log(`  ${storage}: idle RSS ${mb(idle.rss)} MB; ${MINUTES} min at ${RATE} req/s ...`)
    const samples = []
    const t0 = performance.now()
    let sampling = true
    const sampler = (async () => {
      while (sampling) {
        const elapsed = (performance.now() - t0) / 60_000
        const { rss, heap } = await sample(gateway.child)
        samples.push({ minutes: elapsed, rss, heap })
        const next = t0 + samples.length * SAMPLE_SECONDS * 1000
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - performance.now())))
      }
    })()
    const results = await steadyLoad(gateway, upstream.url, MINUTES * 60)
    sampling = false
    await sampler
    const after = samples.filter((s) => s.minutes >= WARMUP_MINUTES)
    const rssSlope = slope(after.map((s) => ({ x: s.minutes, y: s.rss / 2 ** 20 })))
    const heapSlope = slope(after.map((s) => ({ x: s.minutes, y: s.heap / 2 ** 20 })))
    const requests = results.reduce((n, r) => n + r.requests.total, 0)
    const bad = results.reduce((n, r) => n + r.errors + r.timeouts + r.non2xx, 0)
    console.log(`    RSS MB every ${SAMPLE_SECONDS} s: ${samples.map((s) => mb(s.rss)).join(" ")}`)
    console.log(`    heap MB every ${SAMPLE_SECONDS} s: ${samples.map((s) => mb(s.heap)).join(" ")}`)
    return {
      storage,
      idle: idle.rss,
      atWarm: after[0]?.rss,
      end: samples.at(-1)?.rss,
      peak: Math.max(...samples.map((s) => s.rss)),
      rssSlope,
      heapSlope,
      samples: after.length,
      requests,
      bad
    }
  } finally {
    await stopChild(gateway.child, 10_000)
    await store.cleanup()
  }
}

const main = async () => {
  console.log("model-gateway memory growth under steady load (issue 11)")
  console.log(`  node ${process.version}, ${cpus().length} CPUs, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`)
  if (GATEWAY_ARGS.length > 0) console.log(`  gateway node options: ${GATEWAY_ARGS.join(" ")}`)
  console.log(
    `  per storage: ${MINUTES} min at ${RATE} req/s (Anthropic and OpenAI upstream, JSON and streamed, 8 connections ` +
      `each); RSS read every ${SAMPLE_SECONDS} s; slope over the samples after the first ${fmt(WARMUP_MINUTES, 1)} min`
  )
  const upstream = await startChild("upstream", "upstream.mjs")
  const results = []
  for (const storage of STORAGES) results.push(await runStorage(storage, upstream))
  await closeChecks()
  console.log("")
  const done = results.filter((r) => !r.skipped)
  console.log(markdown(
    ["storage", "idle MB", "after warm-up MB", "end MB", "peak MB", "RSS MB/min", "heap MB/min", "samples", "requests", "errors/non-2xx"],
    done.map((r) => [
      r.storage,
      mb(r.idle),
      mb(r.atWarm),
      mb(r.end),
      mb(r.peak),
      fmt(r.rssSlope, 2),
      fmt(r.heapSlope, 2),
      String(r.samples),
      String(r.requests),
      String(r.bad)
    ]),
    [false, true, true, true, true, true, true, true, true, true]
  ))
  for (const r of results.filter((r) => r.skipped)) console.log(`  ${r.storage}: skipped, ${r.skipped}`)
  console.log("")
  for (const r of done) {
    const met = r.rssSlope <= LIMIT_MB_PER_MIN
    console.log(`  ${met ? "MET   " : "MISSED"} ${r.storage}: RSS growth ${fmt(r.rssSlope, 2)} MB/min after warm-up (target <= ${LIMIT_MB_PER_MIN})`)
  }
  if (done.some((r) => r.bad > 0)) console.log("  WARNING: errors or non-2xx answers during the load (see the table)")
  await stopChildren()
  process.exit(0)
}

main().catch(fail)
