/**
 * Graceful shutdown of the server process (SIGTERM) with connections that have no request in flight: a connection
 * that never sent anything (what node's `fetch` opens when a client cancels a response body), a keep-alive
 * connection between requests, one with half a request head. None of them may hold the process up for the grace
 * period (30 s); requests and streams in flight still finish, and a request that arrives on a fresh connection just
 * after SIGTERM is still answered, with `Connection: close`.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { connect, type Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeAnthropic } from "../../../packages/provider-adapters/test/fakes/index.js"
import { readEvents } from "./harness.js"
import { listening, printed, type Proc, run } from "./processes.js"

const KEY = "mg-shutdown-key"
/** Well under the grace period (30 s), with room for a loaded machine; the fix exits in about a second. */
const PROMPT_MS = 5_000

let upstream: FakeUpstream
let dir: string

beforeAll(async () => {
  upstream = await startFakeAnthropic()
  dir = mkdtempSync(join(tmpdir(), "mg-shutdown-"))
  writeFileSync(
    join(dir, "config.json"),
    JSON.stringify({
      server: { port: 0 },
      storage: "memory:",
      providers: { anthro: { kind: "anthropic", baseUrl: upstream.url, apiKey: "sk-up" } },
      models: {
        "anthro/claude": {
          endpoints: [{
            provider: "anthro",
            upstreamModel: "claude-x",
            pricing: { prompt: "0.000003", completion: "0.000015" }
          }]
        }
      },
      keys: [{ key: KEY, workspace: "default", management: true }]
    })
  )
})
afterAll(() => upstream.close())

const start = async () => {
  const proc = run({ GATEWAY_CONFIG: join(dir, "config.json"), PORT: "0" }, dir)
  const url = await listening(proc)
  return { proc, url, port: Number(new URL(url).port) }
}

/** Sends SIGTERM; the exit code and how long the process took to exit. */
const terminate = async (proc: Proc) => {
  const started = performance.now()
  proc.child.kill("SIGTERM")
  const code = await proc.exited
  return { code, ms: performance.now() - started }
}

/** A raw connection, recording what the server sends and when it closes it. */
const open = (port: number) =>
  new Promise<{ socket: Socket; received: () => string; closed: Promise<void> }>((resolve, reject) => {
    const socket = connect(port, "127.0.0.1")
    let text = ""
    socket.setEncoding("utf8")
    socket.on("data", (chunk: string) => text += chunk)
    const closed = new Promise<void>((done) => socket.on("close", () => done()))
    socket.once("connect", () => {
      socket.on("error", () => {})
      resolve({ socket, received: () => text, closed })
    })
    socket.once("error", reject)
  })

const until = async (check: () => boolean, what: string, ms = 10_000) => {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

const message = (stream: boolean) =>
  JSON.stringify({
    model: "anthro/claude",
    max_tokens: 20,
    stream,
    messages: [{ role: "user", content: "one two three four five" }]
  })

const rawPost = (body: string) =>
  `POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nx-api-key: ${KEY}\r\n` +
  `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`

// Each test starts a gateway process (a few seconds on a loaded machine).
describe("graceful shutdown with connections that have no request in flight", { timeout: 60_000 }, () => {
  it("a silent connection (connected, nothing sent) does not hold up SIGTERM for the grace period", async () => {
    const { port, proc } = await start()
    const silent = await open(port)
    const { code, ms } = await terminate(proc)
    expect(code).toBe(0)
    expect(ms).toBeLessThan(PROMPT_MS)
    await silent.closed
    expect(silent.received()).toBe("")
  })

  it("a keep-alive connection idle after one request does not hold up SIGTERM", async () => {
    const { port, proc } = await start()
    const connection = await open(port)
    connection.socket.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await until(() => /\r\n\r\n/.test(connection.received()), "the answer")
    expect(connection.received()).toMatch(/^HTTP\/1\.1 200 [^]*\r\nconnection: keep-alive\r\n/i)
    const { code, ms } = await terminate(proc)
    expect(code).toBe(0)
    expect(ms).toBeLessThan(PROMPT_MS)
    await connection.closed
  })

  it("a keep-alive connection with half of its next request head does not hold up SIGTERM", async () => {
    const { port, proc } = await start()
    const connection = await open(port)
    connection.socket.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await until(() => /\r\n\r\n/.test(connection.received()), "the answer")
    connection.socket.write("GET /health HTTP/1.1\r\nHo")
    await new Promise((r) => setTimeout(r, 100))
    const { code, ms } = await terminate(proc)
    expect(code).toBe(0)
    expect(ms).toBeLessThan(PROMPT_MS)
    await connection.closed
  })

  it("a stream in flight at SIGTERM still finishes, while a silent connection beside it is closed", async () => {
    const { port, proc, url } = await start()
    // 12 chunks 400 ms apart: the stream outlasts the silent connection's second of grace by seconds.
    upstream.script({ kind: "ok", chunkDelayMs: 400 })
    const response = await fetch(`${url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": KEY },
      body: message(true)
    })
    expect(response.status).toBe(200)
    const silent = await open(port)
    const started = performance.now()
    proc.child.kill("SIGTERM")
    let silentClosedAt = 0
    void silent.closed.then(() => silentClosedAt = performance.now() - started)
    const events = await readEvents(response)
    const streamDoneAt = performance.now() - started
    expect(events.at(-1)?.event).toBe("message_stop")
    expect(await proc.exited).toBe(0)
    expect(silentClosedAt).toBeGreaterThan(0)
    expect(silentClosedAt).toBeLessThan(streamDoneAt)
    expect(proc.output).not.toMatch(/POST \/v1\/messages 5\d\d /)
  })

  it("a request sent on a fresh connection just after SIGTERM is answered, with Connection: close", async () => {
    const { port, proc } = await start()
    const connection = await open(port)
    proc.child.kill("SIGTERM")
    await printed(proc, /(shutting down)/, "that it is shutting down")
    connection.socket.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await connection.closed
    expect(connection.received()).toMatch(/^HTTP\/1\.1 200 [^]*\r\nconnection: close\r\n/i)
    expect(await proc.exited).toBe(0)
  })

  it("a request whose answer has not started at SIGTERM is answered in full, with Connection: close", async () => {
    const { port, proc } = await start()
    upstream.reset()
    upstream.script({ kind: "ok", latencyMs: 1_500 })
    const connection = await open(port)
    connection.socket.write(rawPost(message(false)))
    await until(() => upstream.requests.length === 1, "the upstream request")
    const { code } = await terminate(proc)
    expect(code).toBe(0)
    await connection.closed
    const answer = connection.received()
    expect(answer).toMatch(/^HTTP\/1\.1 200 [^]*\r\nconnection: close\r\n/i)
    expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)).type).toBe("message")
  })
})
