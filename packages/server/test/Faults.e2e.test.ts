/** Upstream faults after content, cache usage and cost, documents to a text-only upstream, body limits. */
import Anthropic from "@anthropic-ai/sdk"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { Harness } from "./harness.js"
import { json, KEY, post, readEvents, startHarness } from "./harness.js"

let h: Harness
const LIMIT = 4096

beforeAll(async () => {
  h = await startHarness({ maxBodyBytes: LIMIT })
})
afterAll(() => h.close())
beforeEach(() => h.reset())

const hello = { max_tokens: 50, messages: [{ role: "user", content: "one two three four five six" }] }

describe("stream faults after content", () => {
  it.each(["anthro/claude", "acme/gpt"])(
    "%s: a stall after content ends with an in-band timeout error",
    async (model) => {
      ;(model === "acme/gpt" ? h.openai : h.anthropic).script({ kind: "stall", afterEvents: 5 })
      const response = await post(h, { model, stream: true, ...hello })
      expect(response.status).toBe(200)
      const events = await readEvents(response)
      expect(events.some((e) => e.event === "content_block_delta")).toBe(true)
      expect(events.at(-1)).toMatchObject({ event: "error", data: { error: { type: "timeout_error" } } })
    }
  )

  it.each(["anthro/claude", "acme/gpt"])(
    "%s: a malformed chunk after content ends with an in-band error",
    async (model) => {
      ;(model === "acme/gpt" ? h.openai : h.anthropic).script({ kind: "malformed", afterEvents: 5 })
      const events = await readEvents(await post(h, { model, stream: true, ...hello }))
      expect(events.some((e) => e.event === "content_block_delta")).toBe(true)
      expect(events.at(-1)?.event).toBe("error")
      expect(events.filter((e) => e.event === "message_stop")).toHaveLength(0)
    }
  )

  it("passes an upstream in-band error through as an error event", async () => {
    h.anthropic.script({ kind: "errorEvent", afterEvents: 5 })
    const events = await readEvents(await post(h, { model: "anthro/claude", stream: true, ...hello }))
    expect(events.at(-1)).toMatchObject({ event: "error", data: { error: { type: "overloaded_error" } } })
  })

  it("falls back when the upstream errors in-band before content", async () => {
    // the upstream ends its answer 50 ms after the error event
    h.anthropic.script({ kind: "errorEvent", afterEvents: 1, endDelayMs: 50 })
    const events = await readEvents(
      await post(h, { model: "anthro/claude", stream: true, fallbacks: [{ model: "acme/gpt" }], ...hello })
    )
    expect(events[0].data.message.model).toBe("acme/gpt")
    expect(events.at(-1)?.event).toBe("message_stop")
    // the failed attempt's answer is read to its end (the upstream ended it after the error), not aborted: its
    // connection serves a later request
    await expect.poll(() => h.anthropic.inFlight()).toBe(0)
    expect(h.anthropic.aborted()).toBe(0)
  })

  it("a non-streamed answer cut in half falls back", async () => {
    h.anthropic.script({ kind: "cut", afterEvents: 0 })
    const response = await post(h, { model: "anthro/claude", fallbacks: [{ model: "acme/gpt" }], ...hello })
    expect(response.status).toBe(200)
    expect((await json(response)).model).toBe("acme/gpt")
  })
})

describe("a model's refusal falls back to the next model", () => {
  const tooLong = {
    kind: "status" as const,
    status: 400,
    body: {
      type: "error",
      error: { type: "invalid_request_error", message: "prompt is too long: 215329 tokens > 200000 maximum" }
    }
  }
  const filtered = {
    kind: "status" as const,
    status: 400,
    body: {
      error: {
        message: "Your request was rejected as a result of our safety system.",
        type: "invalid_request_error",
        param: null,
        code: "content_policy_violation"
      }
    }
  }

  it.each([false, true])("an Anthropic context-length 400 moves to the fallback model (stream: %s)", async (stream) => {
    h.anthropic.script(tooLong)
    const response = await post(h, { model: "anthro/claude", stream, fallbacks: [{ model: "acme/gpt" }], ...hello })
    expect(response.status).toBe(200)
    if (stream) {
      const events = await readEvents(response)
      expect(events[0].data.message.model).toBe("acme/gpt")
    } else expect((await json(response)).model).toBe("acme/gpt")
    expect(h.anthropic.requests).toHaveLength(1)
  })

  it("an OpenAI content-policy 400 moves to the fallback model", async () => {
    h.openai.script(filtered)
    const response = await post(h, { model: "acme/gpt", fallbacks: [{ model: "anthro/claude" }], ...hello })
    expect((await json(response)).model).toBe("anthro/claude")
  })

  it("a plain invalid request does not fall back: the client gets the 400", async () => {
    h.anthropic.script({
      kind: "status",
      status: 400,
      body: { type: "error", error: { type: "invalid_request_error", message: "max_tokens: Field required" } }
    })
    const response = await post(h, { model: "anthro/claude", fallbacks: [{ model: "acme/gpt" }], ...hello })
    expect(response.status).toBe(400)
    expect((await json(response)).error.message).toBe("max_tokens: Field required")
    expect(h.openai.requests).toHaveLength(0)
  })
})

describe("usage and cost", () => {
  it("keeps cache reads apart from input tokens and prices them separately (Anthropic upstream)", async () => {
    h.anthropic.setReply(() => ({ text: "cached answer", usage: { input: 100, output: 10, cacheRead: 1000 } }))
    const body = await json(await post(h, { model: "anthro/claude", ...hello }))
    expect(body.usage).toMatchObject({ input_tokens: 100, output_tokens: 10, cache_read_input_tokens: 1000 })
    // 100 × 0.000003 + 10 × 0.000015 + 1000 × 0.0000003 = 0.00075
    expect(body.usage.cost).toBe(0.00075)
  })

  it("does not count OpenAI's cached prompt tokens twice", async () => {
    h.openai.setReply(() => ({ text: "cached answer", usage: { input: 100, output: 10, cacheRead: 1000 } }))
    const body = await json(await post(h, { model: "acme/gpt", ...hello }))
    expect(body.usage).toMatchObject({ input_tokens: 100, output_tokens: 10, cache_read_input_tokens: 1000 })
    // acme prices: prompt 0.000001 (cache reads at the prompt price), completion 0.000002
    expect(body.usage.cost).toBe(0.00112)
  })

  it("streams usage with message_start and output_tokens and cost in message_delta", async () => {
    h.anthropic.setReply(() => ({ text: "a b c", usage: { input: 20, output: 3, cacheRead: 0 } }))
    const events = await readEvents(await post(h, { model: "anthro/claude", stream: true, ...hello }))
    expect(events[0].data.message.usage.input_tokens).toBe(20)
    const delta = events.find((e) => e.event === "message_delta")!
    expect(delta.data.usage.output_tokens).toBe(3)
    expect(delta.data.usage.cost).toBe(0.000105)
  })

  it("an OpenAI upstream's stream: message_start shows the prompt as estimated, never 0; message_delta the counts told", async () => {
    h.openai.setReply(() => ({ text: "a b c", usage: { input: 20, output: 3, cacheRead: 1000 } }))
    const request = { model: "acme/gpt", stream: true, ...hello }
    const events = await readEvents(await post(h, request))
    const start = events[0].data.message.usage
    // the estimate the gateway bills a stream cut before its usage came: a token per four bytes of the body
    expect(start.input_tokens).toBe(Math.ceil(JSON.stringify(request).length / 4))
    // the cost is told at the end (message_delta), null until then: the Anthropic SDK keeps message_start's
    expect(start.cost).toBeNull()
    const delta = events.find((e) => e.event === "message_delta")!
    expect(delta.data.usage).toMatchObject({ input_tokens: 20, cache_read_input_tokens: 1000, output_tokens: 3 })
    // 20 × 0.000001 + 1000 × 0.000001 + 3 × 0.000002
    expect(delta.data.usage.cost).toBe(0.001026)
  })
})

describe("capabilities", () => {
  it("routes a document away from an endpoint that cannot take it, with a clear error when none can", async () => {
    const document = {
      type: "document",
      source: { type: "base64", media_type: "application/pdf", data: "JVBERi0xLjQK" }
    }
    const response = await post(h, {
      model: "acme/gpt",
      max_tokens: 10,
      messages: [{ role: "user", content: [document, { type: "text", text: "summarise" }] }]
    })
    expect(response.status).toBe(400)
    const error = (await json(response)).error
    expect(error.type).toBe("invalid_request_error")
    expect(error.message).toContain("does not accept documents")
    const fallback = await post(h, {
      model: "acme/gpt",
      max_tokens: 10,
      fallbacks: [{ model: "anthro/claude" }],
      messages: [{ role: "user", content: [document, { type: "text", text: "summarise" }] }]
    })
    expect(fallback.status).toBe(200)
    expect((await json(fallback)).model).toBe("anthro/claude")
    expect(h.openai.requests).toHaveLength(0)
  })
})

describe("body size limit", () => {
  const bodyOfSize = (size: number) => {
    const base = JSON.stringify({ model: "anthro/claude", max_tokens: 5, messages: [{ role: "user", content: "" }] })
    const padded = base.replace("\"content\":\"\"", `"content":"${"x".repeat(size - base.length)}"`)
    expect(Buffer.byteLength(padded)).toBe(size)
    return padded
  }

  it("accepts a body of exactly the limit and answers 413 one byte over", async () => {
    expect((await post(h, bodyOfSize(LIMIT))).status).toBe(200)
    const over = await post(h, bodyOfSize(LIMIT + 1))
    expect(over.status).toBe(413)
    expect(await json(over)).toMatchObject({ type: "error", error: { type: "invalid_request_error" } })
  })

  it("answers 413 for a chunked body over the limit", async () => {
    const big = bodyOfSize(LIMIT * 2)
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(big.slice(0, LIMIT)))
        controller.enqueue(new TextEncoder().encode(big.slice(LIMIT)))
        controller.close()
      }
    })
    const response = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: stream,
      duplex: "half"
    } as RequestInit)
    expect(response.status).toBe(413)
  })
})

describe("SDK behaviour on errors", () => {
  it("raises a RateLimitError for a 429 with nothing left to try", async () => {
    h.anthropic.script({ kind: "status", status: 429 })
    const client = new Anthropic({ baseURL: h.url, apiKey: KEY, maxRetries: 0 })
    await expect(client.messages.create({ model: "anthro/claude", ...hello } as never)).rejects.toBeInstanceOf(
      Anthropic.RateLimitError
    )
  })
})
