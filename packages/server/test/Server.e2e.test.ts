/**
 * The example server as a real process (`node packages/server/dist/bundle/model-gateway.js`, built by `npm test`'s
 * typecheck step): configuration errors, the zero-config start, and graceful shutdown on SIGTERM.
 */
import Database from "better-sqlite3"
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeAnthropic } from "../../../packages/provider-adapters/test/fakes/index.js"
import { readEvents } from "./harness.js"
import { command, listening, MAIN, printed, run } from "./processes.js"

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

const messages = (url: string, key: string) =>
  fetch(`${url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: "anthro/claude", max_tokens: 5, messages: [{ role: "user", content: "hi" }] })
  })

/** Starts a server with `env`, waits until it listens, runs `f` with its URL, then stops it with SIGTERM. */
const withServer = async <A>(env: Record<string, string>, cwd: string, f: (url: string) => Promise<A>) => {
  const proc = run({ PORT: "0", UPSTREAM_KEY: "sk-up", ...env }, cwd)
  const url = await listening(proc)
  try {
    return await f(url)
  } finally {
    proc.child.kill("SIGTERM")
    expect(await proc.exited).toBe(0)
  }
}

// Each test starts several gateway processes (a few seconds each on a loaded machine): more time than the default.
describe("the gateway server process", { timeout: 60_000 }, () => {
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
    expect(proc.output).not.toContain("is not set")
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

  it("says at start which provider key's environment variable is not set", async () => {
    const proc = run({ GATEWAY_CONFIG: writeConfig(goodConfig()), GATEWAY_API_KEY: "mg-proc-key", PORT: "0" }, dir)
    await listening(proc)
    proc.child.kill("SIGTERM")
    expect(await proc.exited).toBe(0)
    expect(proc.output).toContain(
      "configuration key providers.anthro.apiKey: environment variable UPSTREAM_KEY is not set (it expands to \\\"\\\")"
    )
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
    // A reload with still no key configured keeps the run's key: whoever holds it is not locked out.
    proc.child.kill("SIGHUP")
    await printed(
      proc,
      /(configuration reloaded from the environment: \d+ model\(s\); keys 0 added, 0 revoked)/,
      "the reload"
    )
    expect((await messages(url, key)).status).toBe(404)
    proc.child.kill("SIGTERM")
    expect(await proc.exited).toBe(0)

    // The key was for that run: the next start generates another, and the first no longer works.
    const again = run({ PORT: "0" }, cwd)
    const nextUrl = await listening(again)
    const next = await printed(again, /generated a management key.*\n\s+(mg-\S+)\s/, "the generated key")
    expect(next).not.toBe(key)
    expect((await messages(nextUrl, key)).status).toBe(401)
    expect((await messages(nextUrl, next)).status).toBe(404)
    again.child.kill("SIGTERM")
    expect(await again.exited).toBe(0)
  })

  it("syncs configuration keys at every start: a key removed from the configuration stops working", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "mg-keys-"))
    const config = (keys: Array<string>) =>
      writeConfig({ ...goodConfig(), futureKey: undefined, keys: keys.map((key) => ({ key, management: true })) })
    await withServer({ GATEWAY_CONFIG: config(["mg-a", "mg-b"]) }, cwd, async (url) => {
      expect((await messages(url, "mg-a")).status).toBe(200)
      expect((await messages(url, "mg-b")).status).toBe(200)
    })
    await withServer({ GATEWAY_CONFIG: config(["mg-b"]) }, cwd, async (url) => {
      expect((await messages(url, "mg-a")).status).toBe(401)
      expect((await messages(url, "mg-b")).status).toBe(200)
    })
    // GATEWAY_API_KEY is a configuration key too: set once, it does not outlive its removal.
    await withServer({ GATEWAY_CONFIG: config([]), GATEWAY_API_KEY: "mg-env" }, cwd, async (url) => {
      expect((await messages(url, "mg-env")).status).toBe(200)
    })
    await withServer({ GATEWAY_CONFIG: config(["mg-b"]) }, cwd, async (url) => {
      expect((await messages(url, "mg-env")).status).toBe(401)
    })
  })

  it("SIGHUP reloads the file's models, keys and providers; a bad file, or one that needs a restart, is refused in one line", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "mg-reload-"))
    const path = join(cwd, "gateway.json")
    const write = (
      models: ReadonlyArray<string>,
      keys: ReadonlyArray<string>,
      change: Record<string, unknown> = {}
    ) => {
      const base = goodConfig()
      const endpoints = base.models["anthro/claude"].endpoints
      writeFileSync(
        path,
        JSON.stringify({
          ...base,
          futureKey: undefined,
          models: Object.fromEntries(models.map((id) => [id, { endpoints }])),
          keys: keys.map((key) => ({ key, management: true })),
          ...change
        })
      )
    }
    write(["anthro/claude"], ["mg-one"])
    const proc = run({ GATEWAY_CONFIG: path, PORT: "0", UPSTREAM_KEY: "sk-up" }, cwd)
    const url = await listening(proc)
    try {
      expect((await messages(url, "mg-one")).status).toBe(200)

      write(["anthro/claude", "anthro/other"], ["mg-two"])
      proc.child.kill("SIGHUP")
      expect(
        await printed(proc, /configuration reloaded from \S+: (\d+) model\(s\); keys 1 added, 1 revoked/, "the reload")
      )
        .toBe("2")
      expect((await messages(url, "mg-one")).status).toBe(401)
      expect((await messages(url, "mg-two")).status).toBe(200)
      const models = await fetch(`${url}/v1/models`, { headers: { authorization: "Bearer mg-two" } })
      const listed = (await models.json()) as { data: Array<{ id: string }> }
      expect(listed.data.map((m) => m.id)).toEqual(["anthro/claude", "anthro/other"])

      // A value the configuration refuses: the running one stays.
      write(["anthro/claude"], ["mg-three"], {
        models: {
          "anthro/claude": { endpoints: [{ provider: "anthro", upstreamModel: "x", pricing: { prompt: "abc" } }] }
        }
      })
      proc.child.kill("SIGHUP")
      await printed(
        proc,
        /(configuration not reloaded: configuration key models\.anthro\/claude\.endpoints\[0\]\.pricing)/,
        "the bad value"
      )
      // The storage changed: needs a restart, refused whole.
      write(["anthro/claude"], ["mg-three"], { storage: "memory:" })
      proc.child.kill("SIGHUP")
      await printed(proc, /(configuration not reloaded: storage changed)/, "the refusal")
      expect((await messages(url, "mg-three")).status).toBe(401)
      expect((await messages(url, "mg-two")).status).toBe(200)
      expect(upstream.requests.at(-1)!.headers["x-api-key"]).toBe("sk-up")
      // The provider's key rotated: its adapter is built anew, the next call carries the new key.
      write(["anthro/claude"], ["mg-two"], {
        providers: { anthro: { kind: "anthropic", baseUrl: upstream.url, apiKey: "sk-rotated" } }
      })
      proc.child.kill("SIGHUP")
      await printed(proc, /keys 0 added, 0 revoked; providers rebuilt: (anthro)/, "the rebuilt provider")
      expect((await messages(url, "mg-two")).status).toBe(200)
      expect(upstream.requests.at(-1)!.headers["x-api-key"]).toBe("sk-rotated")
    } finally {
      proc.child.kill("SIGTERM")
      expect(await proc.exited).toBe(0)
    }
  })

  it("--help and a usage error, piped, are plain text: no ANSI escape codes", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "mg-help-"))
    const help = await command({}, cwd, ["--help"])
    expect(help.code).toBe(0)
    expect(help.output).toContain("USAGE")
    expect(help.output).toContain("keys")
    expect(help.output).not.toContain("\u001b[")
    const wrong = await command({}, cwd, ["keys", "frobnicate"])
    expect(wrong.code).toBe(1)
    expect(wrong.output).toMatch(/frobnicate|keys/)
    expect(wrong.output).not.toContain("\u001b[")
  })

  it("keys create|list|revoke: a key made with the command is printed once, stored hashed, kept until revoked", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "mg-cli-"))
    const env = { GATEWAY_CONFIG: writeConfig({ ...goodConfig(), futureKey: undefined, keys: [] }) }
    // An empty workspace (an unset shell variable) is refused, as the configuration file refuses it, and stores nothing.
    const blank = await command(env, cwd, ["keys", "create", "--workspace", ""])
    expect(blank.code).toBe(1)
    expect(blank.output).toContain("--workspace must name a workspace")
    const created = await command(env, cwd, ["keys", "create", "--workspace", "team-a", "--label", "ci"])
    expect(created.code).toBe(0)
    const [, id, secret] = /created key ([0-9a-f]{12}) in workspace team-a.*\n(mg-\S+)/.exec(created.output) ?? []
    expect(secret).toMatch(/^mg-/)
    const listed = await command(env, cwd, ["keys", "list"])
    expect(listed.output).toMatch(new RegExp(`${id}\\s+team-a\\s+no\\s+no\\s+cli\\s+\\S+\\s+ci`))
    expect(listed.output).not.toContain(secret)
    const json = JSON.parse((await command(env, cwd, ["keys", "list", "--json"])).output)
    expect(json).toEqual([expect.objectContaining({ keyId: id, workspace: "team-a", source: "cli", label: "ci" })])
    // A configuration sync (a start) leaves the command's keys alone.
    await withServer(env, cwd, async (url) => expect((await messages(url, secret)).status).toBe(200))
    const revoked = await command(env, cwd, ["keys", "revoke", id])
    expect(revoked).toMatchObject({ code: 0, output: expect.stringContaining(`revoked key ${id}`) })
    expect((await command(env, cwd, ["keys", "revoke", id])).code).toBe(1)
    await withServer(env, cwd, async (url) => expect((await messages(url, secret)).status).toBe(401))
  })

  it("on SQLite, a thread of its own writes the usage records, every one of them by the end of SIGTERM", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "mg-usage-thread-"))
    upstream.reset()
    const proc = run({
      GATEWAY_CONFIG: writeConfig({ ...goodConfig(), futureKey: undefined }),
      GATEWAY_API_KEY: "mg-usage-key",
      UPSTREAM_KEY: "sk-up",
      PORT: "0"
    }, cwd)
    const url = await listening(proc)
    const threads = () => Number(/Threads:\s+(\d+)/.exec(readFileSync(`/proc/${proc.child.pid}/status`, "utf8"))?.[1])
    const idle = threads()
    const statuses = await Promise.all(
      Array.from({ length: 40 }, () => messages(url, "mg-usage-key").then((r) => r.status))
    )
    expect(statuses).toEqual(Array(40).fill(200))
    // The thread starts with the first batch (written within the usage log's 200 ms interval).
    for (let i = 0; i < 50 && threads() === idle; i++) await new Promise((r) => setTimeout(r, 50))
    expect(threads()).toBe(idle + 1)
    expect((await messages(url, "mg-usage-key")).status).toBe(200)
    proc.child.kill("SIGTERM")
    expect(await proc.exited).toBe(0)
    // Had the thread stopped, the log would have gone back to the loop's connection, with this warning.
    expect(proc.output).not.toContain("writer thread")
    const db = new Database(join(cwd, "data", "test.db"), { readonly: true })
    try {
      const row = db.prepare("SELECT count(*) AS n FROM mg_usage WHERE status = 200").get() as { n: number }
      expect(row.n).toBe(41)
    } finally {
      db.close()
    }
  })

  it("logs one line per request at its completion, never a key", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "mg-log-"))
    upstream.reset()
    const proc = run({
      GATEWAY_CONFIG: writeConfig({ ...goodConfig(), futureKey: undefined }),
      GATEWAY_API_KEY: "mg-log-key",
      UPSTREAM_KEY: "sk-up",
      PORT: "0",
      LOG_FORMAT: "json"
    }, cwd)
    const url = await listening(proc)
    expect((await messages(url, "mg-log-key")).status).toBe(200)
    expect((await messages(url, "mg-wrong-key")).status).toBe(401)
    await printed(proc, /("POST \/v1\/messages 401[^"]*")/, "the 401's line")
    proc.child.kill("SIGTERM")
    expect(await proc.exited).toBe(0)
    const lines = proc.output.trim().split("\n").map((line) => JSON.parse(line))
    const requests = lines.filter((l) => /^POST \/v1\/messages /.test(l.message))
    expect(requests.map((l) => l.message)).toEqual([
      expect.stringMatching(
        /^POST \/v1\/messages 200 anthro\/claude via anthro attempts=1 tokens=\d+\/\d+ cost=[\d.]+ \d+ms$/
      ),
      expect.stringMatching(/^POST \/v1\/messages 401 authentication_error attempts=0 tokens=0\/0 cost=0 \d+ms$/)
    ])
    expect(requests[0].annotations).toMatchObject({ requestId: expect.stringMatching(/^req_/), workspace: "default" })
    expect(proc.output).not.toContain("mg-log-key")
    expect(proc.output).not.toContain("mg-wrong-key")
    expect(proc.output).not.toContain("sk-up")
  })

  it("`npm start` does not rebuild when nothing changed, and `kill -TERM` on its pid stops the gateway gracefully", async () => {
    const root = fileURLToPath(new URL("../../..", import.meta.url))
    const before = statSync(MAIN).mtimeMs
    const child = spawn("npm", ["start", "--silent"], {
      cwd: root,
      env: { ...process.env, PORT: "0", DATABASE_URL: "memory:", GATEWAY_CONFIG: writeConfig(goodConfig()) },
      stdio: ["ignore", "pipe", "pipe"]
    })
    const proc = { child, output: "", exited: new Promise<number | null>((r) => child.on("exit", (code) => r(code))) }
    child.stdout.on("data", (d) => (proc.output += d))
    child.stderr.on("data", (d) => (proc.output += d))
    const url = await listening(proc)
    expect((await fetch(`${url}/health`)).status).toBe(200)
    child.kill("SIGTERM")
    expect(await proc.exited).toBe(0)
    expect(proc.output).toContain("stopped")
    await expect(fetch(`${url}/health`)).rejects.toThrow()
    expect(statSync(MAIN).mtimeMs).toBe(before)
  })

  it("a start-up failure is one line: a port in use, unreachable PostgreSQL, a value outside an enumeration", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "mg-fail-"))
    await withServer({ GATEWAY_CONFIG: writeConfig({ ...goodConfig(), futureKey: undefined }) }, cwd, async (url) => {
      const port = new URL(url).port
      const busy = await command({ GATEWAY_CONFIG: writeConfig(goodConfig()), PORT: port }, cwd, [])
      expect(busy.code).toBe(1)
      expect(busy.output).toContain(`cannot listen on 127.0.0.1:${port}: the port is in use`)
      expect(busy.output).not.toMatch(/\n\s+at /)
    })
    const pg = await command(
      {
        GATEWAY_CONFIG: writeConfig(goodConfig()),
        DATABASE_URL: "postgres://postgres:secret-pw@127.0.0.1:1/test",
        PORT: "0"
      },
      cwd,
      []
    )
    expect(pg.code).toBe(1)
    expect(pg.output).toContain("cannot open storage, PostgreSQL at 127.0.0.1:1 (database test): ")
    expect(pg.output).toContain("ECONNREFUSED")
    expect(pg.output).not.toContain("secret-pw")
    expect(pg.output).not.toMatch(/\n\s+at /)
    const config = goodConfig()
    ;(config.providers.anthro as { kind: string }).kind = "OpenAI"
    const kind = await command({ GATEWAY_CONFIG: writeConfig(config), PORT: "0" }, cwd, [])
    expect(kind.code).toBe(1)
    expect(kind.output).toContain(
      `configuration key providers.anthro.kind: must be one of "anthropic", "openai", "local-speech" (got "OpenAI")`
    )
    // shared counters asked for where there is no database to share: refused, not N times the limit over N processes
    const counters = await command(
      {
        GATEWAY_CONFIG: writeConfig({ ...goodConfig(), limits: { store: "postgres" } }),
        DATABASE_URL: "memory:",
        PORT: "0"
      },
      cwd,
      []
    )
    expect(counters.code).toBe(1)
    expect(counters.output).toContain(
      "limits.store is postgres, and the storage (memory:) has no database to keep the counters in"
    )
    expect(counters.output).not.toMatch(/\n\s+at /)
  })
})
