/**
 * Routing policies end to end: provider preferences, outage avoidance and recovery (with a clock the
 * test moves forward), Retry-After, and session stickiness across two gateways sharing PostgreSQL.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { dropSchema, pgUrl, skipPostgres } from "../../../packages/core/test/contract/Postgres.js"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeAnthropic, startFakeOpenAi } from "../../../packages/provider-adapters/test/fakes/index.js"
import { decode } from "../src/Config.js"
import type { RunningServer } from "../src/Gateway.js"
import { startServer } from "../src/Gateway.js"
import { OffsetClock } from "./OffsetClock.js"
import { listening, type Proc, run } from "./processes.js"

const KEY = "mg-routing-key"

const config = (anthropic: FakeUpstream, openai: FakeUpstream, storage: string) =>
  decode({
    storage,
    providers: {
      anthro: { kind: "anthropic", baseUrl: anthropic.url, apiKey: "sk-a" },
      acme: { kind: "openai", baseUrl: openai.url, apiKey: "sk-o" }
    },
    models: {
      "multi/model": {
        endpoints: [
          { provider: "anthro", upstreamModel: "cheap", pricing: { prompt: "0.000001", completion: "0.000002" } },
          { provider: "acme", upstreamModel: "dear", pricing: { prompt: "0.001", completion: "0.002" } }
        ]
      },
      "even/model": {
        endpoints: [
          { provider: "anthro", upstreamModel: "even-a", pricing: { prompt: "0.000002", completion: "0.000002" } },
          { provider: "acme", upstreamModel: "even-b", pricing: { prompt: "0.000002", completion: "0.000002" } }
        ]
      }
    },
    keys: [{ key: KEY, management: true }]
  }).config

const ask = (url: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  fetch(`${url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}`, ...headers },
    body: JSON.stringify({ max_tokens: 10, messages: [{ role: "user", content: "hello" }], ...body })
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }))

describe("provider preferences and health", () => {
  let anthropic: FakeUpstream
  let openai: FakeUpstream
  let gateway: RunningServer
  const clock = new OffsetClock()

  beforeAll(async () => {
    anthropic = await startFakeAnthropic()
    openai = await startFakeOpenAi()
    gateway = await startServer(config(anthropic, openai, "memory:"), {
      host: "127.0.0.1",
      port: 0,
      clock,
      requestLog: false
    })
  })
  afterAll(async () => {
    await gateway.close(1000)
    await Promise.all([anthropic.close(), openai.close()])
  })
  beforeEach(() => {
    anthropic.reset()
    openai.reset()
  })

  it("rejects an unknown provider preference with a 400 naming it", async () => {
    const { body, status } = await ask(gateway.url, { model: "multi/model", provider: { bogus: true } })
    expect(status).toBe(400)
    expect(body.error.message).toMatch(/^provider\.bogus/)
  })

  it("honours only, ignore, order and allow_fallbacks", async () => {
    expect((await ask(gateway.url, { model: "multi/model", provider: { only: ["acme"] } })).body.provider).toBe("acme")
    expect((await ask(gateway.url, { model: "multi/model", provider: { ignore: ["anthro"] } })).body.provider).toBe(
      "acme"
    )
    expect((await ask(gateway.url, { model: "multi/model", provider: { order: ["acme", "anthro"] } })).body.provider)
      .toBe("acme")
    expect((await ask(gateway.url, { model: "multi/model" })).body.provider).toBe("anthro")
    const before = openai.requests.length
    anthropic.script({ kind: "status", status: 500 })
    const strict = await ask(gateway.url, {
      model: "multi/model",
      provider: { order: ["anthro"], allow_fallbacks: false }
    })
    expect(strict.status).toBe(500)
    expect(openai.requests).toHaveLength(before)
  })

  it("avoids an endpoint in an outage, then returns to it once it heals", async () => {
    clock.offset += 10 * 60_000
    expect((await ask(gateway.url, { model: "multi/model" })).body.provider).toBe("anthro")
    anthropic.reset()
    anthropic.setDefault({ kind: "status", status: 500 })
    for (let i = 0; i < 3; i++) {
      const { body, status } = await ask(gateway.url, { model: "multi/model" })
      expect(status).toBe(200)
      expect(body.provider).toBe("acme")
    }
    expect(anthropic.requests).toHaveLength(3)
    for (let i = 0; i < 3; i++) {
      const { body } = await ask(gateway.url, { model: "multi/model" }, { "x-service-metadata": "enabled" })
      expect(body.provider).toBe("acme")
      expect(body.service_metadata.pipeline.map((s: any) => s.summary).join("\n")).not.toContain("failed")
    }
    expect(anthropic.requests).toHaveLength(3)
    anthropic.setDefault({ kind: "ok" })
    clock.offset += 5 * 60_000
    const healed = await ask(gateway.url, { model: "multi/model" })
    expect(healed.body.provider).toBe("anthro")
    expect((await ask(gateway.url, { model: "multi/model" })).body.provider).toBe("anthro")
  })

  it("honours an upstream Retry-After", async () => {
    clock.offset += 10 * 60_000
    anthropic.script({ kind: "status", status: 429, headers: { "retry-after": "20" } })
    expect((await ask(gateway.url, { model: "multi/model" })).body.provider).toBe("acme")
    expect((await ask(gateway.url, { model: "multi/model" })).body.provider).toBe("acme")
    expect(anthropic.requests).toHaveLength(1)
    clock.offset += 21_000
    expect((await ask(gateway.url, { model: "multi/model" })).body.provider).toBe("anthro")
  })
})

const skipPg = skipPostgres("the stickiness test")

describe.skipIf(skipPg)("session stickiness across two gateway processes sharing PostgreSQL", () => {
  let anthropic: FakeUpstream
  let openai: FakeUpstream
  const procs: Array<Proc> = []
  const urls: Array<string> = []
  const schema = `mg_e2e_${Math.random().toString(36).slice(2, 10)}`

  /** The fakes report a cache read only when the same conversation reaches them a second time. */
  const caching = (fake: FakeUpstream) => {
    const seen = new Set<string>()
    fake.setReply((body) => {
      const key = JSON.stringify(body.messages?.[0])
      const hit = seen.has(key)
      seen.add(key)
      return { text: "ok", usage: { input: 10, output: 2, cacheRead: hit ? 500 : 0 } }
    })
  }

  beforeAll(async () => {
    anthropic = await startFakeAnthropic()
    openai = await startFakeOpenAi()
    caching(anthropic)
    caching(openai)
    const dir = mkdtempSync(join(tmpdir(), "mg-sticky-"))
    const path = join(dir, "gateway.config.json")
    const file = {
      server: { port: 0 },
      storage: `${pgUrl}?schema=${schema}`,
      providers: {
        anthro: { kind: "anthropic", baseUrl: anthropic.url, apiKey: "sk-a" },
        acme: { kind: "openai", baseUrl: openai.url, apiKey: "sk-o" }
      },
      models: {
        "even/model": {
          endpoints: [
            { provider: "anthro", upstreamModel: "even-a", pricing: { prompt: "0.000002", completion: "0.000002" } },
            { provider: "acme", upstreamModel: "even-b", pricing: { prompt: "0.000002", completion: "0.000002" } }
          ]
        }
      },
      keys: [{ key: KEY, management: true }]
    }
    writeFileSync(path, JSON.stringify(file))
    // one process first, so that the schema's migrations are not raced
    for (let i = 0; i < 2; i++) {
      const proc = run({ GATEWAY_CONFIG: path }, dir)
      procs.push(proc)
      urls.push(await listening(proc))
    }
  })
  afterAll(async () => {
    for (const proc of procs) proc.child.kill("SIGTERM")
    await Promise.all(procs.map((p) => p.exited))
    await Promise.all([anthropic?.close(), openai?.close()])
    await dropSchema(schema)
  })

  it("routes every request of a session to the same endpoint from either process, hitting its prompt cache", async () => {
    const [one, two] = urls
    const providers = new Set<string>()
    for (let s = 0; s < 16; s++) {
      const session = `session-${s}-${schema}`
      const conversation = { model: "even/model", messages: [{ role: "user", content: `conversation ${session}` }] }
      const first = await ask(one, { ...conversation, session_id: session })
      const second = await ask(two, { ...conversation, session_id: session })
      const third = await ask(one, conversation, { "x-session-id": session })
      const fourth = await ask(two, { ...conversation, session_id: session }, { "x-session-id": "another" })
      expect(first.status).toBe(200)
      for (const later of [second, third, fourth]) {
        expect(later.body.provider).toBe(first.body.provider)
        expect(later.body.usage.cache_read_input_tokens).toBe(500)
      }
      expect(first.body.usage.cache_read_input_tokens).toBe(0)
      providers.add(first.body.provider)
    }
    expect([...providers].sort()).toEqual(["acme", "anthro"])
  })
})
