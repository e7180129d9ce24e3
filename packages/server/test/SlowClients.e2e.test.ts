/**
 * Clients that hold connections without finishing their requests: a body shorter than its Content-Length, headers
 * sent a byte at a time (slow-loris), and hundreds of connections that never send anything. Each is answered or
 * closed within its time-out, and meanwhile everyone else keeps being served in well under a second.
 */
import { connect, type Socket } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Harness, KEY, post, startHarness } from "./harness.js"

const HEADERS_MS = 1_000
const BODY_IDLE_MS = 600

let h: Harness
let port: number

beforeAll(async () => {
  h = await startHarness({ server: { headersTimeoutMs: HEADERS_MS, bodyIdleTimeoutMs: BODY_IDLE_MS } })
  port = Number(new URL(h.url).port)
})
afterAll(() => h.close())

/** A raw connection, recording what the server sends and when it closes. */
const open = () =>
  new Promise<{ socket: Socket; received: () => string; closed: Promise<number> }>((resolve, reject) => {
    const socket = connect(port, "127.0.0.1")
    const started = Date.now()
    let text = ""
    socket.setEncoding("utf8")
    socket.on("data", (chunk: string) => text += chunk)
    socket.on("error", () => {})
    const closed = new Promise<number>((done) => socket.on("close", () => done(Date.now() - started)))
    socket.once("connect", () => resolve({ socket, received: () => text, closed }))
    socket.once("error", reject)
  })

const messageBody = JSON.stringify({
  model: "anthro/claude",
  max_tokens: 16,
  messages: [{ role: "user", content: "hi" }]
})

const head = (length: number) =>
  `POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
  `Authorization: Bearer ${KEY}\r\nContent-Length: ${length}\r\n\r\n`

/** Times ordinary requests, one after another, for `ms`. */
const served = async (ms: number) => {
  const latencies: Array<number> = []
  const until = Date.now() + ms
  while (Date.now() < until) {
    const started = performance.now()
    const response = await post(h, messageBody)
    expect(response.status).toBe(200)
    await response.arrayBuffer()
    latencies.push(performance.now() - started)
  }
  return latencies
}

describe("slow and silent clients", () => {
  it("a body that stops arriving is a 408 with the error body, then the connection closes; small and large bodies", async () => {
    // 1,000 bytes is read before the request starts (read-ahead); 1 MB is read by the route after the key check.
    for (const length of [1_000, 1_000_000]) {
      const connection = await open()
      connection.socket.write(head(length) + messageBody.slice(0, 10))
      const closedAfter = await connection.closed
      expect(closedAfter).toBeGreaterThanOrEqual(BODY_IDLE_MS - 50)
      expect(closedAfter).toBeLessThan(BODY_IDLE_MS + 1_000)
      const answer = connection.received()
      expect(answer).toMatch(/^HTTP\/1\.1 408 /)
      const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))
      expect(body.type).toBe("error")
      expect(body.error.type).toBe("timeout_error")
      expect(body.error.message).toContain("Request body")
    }
  })

  it("a body that keeps arriving slowly is not cut: each byte pushes the deadline back", async () => {
    const connection = await open()
    const text = messageBody
    connection.socket.write(head(Buffer.byteLength(text)))
    // The whole body takes some 3 times the idle time-out, a few bytes at a time.
    const step = Math.ceil(text.length / 6)
    for (let i = 0; i < text.length; i += step) {
      connection.socket.write(text.slice(i, i + step))
      await new Promise((resolve) => setTimeout(resolve, BODY_IDLE_MS / 2))
    }
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(connection.received()).toMatch(/^HTTP\/1\.1 200 /)
    connection.socket.destroy()
  })

  it(
    "300 silent connections, slow-loris headers and stalled bodies are closed in time; others are served in under a second meanwhile",
    async () => {
      const silent = await Promise.all(Array.from({ length: 300 }, open))
      const loris = await Promise.all(Array.from({ length: 20 }, open))
      const line = "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
      let sent = 0
      const dribble = setInterval(() => {
        for (const c of loris) if (!c.socket.destroyed) c.socket.write(sent < line.length ? line[sent] : "a")
        sent++
      }, 100)
      const stalled = await Promise.all(Array.from({ length: 20 }, open))
      for (const c of stalled) c.socket.write(head(1_000) + "{")
      try {
        const latencies = await served(2_500)
        expect(latencies.length).toBeGreaterThan(10)
        expect(Math.max(...latencies)).toBeLessThan(1_000)
        // Node closes a connection whose headers are not complete after the headers time-out (checked every second).
        const silentClosed = await Promise.all(silent.map((c) => c.closed))
        const lorisClosed = await Promise.all(loris.map((c) => c.closed))
        const stalledClosed = await Promise.all(stalled.map((c) => c.closed))
        expect(Math.max(...silentClosed)).toBeLessThan(HEADERS_MS + 2_000)
        expect(Math.max(...lorisClosed)).toBeLessThan(HEADERS_MS + 2_000)
        expect(Math.max(...stalledClosed)).toBeLessThan(BODY_IDLE_MS + 1_000)
        for (const c of stalled) expect(c.received()).toMatch(/^HTTP\/1\.1 408 /)
      } finally {
        clearInterval(dribble)
        for (const c of [...silent, ...loris, ...stalled]) c.socket.destroy()
      }
    },
    20_000
  )
})
