/**
 * Limits exact across replicas: three gateway processes (`packages/server/dist/bundle/model-gateway.js`) share one Redis, or one
 * PostgreSQL database, and take 300 concurrent requests spread over them. With a limit of 100 requests per minute,
 * exactly 100 pass and 200 get 429; with a budget that pays for exactly 100 requests, exactly 100 pass and 200 get 402.
 */
import { existsSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { dropSchema, pgUp, pgUrl, skipPostgres } from "../../../packages/core/test/contract/Postgres.js"
import { redisPrefix, redisUp, redisUrl, skipRedis } from "../../../packages/core/test/contract/Redis.js"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeAnthropic } from "../../../packages/provider-adapters/test/fakes/index.js"
import type { Proc } from "./processes.js"
import { command, listening, MAIN, run } from "./processes.js"

const RATE_KEY = "mg-test-replicas-rate"
const BUDGET_KEY = "mg-test-replicas-budget"
const REPLICAS = 3
const REQUESTS = 300

let upstream: FakeUpstream
let dir: string

beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\` (npm test does) first`)
  upstream = await startFakeAnthropic()
  dir = mkdtempSync(join(tmpdir(), "mg-replicas-"))
})
afterAll(() => upstream?.close())

/** Every request costs exactly $0.01 (a per-request price, no token prices): $1 pays for exactly 100 of them. */
const configOf = (storage: string, limits: Record<string, unknown>) => ({
  storage,
  limits,
  providers: { anthro: { kind: "anthropic", baseUrl: upstream.url, apiKey: "sk-up" } },
  models: {
    "anthro/claude": {
      endpoints: [{
        provider: "anthro",
        upstreamModel: "claude-x",
        pricing: { prompt: "0", completion: "0", request: "0.01" }
      }]
    }
  },
  keys: [
    { key: RATE_KEY, workspace: "rate", limits: { requestsPerMinute: 100 } },
    { key: BUDGET_KEY, workspace: "budget", limits: { budget: { usd: "1", period: "day" } } }
  ]
})

/** Starts the replicas one after the other (so that a fresh PostgreSQL schema is migrated once), all listening. */
const startReplicas = async (config: unknown): Promise<{ procs: Array<Proc>; urls: Array<string> }> => {
  const path = join(dir, `config-${Math.random().toString(36).slice(2)}.json`)
  writeFileSync(path, JSON.stringify(config))
  const procs: Array<Proc> = []
  const urls: Array<string> = []
  for (let i = 0; i < REPLICAS; i++) {
    const proc = run({ GATEWAY_CONFIG: path, PORT: "0" }, dir)
    procs.push(proc)
    urls.push(
      await listening(proc).catch((error) => {
        for (const p of procs) p.child.kill("SIGTERM")
        throw error
      })
    )
  }
  return { procs, urls }
}

const stopReplicas = async (procs: ReadonlyArray<Proc>) => {
  for (const proc of procs) proc.child.kill("SIGTERM")
  await Promise.all(procs.map((proc) => proc.exited))
}

/** 300 requests at once, round-robin over the replicas; the count of each status. */
const burst = async (urls: ReadonlyArray<string>, key: string): Promise<Record<number, number>> => {
  const statuses = await Promise.all(Array.from({ length: REQUESTS }, async (_, i) => {
    const response = await fetch(`${urls[i % urls.length]}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "anthro/claude", max_tokens: 5, messages: [{ role: "user", content: "hi" }] })
    })
    await response.arrayBuffer()
    return response.status
  }))
  const counts: Record<number, number> = {}
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1
  return counts
}

const replicaSuite = (name: string, config: () => unknown) => {
  let procs: Array<Proc> = []
  let urls: Array<string> = []
  beforeAll(async () => {
    ;({ procs, urls } = await startReplicas(config()))
  }, 60_000)
  afterAll(() => stopReplicas(procs), 30_000)

  it(`${name}: 100 requests per minute, 300 at once over ${REPLICAS} processes: exactly 100 pass`, async () => {
    upstream.reset()
    expect(await burst(urls, RATE_KEY)).toEqual({ 200: 100, 429: 200 })
    expect(upstream.requests).toHaveLength(100)
  }, 60_000)

  it(
    `${name}: a budget for exactly 100 requests, 300 at once over ${REPLICAS} processes: exactly 100 pass`,
    async () => {
      upstream.reset()
      expect(await burst(urls, BUDGET_KEY)).toEqual({ 200: 100, 402: 200 })
      expect(upstream.requests).toHaveLength(100)
    },
    60_000
  )
}

const skipR = skipRedis("the limits across gateway processes sharing Redis")
describe.skipIf(skipR)("three gateway processes sharing Redis", () => {
  const prefix = redisPrefix()
  afterAll(async () => {
    if (!redisUp) return
    const { Redis } = await import("ioredis")
    const client = new Redis(redisUrl)
    const keys = await client.keys(`${prefix}*`)
    if (keys.length > 0) await client.del(...keys)
    await client.quit()
  })
  replicaSuite("Redis", () => configOf("memory:", { store: "redis", redisUrl, redisPrefix: prefix }))
})

const skipP = skipPostgres("the limits across gateway processes sharing PostgreSQL")
describe.skipIf(skipP)("three gateway processes sharing PostgreSQL", () => {
  const schema = `mg_e2e_limits_${Math.random().toString(36).slice(2, 10)}`
  afterAll(async () => {
    if (pgUp) await dropSchema(schema)
  })
  replicaSuite("PostgreSQL", () => configOf(`${pgUrl}?schema=${schema}`, {}))
})

describe("a key made with limits by the command", () => {
  it("is stored with them, listed with them, and held to them by the server", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "mg-limits-cli-"))
    const path = join(cwd, "config.json")
    writeFileSync(path, JSON.stringify({ ...configOf("sqlite:./data/gateway.db", {}), keys: [] }))
    const env = { GATEWAY_CONFIG: path }
    const created = await command(env, cwd, [
      "keys",
      "create",
      "--workspace",
      "cli",
      "--requests-per-minute",
      "1",
      "--budget-usd",
      "0.5",
      "--budget-period",
      "week"
    ])
    expect(created.code).toBe(0)
    expect(created.output).toContain("limited to 1 req/min, $0.5/week")
    const secret = /\n(mg-\S+)/.exec(created.output)![1]
    const listed = await command(env, cwd, ["keys", "list"])
    expect(listed.output).toMatch(/LIMITS/)
    expect(listed.output).toContain("1 req/min, $0.5/week")
    const proc = run({ ...env, PORT: "0" }, cwd)
    try {
      const url = await listening(proc)
      const send = () =>
        fetch(`${url}/v1/messages`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${secret}` },
          body: JSON.stringify({ model: "anthro/claude", max_tokens: 5, messages: [{ role: "user", content: "hi" }] })
        })
      const first = await send()
      expect(first.status).toBe(200)
      expect(first.headers.get("x-service-budget-remaining")).toBe("0.49")
      expect((await send()).status).toBe(429)
    } finally {
      proc.child.kill("SIGTERM")
      await proc.exited
    }
    const bad = await command(env, cwd, ["keys", "create", "--requests-per-minute", "0"])
    expect(bad.code).toBe(1)
    expect(bad.output).toContain("--requests-per-minute must be a whole number above 0")
  }, 90_000)
})
