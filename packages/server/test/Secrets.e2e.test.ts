/**
 * Secrets never leave: a whole run of the server process (debug logging, JSON lines) over many routes, with providers
 * that quote the credentials they refuse, and then every key used is looked for in everything the run produced: the
 * process output, each response's status line, headers and body, and the SQLite database file.
 */
import { randomBytes } from "node:crypto"
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeAnthropic, startFakeOpenAi } from "../../../packages/provider-adapters/test/fakes/index.js"
import { command, listening, MAIN, printed, run } from "./processes.js"

const secret = (prefix: string) => `${prefix}${randomBytes(18).toString("base64url")}`

const MANAGEMENT = secret("mg-mgmt-")
const TEAM = secret("mg-team-")
const WRONG = secret("mg-")
const ANTHROPIC_KEY = secret("sk-ant-api03-")
const OPENAI_KEY = secret("sk-proj-")

let anthropic: FakeUpstream
let openai: FakeUpstream
let dir: string

beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\` (npm test does) first`)
  anthropic = await startFakeAnthropic()
  openai = await startFakeOpenAi()
  dir = mkdtempSync(join(tmpdir(), "mg-secrets-"))
})
afterAll(() => Promise.all([anthropic.close(), openai.close()]))

const pricing = { prompt: "0.000003", completion: "0.000015" }

describe("secrets", () => {
  it("no key, gateway's or provider's, appears in logs, answers or the database, whatever happens", async () => {
    const config = join(dir, "gateway.config.json")
    writeFileSync(
      config,
      JSON.stringify({
        server: { port: 0 },
        storage: "sqlite:./data/gateway.db",
        providers: {
          anthro: { kind: "anthropic", baseUrl: anthropic.url, apiKey: "${ANTHROPIC_API_KEY}" },
          acme: { kind: "openai", baseUrl: openai.url, apiKey: "${OPENAI_API_KEY}" }
        },
        models: {
          "anthro/claude": { endpoints: [{ provider: "anthro", upstreamModel: "claude-x", pricing }] },
          "acme/gpt": { endpoints: [{ provider: "acme", upstreamModel: "gpt-x", pricing }] },
          "mixed/both": {
            endpoints: [
              { provider: "anthro", upstreamModel: "claude-x", pricing },
              { provider: "acme", upstreamModel: "gpt-x", pricing }
            ]
          }
        },
        keys: [
          { key: "${MANAGEMENT_KEY}", workspace: "default", management: true, interns: true },
          { key: "${TEAM_KEY}", workspace: "team-b" }
        ]
      })
    )
    const env = {
      GATEWAY_CONFIG: config,
      MANAGEMENT_KEY: MANAGEMENT,
      TEAM_KEY: TEAM,
      ANTHROPIC_API_KEY: ANTHROPIC_KEY,
      OPENAI_API_KEY: OPENAI_KEY,
      LOG_FORMAT: "json",
      LOG_LEVEL: "debug"
    }
    const created = await command(env, dir, ["keys", "create", "--workspace", "team-c"])
    const cliKey = /\n(mg-\S+)/.exec(created.output)?.[1]
    expect(cliKey).toMatch(/^mg-/)

    const proc = run({ ...env, PORT: "0" }, dir)
    const url = await listening(proc)
    const seen: Array<string> = []
    const call = async (path: string, key: string, body?: unknown, method = body === undefined ? "GET" : "POST") => {
      const response = await fetch(`${url}${path}`, {
        method,
        headers: { "content-type": "application/json", authorization: `Bearer ${key}`, "x-api-key": key },
        body: body === undefined ? undefined : JSON.stringify(body)
      })
      const text = await response.text()
      seen.push(`${response.status} ${JSON.stringify([...response.headers])} ${text}`)
      return response.status
    }
    const message = (model: string, extra: object = {}) => ({
      model,
      max_tokens: 8,
      messages: [{ role: "user", content: "hello" }],
      ...extra
    })
    const chat = (model: string) => ({ model, messages: [{ role: "user", content: "hello" }] })

    // Ordinary traffic with every key.
    for (const key of [MANAGEMENT, TEAM, cliKey!]) {
      expect(await call("/v1/messages", key, message("anthro/claude"))).toBe(200)
      expect(await call("/v1/messages", key, message("acme/gpt", { stream: true }))).toBe(200)
      expect(await call("/v1/chat/completions", key, chat("anthro/claude"))).toBe(200)
      expect(await call("/v1/messages/count_tokens", key, message("anthro/claude"))).toBe(200)
      expect(await call("/v1/models", key)).toBe(200)
    }
    // Refusals: a wrong key, a regular key on a management route, bad bodies.
    expect(await call("/v1/messages", WRONG, message("anthro/claude"))).toBe(401)
    expect(await call("/v1/endpoints/zdr", TEAM)).toBe(403)
    expect(await call("/v1/endpoints/zdr", MANAGEMENT)).toBe(200)
    expect(await call("/v1/messages", TEAM, { model: 3 })).toBe(400)
    expect(await call("/v1/interns/nope", TEAM)).toBe(404)
    // Providers refusing the gateway's credentials, quoting them as some do.
    anthropic.setDefault({
      kind: "status",
      status: 401,
      body: { type: "error", error: { type: "authentication_error", message: `invalid x-api-key: ${ANTHROPIC_KEY}` } }
    })
    openai.setDefault({
      kind: "status",
      status: 401,
      body: { error: { message: `Incorrect API key provided: ${OPENAI_KEY}.`, type: "invalid_request_error" } }
    })
    expect(await call("/v1/messages", MANAGEMENT, message("anthro/claude"))).toBe(502)
    expect(await call("/v1/chat/completions", MANAGEMENT, chat("acme/gpt"))).toBe(502)
    expect(await call("/v1/messages", MANAGEMENT, message("mixed/both", { stream: true }))).toBe(502)
    // And a 400 that quotes it.
    anthropic.setDefault({
      kind: "status",
      status: 400,
      body: { type: "error", error: { type: "invalid_request_error", message: `bad request for key ${ANTHROPIC_KEY}` } }
    })
    expect(await call("/v1/messages", MANAGEMENT, message("anthro/claude"))).toBe(400)
    // The upstreams did get the keys (so the test would see them if they leaked).
    expect(anthropic.requests.some((r) => r.headers["x-api-key"] === ANTHROPIC_KEY)).toBe(true)
    expect(openai.requests.some((r) => r.headers.authorization === `Bearer ${OPENAI_KEY}`)).toBe(true)
    anthropic.reset()
    openai.reset()

    await printed(proc, /("POST \/v1\/messages 400 [^"]*")/, "the last request's log line")
    proc.child.kill("SIGTERM")
    expect(await proc.exited).toBe(0)

    const logs = proc.output
    expect(logs.split("\n").filter((l) => /"(?:GET|POST) \/v1\//.test(l)).length).toBe(24)
    const database = readdirSync(join(dir, "data")).map((f) => readFileSync(join(dir, "data", f)).toString("latin1"))
    for (const key of [MANAGEMENT, TEAM, WRONG, cliKey!, ANTHROPIC_KEY, OPENAI_KEY]) {
      expect(logs, "logs").not.toContain(key)
      for (const answer of seen) expect(answer, "an answer").not.toContain(key)
      for (const file of database) expect(file.includes(key), "the database").toBe(false)
    }
  }, 60_000)
})
