/**
 * A request whose client goes away before any answer, through the real server: one log line, status 499 as nginx logs
 * a request its client closed, in the form of every other request's line, and no usage record.
 */
import { UsageLog } from "@model-gateway/core"
import { Effect, LogLevel } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import * as Logging from "../src/Logging.js"
import type { Harness } from "./harness.js"
import { KEY, startHarness } from "./harness.js"

const lines: Array<string> = []
let h: Harness

beforeAll(async () => {
  const writer = { write: (line: string) => void lines.push(line), flush: () => {} }
  h = await startHarness({ logging: Logging.make("json", LogLevel.Info, writer) })
})
afterAll(() => h.close())
beforeEach(() => {
  h.reset()
  lines.length = 0
})

interface Line {
  readonly message: string
  readonly logLevel: string
  readonly annotations: Record<string, unknown>
}

/** The request lines logged so far whose message starts so. */
const logged = (prefix: string): Array<Line> =>
  lines.map((line) => JSON.parse(line) as Line).filter((line) => line.message.startsWith(prefix))

const records = () =>
  h.gateway.gateway.runtime.runPromise(
    Effect.flatMap(UsageLog.UsageLog, (log) => Effect.zipRight(log.flush, log.list({ limit: 10_000 })))
  )

/** Sends a messages request and abandons it once the upstream has had it for `afterMs`. */
const abandon = async (body: Record<string, unknown>, afterMs: number) => {
  const controller = new AbortController()
  const pending = fetch(`${h.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
    body: JSON.stringify({
      model: "anthro/claude",
      max_tokens: 50,
      messages: [{ role: "user", content: "hi" }],
      ...body
    }),
    signal: controller.signal
  }).catch((error: unknown) => error)
  await expect.poll(() => h.anthropic.inFlight()).toBe(1)
  await new Promise((resolve) => setTimeout(resolve, afterMs))
  controller.abort()
  expect(await pending).toBeInstanceOf(Error)
  await expect.poll(() => h.anthropic.aborted()).toBe(1)
}

/** The one 499 line a request left, once it is written, and that nothing more comes of the request. */
const oneLine = async () => {
  await expect.poll(() => logged("POST /v1/messages 499").length).toBe(1)
  await new Promise((resolve) => setTimeout(resolve, 100))
  const [line] = logged("POST /v1/messages 499")
  const requestId = line.annotations.requestId as string
  expect(lines.filter((text) => text.includes(requestId))).toHaveLength(1)
  expect((await records()).some((r) => r.requestId === requestId), "a usage record").toBe(false)
  return line
}

describe("a client that goes away before any answer", () => {
  it("JSON, the upstream slow to answer: one line, 499, the attempt in flight, no usage record", async () => {
    const before = (await records()).length
    h.anthropic.script({ kind: "ok", latencyMs: 1000 })
    await abandon({}, 100)
    const line = await oneLine()
    expect(line.logLevel).toBe("INFO")
    expect(line.message).toMatch(
      /^POST \/v1\/messages 499 anthro\/claude via anthro attempts=1 tokens=0\/0 cost=0 \d+ms$/
    )
    expect(Number(/ (\d+)ms$/.exec(line.message)![1])).toBeGreaterThanOrEqual(100)
    expect(line.annotations).toMatchObject({
      requestId: expect.stringMatching(/^req_[0-9a-f]{32}$/),
      workspace: "default",
      keyId: expect.any(String),
      stream: false
    })
    expect(lines.join("\n")).not.toContain(KEY)
    expect((await records()).length).toBe(before)
  })

  it("a stream, before its first content (message_start held back): one line, 499, no usage record", async () => {
    const before = (await records()).length
    h.anthropic.script({ kind: "stall", afterEvents: 1 })
    await abandon({ stream: true }, 100)
    const line = await oneLine()
    expect(line.message).toMatch(
      /^POST \/v1\/messages 499 anthro\/claude via anthro attempts=1 tokens=0\/0 cost=0 \d+ms$/
    )
    expect(line.annotations).toMatchObject({ workspace: "default", stream: true })
    expect((await records()).length).toBe(before)
  })

  it("a stream whose client leaves after first content was answered: its 200 line and record, no 499", async () => {
    h.anthropic.setReply(() => ({ text: Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ") }))
    h.anthropic.script({ kind: "ok", chunkDelayMs: 50 })
    const controller = new AbortController()
    const response = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({
        model: "anthro/claude",
        max_tokens: 50,
        stream: true,
        messages: [{ role: "user", content: "hi" }]
      }),
      signal: controller.signal
    })
    const requestId = response.headers.get("request-id")!
    const reader = response.body!.getReader()
    let text = ""
    while (!text.includes("content_block_delta")) text += new TextDecoder().decode((await reader.read()).value)
    controller.abort()
    await expect.poll(() => h.anthropic.aborted()).toBe(1)
    await expect.poll(() => logged("POST /v1/messages 200").length).toBe(1)
    expect(logged("POST /v1/messages 499")).toHaveLength(0)
    expect((await records()).filter((r) => r.requestId === requestId)).toHaveLength(1)
  })

  it("a request answered leaves its one line as before, with its usage record", async () => {
    const response = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: "anthro/claude", max_tokens: 50, messages: [{ role: "user", content: "hi" }] })
    })
    expect(response.status).toBe(200)
    await response.text()
    const requestId = response.headers.get("request-id")!
    await expect.poll(() => logged("POST /v1/messages 200").length).toBe(1)
    expect(logged("POST /v1/messages 499")).toHaveLength(0)
    expect((await records()).filter((r) => r.requestId === requestId)).toHaveLength(1)
  })
})
