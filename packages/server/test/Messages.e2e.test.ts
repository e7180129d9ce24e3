/**
 * POST /v1/messages end to end: the official Anthropic SDKs → the real gateway server → fake
 * upstreams speaking the Anthropic and OpenAI wire formats over real HTTP.
 */
import Anthropic from "@anthropic-ai/sdk"
import { UsageLog } from "@model-gateway/core"
import AnthropicV0 from "anthropic-sdk-v0"
import { Effect } from "effect"
import { gzipSync } from "node:zlib"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { Harness } from "./harness.js"
import { json, KEY, post, readEvents, startHarness, TEAM_KEY } from "./harness.js"

let h: Harness
let client: Anthropic

beforeAll(async () => {
  h = await startHarness({
    models: {
      // An endpoint that allows fewer output tokens than the default cap.
      "anthro/short": {
        endpoints: [{
          provider: "anthro",
          upstreamModel: "claude-short",
          pricing: { prompt: "0.000003", completion: "0.000015" },
          maxCompletionTokens: 1000
        }]
      }
    }
  })
  client = new Anthropic({ baseURL: h.url, apiKey: KEY, maxRetries: 0 })
})
afterAll(() => h.close())
beforeEach(() => h.reset())

const weatherTool = {
  name: "get_weather",
  description: "Weather for a city",
  input_schema: { type: "object" as const, properties: { city: { type: "string" } }, required: ["city"] }
}

const PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="

describe.each([
  ["Anthropic upstream", "anthro/claude", "anthro"],
  ["OpenAI-compatible upstream", "acme/gpt", "acme"]
])("%s", (_name, model, provider) => {
  it("answers messages.create with text, model and provider, and a cost", async () => {
    const message = await client.messages.create({
      model,
      max_tokens: 100,
      messages: [{ role: "user", content: "hello there" }]
    })
    expect(message.content[0]).toMatchObject({ type: "text", text: "Echo: hello there" })
    expect(message.model).toBe(model)
    const raw = message as unknown as Record<string, any>
    expect(raw.provider).toBe(provider)
    expect(raw.usage.input_tokens).toBeGreaterThan(0)
    expect(typeof raw.usage.cost).toBe("number")
    expect(raw.usage.cost).toBeGreaterThan(0)
    for (const key of ["stop_details", "container", "context_management", "safeguard_results"]) {
      expect(raw[key]).toBeNull()
    }
    // spec 2.2: a text block's citations and the usage's iterations are arrays, whatever the upstream sent
    expect(raw.content[0].citations).toEqual([])
    expect(raw.usage.iterations).toEqual([])
    for (const key of ["cache_creation", "inference_geo", "output_tokens_details", "server_tool_use", "cost_details"]) {
      expect(raw.usage).toHaveProperty(key)
    }
    expect(raw.usage.is_byok).toBe(false)
    expect(message.stop_reason).toBe("end_turn")
  })

  it("streams with messages.stream().finalMessage()", async () => {
    const stream = client.messages.stream({
      model,
      max_tokens: 100,
      messages: [{ role: "user", content: "stream this sentence please" }]
    })
    const deltas: Array<string> = []
    stream.on("text", (t) => deltas.push(t))
    const message = await stream.finalMessage()
    expect(message.content[0]).toMatchObject({ type: "text", text: "Echo: stream this sentence please" })
    expect(deltas.length).toBeGreaterThan(1)
    expect(message.model).toBe(model)
    expect(message.usage.output_tokens).toBeGreaterThan(0)
    // The SDK keeps message_start's cost (it copies only the tokens from message_delta): null there, never a part of
    // the cost passed off as the whole
    expect((message.usage as unknown as { cost: unknown }).cost).toBeNull()
  })

  it("does a tool round trip, keeping tool ids", async () => {
    const first = await client.messages.create({
      model,
      max_tokens: 100,
      tools: [weatherTool],
      messages: [{ role: "user", content: "please use a tool" }]
    })
    expect(first.stop_reason).toBe("tool_use")
    const toolUse = first.content.find((b) => b.type === "tool_use")!
    expect(toolUse).toMatchObject({ type: "tool_use", name: "get_weather" })
    const second = await client.messages.stream({
      model,
      max_tokens: 100,
      tools: [weatherTool],
      messages: [
        { role: "user", content: "please use a tool" },
        { role: "assistant", content: first.content },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: (toolUse as { id: string }).id, content: "sunny" }]
        }
      ]
    }).finalMessage()
    expect(second.content[0]).toMatchObject({ type: "text", text: "Tool result received: sunny" })
    const upstreamBody = (provider === "anthro" ? h.anthropic : h.openai).requests.at(-1)!.body
    expect(JSON.stringify(upstreamBody)).toContain((toolUse as { id: string }).id)
  })

  it("streams a tool call as input_json_delta", async () => {
    const message = await client.messages.stream({
      model,
      max_tokens: 100,
      tools: [weatherTool],
      messages: [{ role: "user", content: "please use a tool" }]
    }).finalMessage()
    expect(message.stop_reason).toBe("tool_use")
    expect(message.content.find((b) => b.type === "tool_use")).toMatchObject({ name: "get_weather", input: {} })
  })

  it("takes an image", async () => {
    const message = await client.messages.create({
      model,
      max_tokens: 100,
      messages: [{
        role: "user",
        content: [
          { type: "image", source: { type: "base64", media_type: "image/png", data: PNG_1PX } },
          { type: "text", text: "what is this?" }
        ]
      }]
    })
    expect(message.content[0]).toMatchObject({ type: "text", text: "I see 1 image(s)." })
  })

  it("a stream's upstream request is not aborted once its last event is through, its body's end still to come", async () => {
    // The fake ends each body 50 ms after its last event (a server that ends it once the write is flushed, or once
    // it has done its bookkeeping): the gateway's stream is over by then, and it reads that end rather than abort the
    // request, which would close the connection (a new one, a TLS handshake, for the next request).
    const fake = provider === "anthro" ? h.anthropic : h.openai
    fake.script(...Array.from({ length: 3 }, () => ({ kind: "ok" as const, endDelayMs: 50 })))
    for (let i = 0; i < 3; i++) {
      const message = await client.messages.stream({
        model,
        max_tokens: 100,
        messages: [{ role: "user", content: `stream number ${i}` }]
      }).finalMessage()
      expect(message.content[0]).toMatchObject({ type: "text", text: `Echo: stream number ${i}` })
      await waitFor(() => fake.inFlight() === 0, 1000)
    }
    // (that each then serves the next request is the transport's test: EventStream.test.ts)
    expect(fake.aborted()).toBe(0)
  })

  it("a stream ends for the client at the upstream's last event, not when the upstream gets round to its body's end", async () => {
    // the body's end 800 ms after the last event: well after the stream, within the transport's 1 s drain limit
    const fake = provider === "anthro" ? h.anthropic : h.openai
    fake.script({ kind: "ok", endDelayMs: 800 })
    const started = Date.now()
    const message = await client.messages.stream({
      model,
      max_tokens: 100,
      messages: [{ role: "user", content: "the end at once" }]
    }).finalMessage()
    const took = Date.now() - started
    expect(message.content[0]).toMatchObject({ type: "text", text: "Echo: the end at once" })
    expect(took).toBeLessThan(700)
    await waitFor(() => fake.inFlight() === 0, 1500)
    expect(fake.aborted()).toBe(0)
  })
})

describe("authentication", () => {
  it("accepts x-api-key from the 0.x SDK", async () => {
    const v0 = new AnthropicV0({ baseURL: h.url, apiKey: TEAM_KEY, maxRetries: 0 })
    const message = await v0.messages.create({
      model: "anthro/claude",
      max_tokens: 10,
      messages: [{ role: "user", content: "hi" }]
    })
    expect(message.content[0]).toMatchObject({ type: "text", text: "Echo: hi" })
  })

  it("rejects a missing or unknown key with 401 authentication_error", async () => {
    const cases: Array<Record<string, string>> = [{ authorization: "" }, { authorization: "Bearer nope" }, {
      "x-api-key": "nope"
    }]
    for (const headers of cases) {
      const response = await fetch(`${h.url}/v1/messages`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ model: "anthro/claude", messages: [] })
      })
      expect(response.status).toBe(401)
      const body = await json(response)
      expect(body).toMatchObject({ type: "error", error: { type: "authentication_error" } })
      expect(typeof body.request_id).toBe("string")
    }
    expect(h.anthropic.requests).toHaveLength(0)
  })

  it("raises AuthenticationError in the SDK", async () => {
    const bad = new Anthropic({ baseURL: h.url, apiKey: "wrong", maxRetries: 0 })
    await expect(bad.messages.create({ model: "anthro/claude", max_tokens: 1, messages: [] })).rejects.toBeInstanceOf(
      Anthropic.AuthenticationError
    )
  })
})

describe("fallbacks", () => {
  const ask = (extra: Record<string, unknown> = {}) =>
    post(h, {
      model: "anthro/claude",
      max_tokens: 50,
      messages: [{ role: "user", content: "hello" }],
      fallbacks: [{ model: "acme/gpt" }],
      ...extra
    }, { "x-service-metadata": "enabled" })

  it.each(
    [
      ["429", { kind: "status", status: 429 }],
      ["500", { kind: "status", status: 500 }],
      ["529", { kind: "status", status: 529 }],
      ["timeout", { kind: "hang" }]
    ] as const
  )("falls back after %s from the primary", async (_label, behaviour) => {
    h.anthropic.script(behaviour)
    const response = await ask()
    expect(response.status).toBe(200)
    const body = await json(response)
    expect(body.model).toBe("acme/gpt")
    expect(body.provider).toBe("acme")
    expect(body.content[0].text).toBe("Echo: hello")
    expect(h.anthropic.requests).toHaveLength(1)
    expect(h.openai.requests).toHaveLength(1)
    const summaries = body.service_metadata.pipeline.map((s: { summary: string }) => s.summary).join("\n")
    expect(summaries).toContain("anthro/claude via anthro failed")
    expect(summaries).toContain("acme/gpt via acme answered (fallback after 1 failed attempt)")
    for (const step of body.service_metadata.pipeline) {
      expect(Object.keys(step).sort()).toEqual(["name", "summary", "type"])
    }
  })

  it("falls back from a refused connection", async () => {
    const response = await post(h, {
      model: "dead/model",
      max_tokens: 50,
      messages: [{ role: "user", content: "hello" }],
      fallbacks: [{ model: "anthro/claude" }]
    })
    expect(response.status).toBe(200)
    expect((await json(response)).model).toBe("anthro/claude")
  })

  it("falls back in a stream when the primary fails before content", async () => {
    h.anthropic.script({ kind: "status", status: 529 })
    const message = await client.messages.stream({
      model: "anthro/claude",
      max_tokens: 50,
      messages: [{ role: "user", content: "hello stream" }],
      ...({ fallbacks: [{ model: "acme/gpt" }] } as {})
    }).finalMessage()
    expect(message.model).toBe("acme/gpt")
    expect(message.content[0]).toMatchObject({ text: "Echo: hello stream" })
  })

  it("falls back in a stream when the primary is cut before content", async () => {
    h.anthropic.script({ kind: "cut", afterEvents: 1 })
    const response = await ask({ stream: true })
    const events = await readEvents(response)
    expect(events[0].event).toBe("message_start")
    expect(events[0].data.message.model).toBe("acme/gpt")
    expect(events.filter((e) => e.event === "message_start")).toHaveLength(1)
    expect(events.at(-1)?.event).toBe("message_stop")
  })

  it("does not retry a 400 from the upstream", async () => {
    h.anthropic.script({ kind: "status", status: 400 })
    const response = await ask()
    expect(response.status).toBe(400)
    expect(await json(response)).toMatchObject({ type: "error", error: { type: "invalid_request_error" } })
    expect(h.anthropic.requests).toHaveLength(1)
    expect(h.openai.requests).toHaveLength(0)
  })

  it.each([
    [429, "rate_limit_error"],
    [529, "overloaded_error"],
    [500, "api_error"]
  ])("answers %s / %s when nothing is left to try", async (status, type) => {
    h.anthropic.script({ kind: "status", status })
    const response = await post(h, {
      model: "anthro/claude",
      max_tokens: 5,
      messages: [{ role: "user", content: "x" }]
    })
    expect(response.status).toBe(status)
    expect(await json(response)).toMatchObject({ type: "error", error: { type } })
    if (status === 429) expect(response.headers.get("retry-after")).toBe("1")
  })

  it("answers 503 when no endpoint is reachable", async () => {
    const response = await post(h, { model: "dead/model", max_tokens: 5, messages: [{ role: "user", content: "x" }] })
    expect(response.status).toBe(503)
    expect(await json(response)).toMatchObject({ type: "error", error: { type: "overloaded_error" } })
  })
})

describe("streams after content", () => {
  it("ends a stream cut mid-answer with an in-band error, cleanly", async () => {
    h.anthropic.script({ kind: "cut", afterEvents: 5 })
    const response = await post(h, {
      model: "anthro/claude",
      max_tokens: 50,
      stream: true,
      messages: [{ role: "user", content: "one two three four five six seven" }],
      fallbacks: [{ model: "acme/gpt" }]
    })
    expect(response.status).toBe(200)
    const events = await readEvents(response)
    expect(events.some((e) => e.event === "content_block_delta")).toBe(true)
    expect(events.at(-1)).toMatchObject({
      event: "error",
      data: { type: "error", error: { type: "overloaded_error" } }
    })
    expect(h.openai.requests).toHaveLength(0)
  })

  it("makes the SDK raise on an in-band error", async () => {
    h.openai.script({ kind: "cut", afterEvents: 4 })
    await expect(
      client.messages.stream({
        model: "acme/gpt",
        max_tokens: 50,
        messages: [{ role: "user", content: "one two three four five six seven" }]
      }).finalMessage()
    ).rejects.toThrow()
  })

  it("delivers each chunk as it arrives", async () => {
    h.anthropic.script({ kind: "ok", chunkDelayMs: 80 })
    const response = await post(h, {
      model: "anthro/claude",
      max_tokens: 50,
      stream: true,
      messages: [{ role: "user", content: "a b c d e f" }]
    })
    const reader = response.body!.getReader()
    const arrivals: Array<number> = []
    const decoder = new TextDecoder()
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      if (decoder.decode(value).includes("text_delta")) arrivals.push(Date.now())
    }
    expect(arrivals.length).toBeGreaterThan(3)
    expect(arrivals.at(-1)! - arrivals[0]).toBeGreaterThan(200)
  })

  it("aborts the upstream request when the client disconnects", async () => {
    h.anthropic.script({ kind: "ok", chunkDelayMs: 200 })
    const response = await post(h, {
      model: "anthro/claude",
      max_tokens: 50,
      stream: true,
      messages: [{ role: "user", content: "a b c d e f g h i j k l m n o p" }]
    })
    const reader = response.body!.getReader()
    await reader.read()
    await reader.cancel()
    await waitFor(() => h.anthropic.aborted() === 1)
    expect(h.anthropic.aborted()).toBe(1)
  })
})

describe("JSON answers", () => {
  it("aborts the upstream request of a JSON answer when the client disconnects before it", async () => {
    h.anthropic.script({ kind: "hang" })
    const controller = new AbortController()
    const pending = fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: "anthro/claude", max_tokens: 50, messages: [{ role: "user", content: "hi" }] }),
      signal: controller.signal
    }).catch(() => undefined)
    await waitFor(() => h.anthropic.inFlight() === 1)
    controller.abort()
    await pending
    // well before the provider's own time limit (1.5 s here), which would end the request anyway
    await waitFor(() => h.anthropic.aborted() === 1, 1000)
    expect(h.anthropic.aborted()).toBe(1)
    expect(h.anthropic.inFlight()).toBe(0)
  })
})

describe("request errors", () => {
  it("names the field for a schema violation", async () => {
    const response = await post(h, {
      model: "anthro/claude",
      messages: [{ role: "user", content: "x" }],
      fallbacks: [{ model: "a" }, { model: "b" }, { model: "c" }, { model: "d" }]
    })
    expect(response.status).toBe(400)
    const body = await json(response)
    expect(body.error.type).toBe("invalid_request_error")
    expect(body.error.message).toMatch(/^fallbacks/)
  })

  it("adds service_metadata for each metadata header, and not without one", async () => {
    const body = { model: "anthro/claude", max_tokens: 5, messages: [{ role: "user", content: "x" }] }
    for (const name of ["x-service-metadata", "x-service-experimental-metadata", "x-openrouter-metadata"]) {
      const answer = await json(await post(h, body, { [name]: "enabled" }))
      expect(answer.service_metadata.pipeline.length).toBeGreaterThan(0)
    }
    expect(await json(await post(h, body))).not.toHaveProperty("service_metadata")
    expect(await json(await post(h, body, { "x-service-metadata": "disabled" }))).not.toHaveProperty("service_metadata")
  })

  it("limits the x-session-id header to 256 characters, like session_id", async () => {
    const body = { model: "anthro/claude", max_tokens: 5, messages: [{ role: "user", content: "x" }] }
    expect((await post(h, body, { "x-session-id": "s".repeat(256) })).status).toBe(200)
    const over = await post(h, body, { "x-session-id": "s".repeat(257) })
    expect(over.status).toBe(400)
    expect((await json(over)).error.message).toMatch(/^x-session-id/)
  })

  it("ignores the x-session-id header when the body's session_id is given: the body's wins, even over a bad header", async () => {
    const body = {
      model: "anthro/claude",
      max_tokens: 5,
      session_id: "s".repeat(256),
      messages: [{ role: "user", content: "x" }]
    }
    expect((await post(h, body, { "x-session-id": "h".repeat(257) })).status).toBe(200)
    const { session_id: _, ...withoutSession } = body
    const refused = await post(h, withoutSession, { "x-session-id": "h".repeat(257) })
    expect(refused.status).toBe(400)
    expect((await json(refused)).error.message).toMatch(/^x-session-id/)
  })

  it("rejects an output cap under 1 with 400, before any upstream is asked", async () => {
    const before = h.anthropic.requests.length
    for (const max_tokens of [0, -1]) {
      const refused = await post(h, { model: "anthro/claude", max_tokens, messages: [{ role: "user", content: "x" }] })
      expect(refused.status).toBe(400)
      expect((await json(refused)).error).toMatchObject({
        type: "invalid_request_error",
        message: `max_tokens: must be an integer of at least 1, got ${max_tokens}`
      })
    }
    expect(h.anthropic.requests.length).toBe(before)
  })

  it("rejects malformed JSON and a wrong content type with 400", async () => {
    const malformed = await post(h, "{\"model\": ")
    expect(malformed.status).toBe(400)
    expect((await json(malformed)).error.message).toContain("Malformed JSON")
    // Large bodies are parsed in pieces (JsonText): what JSON.parse refuses is refused there too, with its message.
    const blocks = Array.from({ length: 2000 }, () => `{"type":"text","text":"${"y".repeat(40)}"}`).join(",")
    for (
      const large of [
        `{"model":"anthro/claude","max_tokens":5,"messages":[{"role":"user","content":[${blocks},]}]}`,
        `{"model":"anthro/claude","max_tokens":5,"messages":[{"role":"user","content":[${blocks}]}]`
      ]
    ) {
      const refused = await post(h, large)
      expect(refused.status).toBe(400)
      expect((await json(refused)).error.message).toMatch(/^Malformed JSON in request body: /)
    }
    const wrongType = await post(h, "{}", { "content-type": "text/plain" })
    expect(wrongType.status).toBe(400)
    expect((await json(wrongType)).error.message).toContain("Content-Type")
  })

  it("refuses a compressed body with 400 naming its encoding, not as malformed JSON; identity is plain", async () => {
    const body = JSON.stringify({ model: "anthro/claude", max_tokens: 5, messages: [{ role: "user", content: "x" }] })
    const compressed = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "content-encoding": "gzip", authorization: `Bearer ${KEY}` },
      body: gzipSync(body)
    })
    expect(compressed.status).toBe(400)
    expect((await json(compressed)).error.message).toBe(
      "Content-Encoding gzip is not supported: send the request body uncompressed"
    )
    expect((await post(h, body, { "content-encoding": "identity" })).status).toBe(200)
  })

  it("answers 404 not_found_error for an unknown model", async () => {
    const response = await post(h, { model: "nobody/nothing", max_tokens: 5, messages: [] })
    expect(response.status).toBe(404)
    expect(await json(response)).toMatchObject({ type: "error", error: { type: "not_found_error" } })
  })
})

describe("forwarding", () => {
  it("keeps every client field except gateway-only ones, with the upstream model id", async () => {
    await post(h, {
      model: "anthro/claude",
      max_tokens: 50,
      system: [{ type: "text", text: "be brief", cache_control: { type: "ephemeral" } }],
      messages: [
        { role: "user", content: [{ type: "text", text: "hi", cache_control: { type: "ephemeral", ttl: "1h" } }] },
        {
          role: "assistant",
          content: [{ type: "thinking", thinking: "hmm", signature: "sig-abc" }, { type: "text", text: "yo" }]
        },
        { role: "user", content: "again" }
      ],
      thinking: { type: "enabled", budget_tokens: 1024 },
      future_field: { nested: [1, 2] },
      models: ["anthro/backup"],
      session_id: "s1",
      plugins: [{ id: "response-healing" }],
      provider: { sort: "price" },
      trace: { trace_id: "t" }
    }, { "anthropic-beta": "fancy-2026-01-01", "anthropic-version": "2023-06-01" })
    const received = h.anthropic.requests.at(-1)!
    expect(received.body.model).toBe("claude-fake-1")
    expect(received.body.system[0].cache_control).toEqual({ type: "ephemeral" })
    expect(received.body.messages[0].content[0].cache_control).toEqual({ type: "ephemeral", ttl: "1h" })
    expect(received.body.messages[1].content[0]).toEqual({ type: "thinking", thinking: "hmm", signature: "sig-abc" })
    expect(received.body.thinking).toEqual({ type: "enabled", budget_tokens: 1024 })
    expect(received.body.future_field).toEqual({ nested: [1, 2] })
    for (const key of ["models", "session_id", "plugins", "provider", "trace", "fallbacks"]) {
      expect(received.body).not.toHaveProperty(key)
    }
    expect(received.headers["anthropic-beta"]).toBe("fancy-2026-01-01")
    expect(received.headers["x-api-key"]).toBe("sk-upstream-anthropic")
  })

  it("forwards each provider's own beta header to an endpoint of its protocol, and no other client header", async () => {
    const headers = {
      "anthropic-beta": "context-1m-2025-08-07",
      "openai-beta": "assistants=v2",
      cookie: "session=secret",
      "x-forwarded-for": "203.0.113.7",
      "x-custom-header": "private"
    }
    for (const stream of [false, true]) {
      for (const model of ["anthro/claude", "acme/gpt"]) {
        const response = await post(
          h,
          { model, max_tokens: 20, stream, messages: [{ role: "user", content: "hi" }] },
          headers
        )
        expect(response.status).toBe(200)
        await response.text()
      }
    }
    expect(h.anthropic.requests).toHaveLength(2)
    expect(h.openai.requests).toHaveLength(2)
    for (const received of h.anthropic.requests) {
      expect(received.headers["anthropic-beta"]).toBe("context-1m-2025-08-07")
      expect(received.headers).not.toHaveProperty("openai-beta")
    }
    for (const received of h.openai.requests) {
      expect(received.headers["openai-beta"]).toBe("assistants=v2")
      expect(received.headers).not.toHaveProperty("anthropic-beta")
    }
    for (const received of [...h.anthropic.requests, ...h.openai.requests]) {
      for (const name of ["cookie", "x-forwarded-for", "x-custom-header"]) {
        expect(received.headers).not.toHaveProperty(name)
      }
    }
  })

  // A coding agent's conversation is sent as its bytes, not serialised again (JsonBody): what the gateway did not
  // change arrives exactly as the client wrote it, its spacing and number forms included.
  // From 64 KiB a body is parsed in pieces (JsonText): 6,000 and 150,000 characters of tool result cover both paths.
  const conversation = (size: number) =>
    `[{"role":"user","content":[{"type":"text","text":"Fix the bug \\u2014 \\"quickly\\" ✓"}]},\n` +
    `    {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a.ts"}}]},\n` +
    `    {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":${
      JSON.stringify(
        Array.from(
          { length: size / 60 },
          (_, n) => ({ type: "text", text: `${String(n).padStart(6, "0")} ${"x".repeat(30)}` })
        )
      )
    }}]}]`
  const codingBody = (stream: boolean, size: number) =>
    `{\n  "model": "anthro/claude",\n  "models": ["anthro/backup"],\n  "max_tokens": 32000,\n` +
    `  "temperature": 1.0,\n  "metadata": {"user_id": "u-1"},\n  "future_field": {"big": 12345678901234567890},\n` +
    `  "messages": ${conversation(size)},\n  "session_id": "s-1",\n  "stream": ${stream}\n}`

  it.each([[false, 6000], [true, 6000], [false, 150_000], [true, 150_000]])(
    "sends a large body as the client wrote it, but for the gateway's changes (stream %s, %i characters)",
    async (stream, size) => {
      h.anthropic.script({ kind: "status", status: 529 })
      const response = await post(h, codingBody(stream, size))
      expect(response.status).toBe(200)
      await response.text()
      const [first, second] = h.anthropic.requests.slice(-2)
      // The first attempt is written from the client's bytes; a fallback's may be serialised (the bytes are held
      // weakly, and it comes later), so that it means the same is what counts.
      expect(first!.text).toContain(`"messages": ${conversation(size)}`)
      expect(first!.text).toContain(`"temperature": 1.0`)
      expect(first!.text).toContain(`"future_field": {"big": 12345678901234567890}`)
      expect(second!.body.messages).toEqual(JSON.parse(conversation(size)))
      for (const [received, model] of [[first!, "claude-fake-1"], [second!, "claude-backup"]] as const) {
        expect(received.body.temperature).toBe(1)
        expect(received.body.model).toBe(model)
        expect(received.body.stream).toBe(stream)
        expect(received.body.max_tokens).toBe(32000)
        expect(received.body.messages[0].content[0].text).toBe("Fix the bug — \"quickly\" ✓")
        expect(received.body).not.toHaveProperty("models")
        expect(received.body).not.toHaveProperty("session_id")
        expect(received.headers["content-length"]).toBe(String(Buffer.byteLength(received.text)))
      }
    }
  )
})

describe("translated for an OpenAI-protocol upstream", () => {
  it("sends top_k to an OpenAI-protocol endpoint only when it lists top_k among its parameters", async () => {
    // acme/gpt lists its parameters, without top_k: OpenAI itself refuses an unrecognised argument.
    const sent = await post(h, {
      model: "acme/gpt",
      max_tokens: 20,
      temperature: 0.5,
      top_k: 40,
      messages: [{ role: "user", content: "hello" }]
    })
    expect(sent.status).toBe(200)
    expect(h.openai.requests.at(-1)!.body).toMatchObject({ temperature: 0.5 })
    expect(h.openai.requests.at(-1)!.body).not.toHaveProperty("top_k")
  })
})

describe("a request without max_tokens (optional in spec 2.1, required by Anthropic's API)", () => {
  // The fake refuses a request without max_tokens as Anthropic does (400 "max_tokens: Field required"): the gateway
  // gives it the default the limits reserve, 4096 or an endpoint's lower limit, spliced into a large body.
  const conversation = (size: number) =>
    `[{"role":"user","content":[{"type":"text","text":"Summarise \\u2014 \\"briefly\\""}]},\n` +
    `    {"role":"assistant","content":"Which file?"},\n` +
    `    {"role":"user","content":${JSON.stringify(`${"y".repeat(size)} end`)}}]`
  const bodyOf = (model: string, stream: boolean, size: number) =>
    `{\n  "model": "${model}",\n  "temperature": 1.0,\n  "future_field": {"big": 12345678901234567890},\n` +
    `  "messages": ${conversation(size)},\n  "session_id": "s-1",\n  "stream": ${stream}\n}`

  it.each([
    [false, 10, "anthro/claude", 4096],
    [true, 10, "anthro/claude", 4096],
    [false, 6000, "anthro/claude", 4096],
    [true, 6000, "anthro/claude", 4096],
    [false, 150_000, "anthro/claude", 4096],
    [true, 150_000, "anthro/claude", 4096],
    [false, 10, "anthro/short", 1000],
    [true, 6000, "anthro/short", 1000]
  ])(
    "sends an Anthropic upstream a default cap (stream %s, %i characters, %s: %i)",
    async (stream, size, model, cap) => {
      const text = bodyOf(model, stream, size)
      expect(Buffer.byteLength(text) >= 4096).toBe(size >= 6000)
      const response = await post(h, text)
      expect(response.status).toBe(200)
      if (stream) {
        const events = await readEvents(response)
        expect(events.at(-1)!.event).toBe("message_stop")
        expect(events.find((e) => e.event === "content_block_delta")).toBeDefined()
      } else {
        expect((await json(response)).content[0].text).toMatch(/^Echo: /)
      }
      const received = h.anthropic.requests.at(-1)!
      expect(received.body.max_tokens).toBe(cap)
      expect(received.body.stream).toBe(stream)
      expect(received.body).not.toHaveProperty("session_id")
      expect(received.body.messages).toEqual(JSON.parse(conversation(size)))
      if (size >= 6000) {
        // Spliced: what the gateway did not change arrives as the client wrote it.
        expect(received.text).toContain(`"messages": ${conversation(size)}`)
        expect(received.text).toContain(`"temperature": 1.0`)
        expect(received.text).toContain(`"future_field": {"big": 12345678901234567890}`)
      }
    }
  )

  it.each([false, true])("sends an OpenAI-protocol upstream no cap (stream %s)", async (stream) => {
    const response = await post(h, { model: "acme/gpt", stream, messages: [{ role: "user", content: "hello" }] })
    expect(response.status).toBe(200)
    await response.text()
    const received = h.openai.requests.at(-1)!
    expect(received.body).not.toHaveProperty("max_tokens")
    expect(received.body).not.toHaveProperty("max_completion_tokens")
  })

  it("answers with the Anthropic SDK, which types max_tokens as required but sends what it is given", async () => {
    const message = await client.messages.create(
      { model: "anthro/claude", messages: [{ role: "user", content: "hello" }] } as unknown as Parameters<
        typeof client.messages.create
      >[0]
    ) as Anthropic.Message
    expect(message.content[0]).toMatchObject({ type: "text", text: "Echo: hello" })
    expect(h.anthropic.requests.at(-1)!.body.max_tokens).toBe(4096)
  })
})

describe("a large conversation translated", () => {
  /** 3,000 turns of text, over 64 KiB of JSON, each marked with its index to check their order where they arrive. */
  const turns = Array.from({ length: 3000 }, (_, n) => ({
    role: n % 2 === 0 ? "user" : "assistant",
    content: [{ type: "text", text: `${String(n).padStart(6, "0")} é ${"w".repeat(20)}` }]
  }))

  // A body the gateway makes (here the chat completions an OpenAI-protocol upstream takes) is serialised in parts
  // under V8's large-string size (JsonBody): the upstream gets all of it, as one well-formed request.
  it.each([false, true])("reaches an OpenAI-protocol upstream whole (stream %s)", async (stream) => {
    const response = await post(h, {
      model: "acme/gpt",
      max_tokens: 100,
      stream,
      messages: [...turns, { role: "user", content: "last" }]
    })
    expect(response.status).toBe(200)
    await response.text()
    const received = h.openai.requests.at(-1)!
    expect(Buffer.byteLength(received.text)).toBeGreaterThan(64 * 1024)
    expect(received.headers["content-length"]).toBe(String(Buffer.byteLength(received.text)))
    const texts = [...received.text.matchAll(/"(\d{6}) é w+"/g)].map((match) => Number(match[1]))
    expect(texts).toEqual(turns.map((_, n) => n))
    expect(received.body.messages.at(-1)).toMatchObject({ role: "user", content: "last" })
  })

  // A fallback after the first attempt was sent: what it sends must not depend on what the first attempt did with the
  // conversation (sent as the client's bytes, to an Anthropic-protocol upstream, before this one is translated).
  it.each([false, true])(
    "reaches an OpenAI-protocol fallback whole after a first attempt (stream %s)",
    async (stream) => {
      h.anthropic.script({ kind: "status", status: 529 })
      const response = await post(h, {
        model: "anthro/claude",
        max_tokens: 100,
        stream,
        messages: [...turns, { role: "user", content: "last" }],
        fallbacks: [{ model: "acme/gpt" }]
      })
      expect(response.status).toBe(200)
      await response.text()
      const first = h.anthropic.requests.at(-1)!
      expect(first.body.messages).toHaveLength(3001)
      const received = h.openai.requests.at(-1)!
      const texts = [...received.text.matchAll(/"(\d{6}) é w+"/g)].map((match) => Number(match[1]))
      expect(texts).toEqual(turns.map((_, n) => n))
      expect(received.body.messages.at(-1)).toMatchObject({ role: "user", content: "last" })
      // A translated non-streaming request leaves `stream` out (OpenAI's default).
      expect(received.body.stream ?? false).toBe(stream)
    }
  )

  // The other way: the first attempt translated, the fallback given the client's conversation as it was.
  it.each([false, true])(
    "reaches an Anthropic-protocol fallback whole after a translated first attempt (stream %s)",
    async (stream) => {
      h.openai.script({ kind: "status", status: 500 })
      const messages = [...turns, { role: "user", content: "last" }]
      const response = await post(h, {
        model: "acme/gpt",
        max_tokens: 100,
        stream,
        messages,
        fallbacks: [{ model: "anthro/claude" }]
      })
      expect(response.status).toBe(200)
      await response.text()
      expect(h.openai.requests.at(-1)!.body.messages).toHaveLength(3001)
      const received = h.anthropic.requests.at(-1)!
      expect(received.body.messages).toEqual(messages)
      expect(received.body.stream).toBe(stream)
    }
  )
})

describe("forwarding a __proto__ field", () => {
  // A body of 64 KiB or more is parsed in pieces (JsonText), its top-level fields set one by one.
  it.each([1, 70_000])(
    "forwards it as a plain field (never as a prototype) and answers normally (%i characters)",
    async (
      size
    ) => {
      const response = await post(
        h,
        `{"model":"anthro/claude","max_tokens":5,"messages":[{"role":"user","content":"${"x".repeat(size)}"}],` +
          "\"__proto__\":{\"polluted\":true}}"
      )
      expect(response.status).toBe(200)
      const received = h.anthropic.requests.at(-1)!
      expect(received.body.model).toBe("claude-fake-1")
      expect(Object.getOwnPropertyDescriptor(received.body, "__proto__")?.value).toEqual({ polluted: true })
      expect(received.body.polluted).toBeUndefined()
    }
  )
})

describe("usage log", () => {
  it("records each request with app attribution, off the request path", async () => {
    const response = await post(h, {
      model: "anthro/claude",
      max_tokens: 5,
      messages: [{ role: "user", content: "x" }],
      trace: { trace_id: "0af7651916cd43dd8448eb211c80319c", release: "v2", cohort: ["beta"] }
    }, {
      "http-referer": "https://app.example",
      "x-openrouter-title": "My App",
      "x-openrouter-categories": "cli-agent,coding"
    })
    const body = await json(response)
    const records = await h.gateway.gateway.runtime.runPromise(
      Effect.flatMap(
        UsageLog.UsageLog,
        (log) => Effect.zipRight(log.flush, log.list({ workspace: "default", limit: 50 }))
      )
    )
    const record = records.find((r) => r.requestId === response.headers.get("request-id"))
    expect(record).toMatchObject({
      workspace: "default",
      model: "anthro/claude",
      provider: "anthro",
      status: 200,
      stream: false,
      inputTokens: body.usage.input_tokens,
      outputTokens: body.usage.output_tokens,
      appReferer: "https://app.example",
      appTitle: "My App",
      appCategories: "cli-agent,coding",
      metadata: { release: "v2", cohort: ["beta"] }
    })
    expect(Number(record!.cost)).toBe(body.usage.cost)
    // The trace never reaches the provider.
    expect(h.anthropic.requests.at(-1)!.body.trace).toBeUndefined()
  })

  it("refuses custom trace metadata over 16 KiB of JSON, naming the limit", async () => {
    const at = (n: number) => ({
      model: "anthro/claude",
      max_tokens: 5,
      messages: [{ role: "user", content: "x" }],
      trace: { note: "é".repeat(n) }
    })
    // {"note":"..."} is 11 bytes besides the string; "é" is two bytes of UTF-8.
    expect((await post(h, at((16 * 1024 - 11) / 2 - 0.5 | 0))).status).toBe(200)
    const refused = await post(h, at(8192))
    expect(refused.status).toBe(400)
    expect((await json(refused)).error.message).toBe("trace: must be at most 16384 bytes of JSON, got 16395")
  })
})

const waitFor = async (predicate: () => boolean, timeoutMs = 3000) => {
  const deadline = Date.now() + timeoutMs
  while (!predicate() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
}
