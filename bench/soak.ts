/**
 * `npm run soak`: minutes of mixed traffic against two gateway processes sharing PostgreSQL (storage, health,
 * sessions, batches) and Redis (rate limits), with upstream faults injected all along, then a report: requests served,
 * error rate by cause, latency percentiles, each process's RSS every minute (and its growth per minute), and the open
 * file descriptors and upstream requests left at the end. A script, not a test: it exits 1 only when something is
 * broken (a process died, a stream ended silently truncated, an upstream request was left open).
 *
 * Traffic: `/v1/messages` JSON and streams (some abandoned by the client after the first chunk), `/v1/chat/completions`
 * streams, `count_tokens`, model lists, and a small batch every 20 seconds, polled to its end. Faults: every 100 ms a
 * fault is queued on one of the two fake upstreams (429 with Retry-After, 500, 529, a reset before headers, a stream
 * cut or made malformed after content, no first byte before the deadline).
 *
 * Environment: SOAK_MINUTES (default 10), SOAK_CONCURRENCY (default 16), MG_TEST_PG_URL, MG_TEST_REDIS_URL, SOAK_EXTRA_CONFIG (JSON merged
 * into the gateways' configuration), SOAK_OUT (a file to write the report to; default bench/.soak/report-<time>.md).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { dropSchema } from "../packages/core/test/contract/Postgres.js"
import type { Behaviour, FakeUpstream } from "../packages/provider-adapters/test/fakes/index.js"
import { startFakeAnthropic, startFakeOpenAi } from "../packages/provider-adapters/test/fakes/index.js"

const here = dirname(fileURLToPath(import.meta.url))
const MAIN = join(here, "../packages/server/dist/bundle/model-gateway.js")
const MINUTES = Number(process.env.SOAK_MINUTES ?? 10)
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 16)
const PG_URL = process.env.MG_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const REDIS_URL = process.env.MG_TEST_REDIS_URL ?? "redis://127.0.0.1:6379"
const KEY = `mg-soak-${randomUUID()}`
const SCHEMA = `mg_soak_${randomUUID().replaceAll("-", "").slice(0, 12)}`

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port
      server.close(() => resolve(port))
    })
    server.on("error", reject)
  })

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

// ---------------------------------------------------------------------------------------------------------------------
// the gateway processes
// ---------------------------------------------------------------------------------------------------------------------

const configOf = (anthropic: FakeUpstream, openai: FakeUpstream) => {
  const timeouts = { firstByteMs: 1500, idleMs: 1500, requestMs: 15_000 }
  const pricing = { prompt: "0.000003", completion: "0.000015" }
  return {
    storage: `${PG_URL}?schema=${SCHEMA}`,
    providers: {
      anthro: { kind: "anthropic", baseUrl: anthropic.url, apiKey: "sk-soak-a", timeouts },
      acme: { kind: "openai", baseUrl: openai.url, apiKey: "sk-soak-o", timeouts }
    },
    models: {
      "anthro/claude": { endpoints: [{ provider: "anthro", upstreamModel: "claude-soak", pricing }] },
      "acme/gpt": { endpoints: [{ provider: "acme", upstreamModel: "gpt-soak", pricing }] },
      "mixed/both": {
        endpoints: [
          { provider: "anthro", upstreamModel: "claude-soak", pricing },
          { provider: "acme", upstreamModel: "gpt-soak", pricing }
        ]
      }
    },
    // Limits high enough never to refuse the soak's traffic, so that every request goes through the Redis counters.
    keys: [{
      key: "${SOAK_KEY}",
      workspace: "soak",
      management: true,
      limits: {
        requestsPerMinute: 1_000_000,
        inputTokensPerMinute: 1_000_000_000,
        budget: { usd: "1000000", period: "day" }
      }
    }],
    limits: { redisUrl: REDIS_URL, redisPrefix: `mg-soak-${SCHEMA}:` },
    ...(process.env.SOAK_EXTRA_CONFIG ? JSON.parse(process.env.SOAK_EXTRA_CONFIG) : {})
  }
}

interface Gateway {
  readonly name: string
  readonly url: string
  readonly child: ChildProcess
}

const startGateway = async (name: string, config: string, cwd: string): Promise<Gateway> => {
  const port = await freePort()
  const child = spawn(process.execPath, [MAIN], {
    cwd,
    env: {
      PATH: process.env.PATH ?? "",
      GATEWAY_CONFIG: config,
      SOAK_KEY: KEY,
      PORT: String(port),
      LOG_FORMAT: "json"
    },
    // The request log is written, as in production, and thrown away here.
    stdio: ["ignore", "ignore", "inherit"]
  })
  child.on("exit", (code, signal) => {
    if (!stopping) {
      console.error(`gateway ${name} exited (code ${code}, signal ${signal})`)
      broken.push(`gateway ${name} exited during the soak (code ${code}, signal ${signal})`)
    }
  })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${url}/health`)).ok) return { name, url, child }
    } catch {
      // not yet listening
    }
    await sleep(100)
  }
  throw new Error(`gateway ${name} did not start`)
}

const rssMiB = (pid: number) => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024
}
const openFds = (pid: number) => readdirSync(`/proc/${pid}/fd`).length

// ---------------------------------------------------------------------------------------------------------------------
// traffic
// ---------------------------------------------------------------------------------------------------------------------

let stopping = false
const broken: Array<string> = []
const outcomes = new Map<string, number>()
const latencies = new Map<string, Array<number>>()
const count = (what: string) => outcomes.set(what, (outcomes.get(what) ?? 0) + 1)
const took = (kind: string, ms: number) => {
  const list = latencies.get(kind) ?? []
  list.push(ms)
  latencies.set(kind, list)
}

const headers = { "content-type": "application/json", authorization: `Bearer ${KEY}` }
const message = (model: string, extra: object = {}) =>
  JSON.stringify({ model, max_tokens: 64, messages: [{ role: "user", content: "Tell me something." }], ...extra })

/** Reads an event stream to its end; how it ended. */
const streamEnd = async (response: Response, abandon: boolean, done: RegExp): Promise<string> => {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let text = ""
  for (;;) {
    const { done: end, value } = await reader.read()
    if (end) break
    text += decoder.decode(value, { stream: true })
    if (abandon) {
      await reader.cancel()
      return "abandoned by the client"
    }
  }
  if (/event: error|"error":\s*\{/.test(text.slice(-600))) return "in-band error (upstream fault after content)"
  if (done.test(text)) return "ok"
  broken.push(`a stream ended silently truncated: …${text.slice(-200)}`)
  return "silently truncated"
}

type Kind = "messages json" | "messages stream" | "chat stream" | "count_tokens" | "models"

const one = async (gateway: Gateway, kind: Kind) => {
  const started = performance.now()
  const model = Math.random() < 0.5 ? "mixed/both" : "anthro/claude"
  const fallbacks = model === "anthro/claude" ? { fallbacks: [{ model: "acme/gpt" }] } : {}
  let outcome: string
  try {
    if (kind === "models") {
      const response = await fetch(`${gateway.url}/v1/models`, { headers })
      await response.arrayBuffer()
      outcome = response.ok ? "ok" : `HTTP ${response.status}`
    } else if (kind === "count_tokens") {
      const response = await fetch(`${gateway.url}/v1/messages/count_tokens`, {
        method: "POST",
        headers,
        body: message(model)
      })
      await response.arrayBuffer()
      outcome = response.ok ? "ok" : `HTTP ${response.status}`
    } else if (kind === "messages json") {
      const response = await fetch(`${gateway.url}/v1/messages`, {
        method: "POST",
        headers,
        body: message(model, fallbacks)
      })
      const body = await response.json() as { stop_reason?: string }
      outcome = response.ok ? (body.stop_reason === "end_turn" ? "ok" : "incomplete answer") : `HTTP ${response.status}`
    } else {
      const chat = kind === "chat stream"
      const response = await fetch(`${gateway.url}/v1/${chat ? "chat/completions" : "messages"}`, {
        method: "POST",
        headers,
        body: chat
          ? JSON.stringify({ model, stream: true, messages: [{ role: "user", content: "Tell me something." }] })
          : message(model, { stream: true, ...fallbacks })
      })
      if (!response.ok) {
        await response.arrayBuffer()
        outcome = `HTTP ${response.status}`
      } else {
        outcome = await streamEnd(response, Math.random() < 0.05, chat ? /data: \[DONE\]/ : /event: message_stop/)
      }
    }
  } catch (error) {
    outcome = `network error (${(error as Error).message})`
  }
  count(outcome)
  if (outcome === "ok") took(kind, performance.now() - started)
}

const pickKind = (): Kind => {
  const r = Math.random()
  return r < 0.4
    ? "messages json"
    : r < 0.7
    ? "messages stream"
    : r < 0.85
    ? "chat stream"
    : r < 0.97
    ? "count_tokens"
    : "models"
}

const FAULTS: ReadonlyArray<Behaviour> = [
  { kind: "status", status: 429, headers: { "retry-after": "1" } },
  { kind: "status", status: 500 },
  { kind: "status", status: 529 },
  { kind: "destroy" },
  { kind: "cut", afterEvents: 4 },
  { kind: "malformed", afterEvents: 4 },
  { kind: "hang" }
]

/** A small batch every 20 s, polled to its end; skipped when the gateway has no batches. */
const batches = async (gateway: Gateway, until: number) => {
  while (Date.now() < until) {
    const created = await fetch(`${gateway.url}/v1/batches`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        endpoint: "/v1/messages",
        model: "mixed/both",
        completion_window: "24h",
        requests: Array.from({ length: 25 }, (_, i) => ({
          custom_id: `item-${i}`,
          body: { max_tokens: 32, messages: [{ role: "user", content: `Item ${i}` }] }
        }))
      })
    }).catch(() => undefined)
    if (created === undefined || created.status === 404) {
      await created?.arrayBuffer()
      count("batches: not available on this build")
      return
    }
    const batch = await created.json() as { id?: string }
    if (created.status !== 202 || batch.id === undefined) {
      count(`batch refused: HTTP ${created.status}`)
    } else {
      for (;;) {
        await sleep(1000)
        const got = await fetch(`${gateway.url}/v1/batches/${batch.id}`, { headers }).then((r) => r.json()) as {
          status: string
          request_counts?: { total: number; completed: number; failed: number }
        }
        if (["completed", "failed", "expired", "cancelled"].includes(got.status)) {
          count(`batch ${got.status}`)
          if (got.request_counts !== undefined && got.request_counts.completed + got.request_counts.failed !== 25) {
            broken.push(`a batch finished with counts ${JSON.stringify(got.request_counts)}`)
          }
          break
        }
      }
    }
    await sleep(20_000)
  }
}

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]

// ---------------------------------------------------------------------------------------------------------------------
// the run
// ---------------------------------------------------------------------------------------------------------------------

const main = async () => {
  const anthropic = await startFakeAnthropic()
  const openai = await startFakeOpenAi()
  for (const fake of [anthropic, openai]) fake.setDefault({ kind: "ok", latencyMs: 20, chunkDelayMs: 5 })
  const dir = mkdtempSync(join(tmpdir(), "mg-soak-"))
  const config = join(dir, "gateway.config.json")
  writeFileSync(config, JSON.stringify(configOf(anthropic, openai)))
  const gateways = [await startGateway("A", config, dir), await startGateway("B", config, dir)]
  const pids = gateways.map((g) => g.child.pid!)
  const fdsAtStart = pids.map(openFds)
  const rss: Array<Array<number>> = [pids.map(rssMiB)]
  const started = Date.now()
  const until = started + MINUTES * 60_000
  console.log(
    `soak: ${MINUTES} min, ${CONCURRENCY} concurrent clients, gateways ${gateways.map((g) => g.url).join(", ")}`
  )

  const faults = setInterval(() => {
    const fake = Math.random() < 0.5 ? anthropic : openai
    fake.script(FAULTS[Math.floor(Math.random() * FAULTS.length)])
    // The fakes keep every request they saw: only the counters matter here.
    anthropic.requests.length = 0
    openai.requests.length = 0
  }, 100)
  const sampler = setInterval(() => {
    rss.push(pids.map(rssMiB))
    const minute = rss.length - 1
    const served = [...outcomes.values()].reduce((a, b) => a + b, 0)
    console.log(
      `minute ${minute}: ${served} requests, RSS ${rss.at(-1)!.map((m) => `${m.toFixed(0)} MiB`).join(" / ")}`
    )
  }, 60_000)

  const worker = async (i: number) => {
    const gateway = gateways[i % gateways.length]
    while (Date.now() < until && broken.length === 0) await one(gateway, pickKind())
  }
  await Promise.all([
    ...Array.from({ length: CONCURRENCY }, (_, i) => worker(i)),
    ...gateways.map((g) => batches(g, until))
  ])
  clearInterval(faults)
  clearInterval(sampler)
  const seconds = (Date.now() - started) / 1000

  // Idle: what is left open once the traffic has stopped.
  for (const fake of [anthropic, openai]) fake.reset()
  await sleep(5_000)
  const fdsAtEnd = pids.map(openFds)
  const upstreamInFlight = anthropic.inFlight() + openai.inFlight()
  if (upstreamInFlight > 0) {
    broken.push(`${upstreamInFlight} upstream requests still open 5 s after the traffic stopped`)
  }
  rss.push(pids.map(rssMiB))

  stopping = true
  for (const g of gateways) g.child.kill("SIGTERM")
  await Promise.all(gateways.map((g) => new Promise((resolve) => g.child.once("exit", resolve))))
  await Promise.all([anthropic.close(), openai.close()])
  await dropSchema(SCHEMA)

  const served = [...outcomes.values()].reduce((a, b) => a + b, 0)
  const growth = pids.map((_, p) => {
    // Growth per minute after the first minute's warm-up: (last sample - minute 1) / minutes between.
    const from = Math.min(1, rss.length - 2)
    return (rss.at(-2)![p] - rss[from][p]) / Math.max(1, rss.length - 2 - from)
  })
  const lines = [
    `Soak: ${MINUTES} min (${
      seconds.toFixed(0)
    } s), ${CONCURRENCY} concurrent clients, 2 gateway processes, PostgreSQL`,
    `storage, Redis limits, a fault queued every 100 ms. Node ${process.version}.`,
    "",
    `Requests: ${served} (${(served / seconds).toFixed(0)}/s).`,
    "",
    "| Outcome | Count | Share |",
    "|---|---:|---:|",
    ...[...outcomes].sort((a, b) => b[1] - a[1]).map(([what, n]) =>
      `| ${what} | ${n} | ${((100 * n) / served).toFixed(2)}% |`
    ),
    "",
    "| Successful requests | p50 ms | p99 ms |",
    "|---|---:|---:|",
    ...[...latencies].map(([kind, list]) => {
      const sorted = [...list].sort((a, b) => a - b)
      return `| ${kind} | ${percentile(sorted, 50).toFixed(1)} | ${percentile(sorted, 99).toFixed(1)} |`
    }),
    "",
    `RSS per minute (MiB), A / B: ${rss.slice(0, -1).map((r) => r.map((m) => m.toFixed(0)).join("/")).join(", ")};`,
    `after 5 s idle: ${rss.at(-1)!.map((m) => m.toFixed(0)).join("/")}.`,
    `Growth per minute after the first: ${growth.map((g) => `${g.toFixed(2)} MiB`).join(" / ")}.`,
    `Open file descriptors, start → end (5 s idle): ${
      fdsAtStart.map((f, i) => `${f} → ${fdsAtEnd[i]}`).join(" / ")
    }; upstream requests still open: ${upstreamInFlight}.`,
    "",
    broken.length === 0 ? "Nothing broken." : `Broken:\n${broken.map((b) => `- ${b}`).join("\n")}`
  ]
  const report = lines.join("\n")
  console.log(`\n${report}`)
  const out = process.env.SOAK_OUT ?? join(here, ".soak", `report-${new Date().toISOString().replace(/[:.]/g, "-")}.md`)
  mkdirSync(dirname(out), { recursive: true })
  writeFileSync(out, `${report}\n`)
  console.log(`\nreport written to ${out}`)
  process.exit(broken.length === 0 ? 0 : 1)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
