/**
 * A configuration reload (`Gateway.reload`, what SIGHUP runs in the server process): the new models, keys and HTTP
 * providers are taken while a stream started before it goes on to its end with the catalogue and the adapter it
 * started with; a configuration that changes what needs a restart (the server, the storage, the local speech engine,
 * ...) is refused whole, naming what changed, and the running one stays.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeAnthropic } from "../../../packages/provider-adapters/test/fakes/index.js"
import { decode, type GatewayConfig } from "../src/Config.js"
import { type RunningServer, startServer } from "../src/Gateway.js"
import { changedProviders, needsRestart, ReloadRefused } from "../src/Reload.js"
import { json, readEvents } from "./harness.js"

const pricing = { prompt: "0.000003", completion: "0.000015" }

let upstream: FakeUpstream
let server: RunningServer

const configOf = (options: {
  readonly models: ReadonlyArray<string>
  readonly keys: ReadonlyArray<string>
  readonly apiKey?: string
  readonly extra?: Record<string, unknown>
}): GatewayConfig =>
  decode({
    storage: "memory:",
    providers: { anthro: { kind: "anthropic", baseUrl: upstream.url, apiKey: options.apiKey ?? "sk-up" } },
    models: Object.fromEntries(
      options.models.map((id) => [id, { endpoints: [{ provider: "anthro", upstreamModel: "claude-x", pricing }] }])
    ),
    keys: options.keys.map((key) => ({ key, workspace: "default", management: true })),
    ...options.extra
  }).config

beforeAll(async () => {
  upstream = await startFakeAnthropic()
  server = await startServer(configOf({ models: ["anthro/one"], keys: ["mg-first"] }), {
    port: 0,
    host: "127.0.0.1",
    requestLog: false
  })
})
afterAll(async () => {
  await server.close(1_000)
  await upstream.close()
})

const send = (model: string, key: string, stream = false) =>
  fetch(`${server.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": key },
    body: JSON.stringify({ model, max_tokens: 20, stream, messages: [{ role: "user", content: "one two three" }] })
  })

const modelIds = async (key: string) => {
  const response = await fetch(`${server.url}/v1/models`, { headers: { "x-api-key": key } })
  expect(response.status).toBe(200)
  return (await json(response)).data.map((m: { id: string }) => m.id)
}

describe("Gateway.reload", () => {
  it("takes the new models and keys; a stream under way finishes with the catalogue it started with", async () => {
    expect(await modelIds("mg-first")).toEqual(["anthro/one"])
    // 12 chunks 150 ms apart: the reload lands in the middle of the stream.
    upstream.script({ kind: "ok", chunkDelayMs: 150 })
    const streaming = await send("anthro/one", "mg-first", true)
    expect(streaming.status).toBe(200)

    const done = await server.gateway.reload(configOf({ models: ["anthro/two", "anthro/three"], keys: ["mg-second"] }))
    expect(done).toEqual({ models: 2, keys: { added: 1, kept: 0, revoked: 1 }, providers: [] })

    const events = await readEvents(streaming)
    expect(events[0]?.event).toBe("message_start")
    expect(events[0]?.data.message.model).toBe("anthro/one")
    expect(events.at(-1)?.event).toBe("message_stop")
    expect(events.some((e) => e.event === "error")).toBe(false)

    expect((await send("anthro/one", "mg-first")).status).toBe(401)
    expect((await send("anthro/one", "mg-second")).status).toBe(404)
    const answered = await send("anthro/two", "mg-second")
    expect(answered.status).toBe(200)
    expect((await json(answered)).model).toBe("anthro/two")
    expect(await modelIds("mg-second")).toEqual(["anthro/two", "anthro/three"])
  })

  it("rebuilds a provider whose key rotated: a stream under way ends on the old adapter, which then closes its connections; the next call has the new key", async () => {
    const keyOf = (i: number) => upstream.requests[i]!.headers["x-api-key"]
    upstream.script({ kind: "ok", chunkDelayMs: 150 })
    const first = upstream.requests.length
    const streaming = await send("anthro/two", "mg-second", true)
    expect(streaming.status).toBe(200)

    const rotated = configOf({ models: ["anthro/two", "anthro/three"], keys: ["mg-second"], apiKey: "sk-rotated" })
    expect(await server.gateway.reload(rotated)).toEqual({
      models: 2,
      keys: { added: 0, kept: 1, revoked: 0 },
      providers: ["anthro"]
    })
    expect((await readEvents(streaming)).at(-1)?.event).toBe("message_stop")
    // The old adapter is retired: its idle connections closed with the reload, the stream's once it ended; nothing of
    // it is left open (before, they stayed in its pool for the pool's idle time, the adapter until shutdown).
    await expect.poll(() => upstream.connections(), { timeout: 2_000 }).toBe(0)
    expect((await send("anthro/three", "mg-second")).status).toBe(200)
    expect([keyOf(first), keyOf(first + 1)]).toEqual(["sk-up", "sk-rotated"])
    // The new adapter keeps its connection alive, as any pool does.
    await expect.poll(() => upstream.connections(), { timeout: 2_000 }).toBe(1)
  })

  it("refuses a configuration that changes the server or the storage, taking none of it", async () => {
    const before = await modelIds("mg-second")
    const served = configOf({
      models: ["anthro/four"],
      keys: ["mg-third"],
      apiKey: "sk-third",
      extra: { server: { headersTimeoutMs: 5_000 } }
    })
    const refusal = await server.gateway.reload(served).then(() => undefined, (error: unknown) => error)
    expect(refusal).toBeInstanceOf(ReloadRefused)
    expect((refusal as ReloadRefused).changed).toEqual(["server"])
    expect((refusal as ReloadRefused).message).toMatch(/^configuration not reloaded: server changed/)
    const stored = configOf({ models: ["anthro/four"], keys: ["mg-third"], extra: { storage: "sqlite::memory:" } })
    const again = await server.gateway.reload(stored).then(() => undefined, (error: unknown) => error)
    expect((again as ReloadRefused).changed).toEqual(["storage"])

    // Nothing was taken: the same models, the old key still works, the new one does not, the provider's key is kept.
    expect(await modelIds("mg-second")).toEqual(before)
    expect((await send("anthro/two", "mg-third")).status).toBe(401)
    expect((await send("anthro/two", "mg-second")).status).toBe(200)
    expect(upstream.requests.at(-1)!.headers["x-api-key"]).toBe("sk-rotated")
  })
})

describe("needsRestart", () => {
  const base = () => configOf({ models: ["anthro/one"], keys: ["mg-a"] })

  it("is empty for models, keys and maxTokensPolicy, and for the same configuration with its keys in another order", () => {
    const running = base()
    const next = configOf({ models: ["anthro/two"], keys: ["mg-b"], extra: { maxTokensPolicy: "strict" } })
    expect(needsRestart(running, next)).toEqual([])
    const anthro = Object.fromEntries(Object.entries(running.providers.anthro).reverse())
    const reordered = { ...running, providers: { anthro } } as unknown as GatewayConfig
    expect(Object.keys(reordered.providers.anthro)).not.toEqual(Object.keys(running.providers.anthro))
    expect(needsRestart(running, reordered)).toEqual([])
  })

  it("names each section that changed and each provider that cannot be rebuilt; HTTP providers changed or added, and dropped ones, are none", () => {
    const withOne = (extra: Record<string, unknown>) => configOf({ models: ["anthro/one"], keys: ["mg-a"], extra })
    const running = withOne({
      providers: {
        anthro: { kind: "anthropic", baseUrl: "http://a", apiKey: "k" },
        old: { kind: "openai", baseUrl: "http://o" },
        speech: { kind: "local-speech", workers: 1 },
        becomes: { kind: "openai", baseUrl: "http://b" }
      }
    })
    const next = withOne({
      providers: {
        anthro: { kind: "anthropic", baseUrl: "http://a", apiKey: "rotated" },
        added: { kind: "openai", baseUrl: "http://n" },
        speech: { kind: "local-speech", workers: 2 },
        becomes: { kind: "local-speech" },
        voice: { kind: "local-speech" }
      },
      storage: "sqlite::memory:",
      workspaces: { team: { limits: { requestsPerMinute: 5 } } }
    })
    expect(needsRestart(running, next)).toEqual([
      "storage",
      "providers.speech",
      "providers.becomes",
      "providers.voice",
      "workspaces"
    ])
    expect(changedProviders(running, next)).toEqual(["anthro", "added", "speech", "becomes", "voice"])
  })
})
