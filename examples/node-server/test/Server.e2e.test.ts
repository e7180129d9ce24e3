/**
 * The example server as a real process (`node examples/node-server/dist/main.js`, built by `npm test`'s
 * typecheck step): configuration errors, the zero-config start, and graceful shutdown on SIGTERM.
 */
import { existsSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeAnthropic } from "../../../packages/provider-adapters/test/fakes/index.js"
import { readEvents } from "./harness.js"
import { listening, MAIN, printed, run } from "./processes.js"

let upstream: FakeUpstream
let dir: string

beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\` (npm test does) first`)
  upstream = await startFakeAnthropic()
  dir = mkdtempSync(join(tmpdir(), "mg-server-"))
})
afterAll(() => upstream.close())

const writeConfig = (config: unknown) => {
  const path = join(dir, `config-${Math.random().toString(36).slice(2)}.json`)
  writeFileSync(path, JSON.stringify(config))
  return path
}

const goodConfig = () => ({
  server: { port: 0 },
  storage: "sqlite:./data/test.db",
  providers: { anthro: { kind: "anthropic", baseUrl: upstream.url, apiKey: "${UPSTREAM_KEY}" } },
  models: {
    "anthro/claude": {
      endpoints: [{
        provider: "anthro",
        upstreamModel: "claude-x",
        pricing: { prompt: "0.000003", completion: "0.000015" }
      }]
    }
  },
  keys: [{ key: "${GATEWAY_API_KEY}", workspace: "default", management: true }],
  futureKey: true
})

describe("the example server process", () => {
  it("refuses to start on a bad configuration value, naming the key", async () => {
    const config = goodConfig()
    ;(config.models["anthro/claude"].endpoints[0].pricing as { prompt: unknown }).prompt = 3
    const proc = run({ GATEWAY_CONFIG: writeConfig(config) }, dir)
    expect(await proc.exited).toBe(1)
    expect(proc.output).toContain("models.anthro/claude.endpoints[0].pricing.prompt")
  })

  it("starts with a configuration file, warns on unknown keys, and shuts down gracefully on SIGTERM", async () => {
    upstream.reset()
    const proc = run({
      GATEWAY_CONFIG: writeConfig(goodConfig()),
      GATEWAY_API_KEY: "mg-proc-key",
      UPSTREAM_KEY: "sk-up",
      PORT: "0"
    }, dir)
    const url = await listening(proc)
    expect(proc.output).toContain("unknown configuration key futureKey")
    expect(proc.output).not.toContain("mg-proc-key")
    upstream.script({ kind: "ok", chunkDelayMs: 150 })
    const response = await fetch(`${url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "mg-proc-key" },
      body: JSON.stringify({
        model: "anthro/claude",
        max_tokens: 20,
        stream: true,
        messages: [{ role: "user", content: "one two three four five" }]
      })
    })
    expect(response.status).toBe(200)
    proc.child.kill("SIGTERM")
    const events = await readEvents(response)
    expect(events.at(-1)?.event).toBe("message_stop")
    expect(await proc.exited).toBe(0)
    expect(upstream.requests[0].headers["x-api-key"]).toBe("sk-up")
    await expect(fetch(`${url}/health`)).rejects.toThrow()
  })

  it("starts with no configuration at all, on SQLite in ./data, printing a generated key once", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "mg-zero-"))
    const proc = run({ PORT: "0" }, cwd)
    const url = await listening(proc)
    // Printed after the listening line, maybe in a later chunk of output.
    const key = await printed(proc, /generated a management key.*\n\s+(mg-\S+)\s/, "the generated key")
    expect(key).toMatch(/^mg-/)
    const response = await fetch(`${url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "anything", max_tokens: 5, messages: [] })
    })
    expect(response.status).toBe(404)
    expect(existsSync(join(cwd, "data", "gateway.db"))).toBe(true)
    proc.child.kill("SIGTERM")
    expect(await proc.exited).toBe(0)
  })
})
