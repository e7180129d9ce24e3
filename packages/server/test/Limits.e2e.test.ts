/**
 * The gateway's own limits through the server, in one process: requests and tokens per minute per key and per
 * workspace (429 with `retry-after`), budgets (402), requests that can never fit (400, or 402 above a whole budget),
 * the remaining quota in response headers (on those refusals too), reservations settled with a stream's real usage
 * and released when the client goes away.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { Harness } from "./harness.js"
import { json, readEvents, startHarness } from "./harness.js"

const RATE_KEY = "mg-test-limits-rate"
const TOKENS_KEY = "mg-test-limits-tokens"
const BUDGET_KEY = "mg-test-limits-budget"
const SHARED_A = "mg-test-limits-shared-a"
const SHARED_B = "mg-test-limits-shared-b"
const GONE_KEY = "mg-test-limits-gone"
const SPEECHLESS = "mg-test-limits-openai"
const FAILED_KEY = "mg-test-limits-failed"
const SPEECH_KEY = "mg-test-limits-speech"
const CUT_KEY = "mg-test-limits-cut"
const DEAR_KEY = "mg-test-limits-dear"

let h: Harness

beforeAll(async () => {
  h = await startHarness({
    keys: [
      { key: RATE_KEY, workspace: "rate", limits: { requestsPerMinute: 3 } },
      { key: TOKENS_KEY, workspace: "tokens", limits: { outputTokensPerMinute: 1000, inputTokensPerMinute: 50_000 } },
      // A request reserves max_tokens 10 at $0.000015 and its prompt at $0.000003 a token: about $0.0002.
      { key: BUDGET_KEY, workspace: "budget", limits: { budget: { usd: "0.0005", period: "day" } } },
      { key: SHARED_A, workspace: "shared" },
      { key: SHARED_B, workspace: "shared" },
      { key: GONE_KEY, workspace: "gone", limits: { requestsPerMinute: 1 } },
      { key: SPEECHLESS, workspace: "openai", limits: { requestsPerMinute: 2 } },
      { key: FAILED_KEY, workspace: "failed", limits: { requestsPerMinute: 1 } },
      { key: SPEECH_KEY, workspace: "speech", limits: { requestsPerMinute: 1, budget: { usd: 1 } } },
      { key: CUT_KEY, workspace: "cut", limits: { outputTokensPerMinute: 1000 } },
      // Less than one request costs at most (max_tokens 10 at $0.000015 is $0.00015 already).
      { key: DEAR_KEY, workspace: "dear", limits: { budget: { usd: "0.0001", period: "day" } } }
    ],
    models: {
      "acme/tts": {
        outputModalities: ["audio"],
        voices: ["alloy"],
        endpoints: [{ provider: "acme", upstreamModel: "tts-fake", pricing: { prompt: "0.000015", completion: "0" } }]
      }
    },
    config: { workspaces: { shared: { limits: { requestsPerMinute: 2 } } } }
  })
})
afterAll(() => h.close())
beforeEach(() => h.reset())

const send = (key: string, body: Record<string, unknown>, signal?: AbortSignal) =>
  fetch(`${h.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({
      model: "anthro/claude",
      max_tokens: 10,
      messages: [{ role: "user", content: "Hi" }],
      ...body
    }),
    signal
  })

describe("requests per minute", () => {
  it("answers with what remains, then 429 rate_limit_error with retry-after and the same headers", async () => {
    for (const remaining of ["2", "1", "0"]) {
      const ok = await send(RATE_KEY, {})
      expect(ok.status).toBe(200)
      expect(ok.headers.get("anthropic-ratelimit-requests-limit")).toBe("3")
      expect(ok.headers.get("anthropic-ratelimit-requests-remaining")).toBe(remaining)
      expect(Date.parse(ok.headers.get("anthropic-ratelimit-requests-reset")!)).toBeGreaterThan(Date.now())
      await ok.text()
    }
    const refused = await send(RATE_KEY, {})
    expect(refused.status).toBe(429)
    const retryAfter = Number(refused.headers.get("retry-after"))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(60)
    expect(refused.headers.get("anthropic-ratelimit-requests-remaining")).toBe("0")
    const body = await json(refused)
    expect(body).toMatchObject({ type: "error", error: { type: "rate_limit_error" } })
    expect(body.error.message).toMatch(/3 requests per minute/)
    expect(body.request_id).toMatch(/^req_/)
    // A refused request never reached the upstream.
    expect(h.anthropic.requests).toHaveLength(3)
  })

  it("a workspace's limit is shared by its keys", async () => {
    expect((await send(SHARED_A, {})).status).toBe(200)
    expect((await send(SHARED_B, {})).status).toBe(200)
    const refused = await send(SHARED_A, {})
    expect(refused.status).toBe(429)
    expect((await json(refused)).error.message).toMatch(/workspace "shared"/)
  })

  it("OpenAI-compatible routes tell OpenAI's header names, and refuse in OpenAI's error body", async () => {
    const chat = () =>
      fetch(`${h.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${SPEECHLESS}` },
        body: JSON.stringify({ model: "acme/gpt", messages: [{ role: "user", content: "Hi" }] })
      })
    const ok = await chat()
    expect(ok.status).toBe(200)
    expect(ok.headers.get("x-ratelimit-limit-requests")).toBe("2")
    expect(ok.headers.get("x-ratelimit-remaining-requests")).toBe("1")
    expect(ok.headers.get("x-ratelimit-reset-requests")).toMatch(/^\d+s$/)
    expect(ok.headers.get("anthropic-ratelimit-requests-remaining")).toBeNull()
    await ok.text()
    await (await chat()).text()
    const refused = await chat()
    expect(refused.status).toBe(429)
    expect(refused.headers.get("retry-after")).not.toBeNull()
    expect(refused.headers.get("x-ratelimit-remaining-requests")).toBe("0")
    expect(await json(refused)).toMatchObject({
      error: { code: 429, type: "rate_limit_error", metadata: { openai_code: "rate_limit_exceeded" } }
    })
  })

  it("a key without limits gets no limit headers", async () => {
    const ok = await send("mg-test-team-b-key", {})
    expect(ok.status).toBe(200)
    expect([...ok.headers.keys()].filter((name) => name.includes("ratelimit") || name.includes("budget"))).toEqual([])
  })
})

describe("tokens per minute", () => {
  it("max_tokens above the per-minute output limit can never fit: 400, not 429, with the limit headers", async () => {
    const ok = await send(TOKENS_KEY, { max_tokens: 100 })
    expect(ok.status).toBe(200)
    await ok.text()
    await new Promise((r) => setTimeout(r, 50))
    const response = await send(TOKENS_KEY, { max_tokens: 1001 })
    expect(response.status).toBe(400)
    expect(response.headers.get("anthropic-ratelimit-output-tokens-limit")).toBe("1000")
    // What the first request used is counted (settled to its usage, at most its 100).
    const remaining = Number(response.headers.get("anthropic-ratelimit-output-tokens-remaining"))
    expect(remaining).toBeGreaterThanOrEqual(900)
    expect(remaining).toBeLessThan(1000)
    expect(Date.parse(response.headers.get("anthropic-ratelimit-output-tokens-reset")!)).toBeGreaterThan(Date.now())
    expect(response.headers.get("anthropic-ratelimit-input-tokens-limit")).toBe("50000")
    expect(response.headers.get("retry-after")).toBeNull()
    const body = await json(response)
    expect(body.error.type).toBe("invalid_request_error")
    expect(body.error.message).toMatch(/max_tokens \(1001\).*1000 output tokens per minute/)
    // Nothing was reserved for it.
    const next = await send(TOKENS_KEY, { max_tokens: 10 })
    expect(next.headers.get("anthropic-ratelimit-output-tokens-remaining")).toBe(String(remaining - 10))
    await next.text()
  })

  it("on an OpenAI route, the 400 of a request that can never fit has OpenAI's limit headers", async () => {
    const response = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${TOKENS_KEY}` },
      body: JSON.stringify({ model: "acme/gpt", max_tokens: 1001, messages: [{ role: "user", content: "Hi" }] })
    })
    expect(response.status).toBe(400)
    expect(response.headers.get("x-ratelimit-limit-output-tokens")).toBe("1000")
    expect(response.headers.get("x-ratelimit-remaining-output-tokens")).toBe("1000")
    expect(response.headers.get("x-ratelimit-reset-output-tokens")).toMatch(/^\d+s$/)
    expect(response.headers.get("x-ratelimit-limit-input-tokens")).toBe("50000")
    expect(response.headers.get("anthropic-ratelimit-output-tokens-limit")).toBeNull()
    expect(await json(response)).toMatchObject({
      error: { code: 400, type: "invalid_request_error", param: "max_tokens" }
    })
  })

  it("the 400 of an output cap that can never fit names the field the client sent it in", async () => {
    const cases = [
      ["chat/completions", "max_tokens", { messages: [{ role: "user", content: "Hi" }] }],
      ["chat/completions", "max_completion_tokens", { messages: [{ role: "user", content: "Hi" }] }],
      ["responses", "max_output_tokens", { input: "Hi" }]
    ] as const
    for (const [path, field, body] of cases) {
      const response = await fetch(`${h.url}/v1/${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${TOKENS_KEY}` },
        body: JSON.stringify({ model: "acme/gpt", [field]: 1001, ...body })
      })
      expect(response.status).toBe(400)
      expect(response.headers.get("x-ratelimit-limit-output-tokens")).toBe("1000")
      const { error } = await json(response)
      expect(error).toMatchObject({ code: 400, type: "invalid_request_error", param: field })
      expect(error.message).toBe(
        `${field} (1001) is more than this key's limit of 1000 output tokens per minute: this request can never be ` +
          `served; lower ${field}`
      )
    }
    expect(h.openai.requests).toHaveLength(0)
  })

  it("a stream reserves max_tokens and settles with its real usage when it ends", async () => {
    const first = await send(TOKENS_KEY, { max_tokens: 900, stream: true })
    expect(first.status).toBe(200)
    // Reserved: 900 of 1000.
    expect(first.headers.get("anthropic-ratelimit-output-tokens-remaining")).toBe("100")
    const events = await readEvents(first)
    expect(events.at(-1)?.event).toBe("message_stop")
    const used = events.find((e) => e.event === "message_delta")!.data.usage.output_tokens as number
    expect(used).toBeLessThan(100)
    // Settled to its real usage: another 900 fit.
    await new Promise((r) => setTimeout(r, 50))
    const second = await send(TOKENS_KEY, { max_tokens: 900 })
    expect(second.status).toBe(200)
    expect(Number(second.headers.get("anthropic-ratelimit-output-tokens-remaining"))).toBe(1000 - used - 900)
    await second.text()
    // Now 900 are reserved again (settled to its usage once answered); a third 900 does not fit until it is.
    const third = await send(TOKENS_KEY, { max_tokens: 999 })
    expect(third.status).toBe(429)
    expect(third.headers.get("anthropic-ratelimit-output-tokens-remaining")).toBe(String(1000 - 2 * used))
  })
})

describe("budget", () => {
  it("spends to the budget, then 402 billing_error with the budget headers", async () => {
    let status = 200
    let last: Response | undefined
    for (let i = 0; i < 10 && status === 200; i++) {
      last = await send(BUDGET_KEY, {})
      status = last.status
      if (status === 200) {
        expect(last.headers.get("x-service-budget-limit")).toBe("0.0005")
        expect(Number(last.headers.get("x-service-budget-remaining"))).toBeLessThan(0.0005)
        await last.text()
      }
    }
    expect(status).toBe(402)
    const body = await json(last!)
    expect(body).toMatchObject({ type: "error", error: { type: "billing_error" } })
    expect(body.error.message).toMatch(/budget of \$0\.0005 is spent/)
    expect(last!.headers.get("x-service-budget-limit")).toBe("0.0005")
    expect(Date.parse(last!.headers.get("x-service-budget-reset")!)).toBeGreaterThan(Date.now())
    const openai = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${BUDGET_KEY}` },
      body: JSON.stringify({ model: "anthro/claude", max_tokens: 10, messages: [{ role: "user", content: "Hi" }] })
    })
    expect(openai.status).toBe(402)
    expect(await json(openai)).toMatchObject({
      error: { code: 402, type: "insufficient_quota", metadata: { openai_code: "insufficient_quota" } }
    })
  })
})

describe("a request that may cost more than the whole budget", () => {
  it("is a 402 with the budget headers, on the messages and the OpenAI routes", async () => {
    const refused = await send(DEAR_KEY, {})
    expect(refused.status).toBe(402)
    expect(refused.headers.get("x-service-budget-limit")).toBe("0.0001")
    expect(refused.headers.get("x-service-budget-remaining")).toBe("0.0001")
    expect(Date.parse(refused.headers.get("x-service-budget-reset")!)).toBeGreaterThan(Date.now())
    const body = await json(refused)
    expect(body).toMatchObject({ type: "error", error: { type: "billing_error" } })
    expect(body.error.message).toMatch(/whole budget of \$0\.0001 per day/)
    const openai = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${DEAR_KEY}` },
      body: JSON.stringify({ model: "anthro/claude", max_tokens: 10, messages: [{ role: "user", content: "Hi" }] })
    })
    expect(openai.status).toBe(402)
    expect(openai.headers.get("x-service-budget-limit")).toBe("0.0001")
    expect(openai.headers.get("x-service-budget-remaining")).toBe("0.0001")
    expect(await json(openai)).toMatchObject({ error: { code: 402, type: "insufficient_quota" } })
    expect(h.anthropic.requests).toHaveLength(0)
  })
})

describe("release", () => {
  it("a request whose client goes away before the answer gives its reservation back", async () => {
    h.anthropic.script({ kind: "hang" })
    const controller = new AbortController()
    const pending = send(GONE_KEY, {}, controller.signal).catch(() => undefined)
    while (h.anthropic.inFlight() === 0) await new Promise((r) => setTimeout(r, 10))
    controller.abort()
    await pending
    while (h.anthropic.inFlight() > 0) await new Promise((r) => setTimeout(r, 10))
    await new Promise((r) => setTimeout(r, 50))
    const next = await send(GONE_KEY, {})
    expect(next.status).toBe(200)
    expect(next.headers.get("anthropic-ratelimit-requests-remaining")).toBe("0")
  })

  it("a stream whose client goes away mid-answer is settled with what it consumed", async () => {
    h.anthropic.setReply(() => ({ text: Array.from({ length: 200 }, (_, i) => `word${i}`).join(" ") }))
    h.anthropic.script({ kind: "ok", chunkDelayMs: 50 })
    const controller = new AbortController()
    const response = await send(CUT_KEY, { max_tokens: 900, stream: true }, controller.signal)
    expect(response.headers.get("anthropic-ratelimit-output-tokens-remaining")).toBe("100")
    const reader = response.body!.getReader()
    let text = ""
    while (!text.includes("content_block_delta")) text += new TextDecoder().decode((await reader.read()).value)
    controller.abort()
    while (h.anthropic.inFlight() > 0) await new Promise((r) => setTimeout(r, 10))
    await new Promise((r) => setTimeout(r, 50))
    // Settled with the few tokens the upstream had counted when it was cut: another 900 fit.
    const next = await send(CUT_KEY, { max_tokens: 900 })
    expect(next.status).toBe(200)
    expect(Number(next.headers.get("anthropic-ratelimit-output-tokens-remaining"))).toBeGreaterThanOrEqual(0)
    await next.text()
  })

  it("a request no upstream could answer gives its reservation back", async () => {
    const failed = await send(FAILED_KEY, { model: "dead/model" })
    expect(failed.status).toBe(503)
    expect(failed.headers.get("anthropic-ratelimit-requests-remaining")).toBeNull()
    await failed.text()
    const next = await send(FAILED_KEY, {})
    expect(next.status).toBe(200)
    expect(next.headers.get("anthropic-ratelimit-requests-remaining")).toBe("0")
  })
})

describe("speech", () => {
  it("is limited too: the generic error body, OpenAI's header names", async () => {
    const speak = () =>
      fetch(`${h.url}/v1/audio/speech`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${SPEECH_KEY}` },
        body: JSON.stringify({ model: "acme/tts", input: "Hello there.", voice: "alloy", response_format: "mp3" })
      })
    const ok = await speak()
    expect(ok.status).toBe(200)
    expect(ok.headers.get("x-ratelimit-remaining-requests")).toBe("0")
    // Billed per character: 12 at $0.000015.
    expect(ok.headers.get("x-service-budget-remaining")).toBe("0.99982")
    await ok.arrayBuffer()
    const refused = await speak()
    expect(refused.status).toBe(429)
    expect(refused.headers.get("retry-after")).not.toBeNull()
    expect(await json(refused)).toMatchObject({
      error: { code: 429, metadata: { reason: "requests_per_minute", retryable: true } }
    })
  })
})
