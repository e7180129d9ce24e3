import AnthropicV0 from "anthropic-sdk-v0"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type FakeUpstream, freePortThatRefuses, startFakeAnthropic, startFakeOpenAi } from "./fakes/index.js"

interface Frame {
  readonly event?: string
  readonly data: string
}

const parseFrames = (text: string): Array<Frame> =>
  text.split("\n\n").filter((block) => block.trim() !== "").map((block) => {
    let event: string | undefined
    const data: Array<string> = []
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) event = line.slice(7)
      else if (line.startsWith("data: ")) data.push(line.slice(6))
    }
    return event === undefined ? { data: data.join("\n") } : { event, data: data.join("\n") }
  })

/** Reads an SSE body to its end (or failure), keeping every complete frame. */
const readSse = async (res: JsonResponse): Promise<{ frames: Array<Frame>; error?: unknown }> => {
  const reader = res.body!.getReader()
  const decoder = new TextDecoder()
  let text = ""
  try {
    while (true) {
      const { done, value } = await reader.read()
      if (done) break
      text += decoder.decode(value, { stream: true })
    }
    return { frames: parseFrames(text) }
  } catch (error) {
    return { frames: parseFrames(text.slice(0, text.lastIndexOf("\n\n") + 2)), error }
  }
}

/** Reads until `count` complete frames arrived; returns them and the reader to keep going. */
const readFrames = async (res: JsonResponse, count: number) => {
  const reader = res.body!.getReader()
  const decoder = new TextDecoder()
  let text = ""
  while (parseFrames(text.slice(0, text.lastIndexOf("\n\n") + 2)).length < count) {
    const { done, value } = await reader.read()
    if (done) break
    text += decoder.decode(value, { stream: true })
  }
  return { frames: parseFrames(text.slice(0, text.lastIndexOf("\n\n") + 2)), reader }
}

const eventually = async (check: () => boolean, ms = 1000) => {
  const until = Date.now() + ms
  while (!check() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 5))
  expect(check()).toBe(true)
}

/** `Response` whose `json()` is untyped, for terse assertions. */
type JsonResponse = Omit<Response, "json"> & { json(): Promise<any> }

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("FakeAnthropic", () => {
  let fake: FakeUpstream
  const post = (body: unknown, init: { headers?: Record<string, string>; signal?: AbortSignal } = {}) =>
    <Promise<JsonResponse>> fetch(`${fake.url}/v1/messages`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-api-key": "sk-test",
        "anthropic-version": "2023-06-01",
        ...init.headers
      },
      body: JSON.stringify(body),
      signal: init.signal
    })
  const ask = (text: string, extra: Record<string, unknown> = {}) => ({
    model: "claude-test",
    max_tokens: 100,
    messages: [{ role: "user", content: text }],
    ...extra
  })

  beforeAll(async () => {
    fake = await startFakeAnthropic()
  })
  afterAll(() => fake.close())
  beforeEach(() => fake.reset())

  it("answers JSON messages and records the request", async () => {
    expect(fake.url).toBe(`http://127.0.0.1:${fake.port}`)
    const res = await post(ask("hello there"))
    expect(res.status).toBe(200)
    expect(res.headers.get("request-id")).toMatch(/^req_/)
    const body = await res.json()
    expect(body).toMatchObject({
      type: "message",
      role: "assistant",
      model: "claude-test",
      content: [{ type: "text", text: "Echo: hello there" }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 3 }
    })
    expect(body.id).toMatch(/^msg_/)
    expect(body.usage.input_tokens).toBeGreaterThan(0)
    expect(fake.requests).toHaveLength(1)
    expect(fake.requests[0]).toMatchObject({ path: "/v1/messages", body: ask("hello there") })
    expect(fake.requests[0].headers["x-api-key"]).toBe("sk-test")
    expect(fake.requests[0].headers["anthropic-version"]).toBe("2023-06-01")
    await eventually(() => fake.inFlight() === 0)
  })

  it("streams the real event sequence, text in several deltas", async () => {
    const res = await post(ask("one two three four", { stream: true }))
    expect(res.headers.get("content-type")).toContain("text/event-stream")
    const { frames, error } = await readSse(res)
    expect(error).toBeUndefined()
    const names = frames.map((f) => f.event)
    expect(names[0]).toBe("message_start")
    expect(names.slice(1, 3)).toEqual(["content_block_start", "ping"])
    expect(names.slice(-4)).toEqual(["content_block_delta", "content_block_stop", "message_delta", "message_stop"])
    const data = frames.map((f) => JSON.parse(f.data))
    data.forEach((d, i) => expect(d.type).toBe(names[i]))
    expect(data[0].message).toMatchObject({ model: "claude-test", content: [], stop_reason: null })
    expect(data[0].message.usage).toMatchObject({ output_tokens: 1, cache_read_input_tokens: 0 })
    expect(data[0].message.usage.input_tokens).toBeGreaterThan(0)
    const deltas = data.filter((d) => d.type === "content_block_delta")
    expect(deltas.length).toBeGreaterThan(2)
    expect(deltas.map((d) => d.delta.text).join("")).toBe("Echo: one two three four")
    expect(data.at(-2)).toMatchObject({
      delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { output_tokens: 5 }
    })
  })

  it("streams a tool call with input_json_delta fragments", async () => {
    const tools = [{ name: "get_weather", input_schema: { type: "object" } }, { name: "other", input_schema: {} }]
    const res = await post(ask("please use a tool", { tools, stream: true }))
    const data = (await readSse(res)).frames.map((f) => JSON.parse(f.data))
    const start = data.find((d) => d.type === "content_block_start")
    expect(start.content_block).toEqual({ type: "tool_use", id: "toolu_fake_1", name: "get_weather", input: {} })
    const fragments = data.filter((d) => d.type === "content_block_delta").map((d) => d.delta)
    expect(fragments.length).toBeGreaterThan(1)
    expect(fragments.every((f) => f.type === "input_json_delta")).toBe(true)
    expect(JSON.parse(fragments.map((f) => f.partial_json).join(""))).toEqual({})
    expect(data.find((d) => d.type === "message_delta").delta.stop_reason).toBe("tool_use")
  })

  it("streams thinking, parallel tool calls and cache usage from setReply; the SDK accumulates it", async () => {
    fake.setReply(() => ({
      thinking: "let me think",
      text: "Calling both.",
      toolCalls: [{ id: "toolu_a", name: "a", input: { x: 1 } }, { name: "b", input: { y: "two" } }],
      usage: { input: 10, output: 20, cacheRead: 30, cacheWrite: 40 }
    }))
    const client = new AnthropicV0({ baseURL: fake.url, apiKey: "sk-test", maxRetries: 0 })
    const message = await client.messages.stream({
      model: "claude-test",
      max_tokens: 100,
      messages: [{ role: "user", content: "hi" }]
    })
      .finalMessage()
    expect(message.content.map((b) => b.type)).toEqual(["thinking", "text", "tool_use", "tool_use"])
    expect(message.content[0]).toMatchObject({ thinking: "let me think" })
    expect((message.content[0] as any).signature).toMatch(/^sig_fake_/)
    expect(message.content[2]).toMatchObject({ id: "toolu_a", name: "a", input: { x: 1 } })
    expect(message.content[3]).toMatchObject({ id: "toolu_fake_1", name: "b", input: { y: "two" } })
    expect(message.stop_reason).toBe("tool_use")
    expect(message.usage).toMatchObject({
      input_tokens: 10,
      output_tokens: 20,
      cache_read_input_tokens: 30,
      cache_creation_input_tokens: 40
    })
    const json = await (await post(ask("hi"))).json()
    expect(json.content.map((b: any) => b.type)).toEqual(["thinking", "text", "tool_use", "tool_use"])
  })

  it("answers tool results and images deterministically", async () => {
    const toolTurn = await (await post({
      model: "m",
      max_tokens: 10,
      messages: [
        { role: "user", content: "use a tool" },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "t", input: {} }] },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "42" }] }]
        }
      ]
    })).json()
    expect(toolTurn.content[0].text).toBe("Tool result received: 42")
    const image = { type: "image", source: { type: "base64", media_type: "image/png", data: "AA==" } }
    const images = await (await post({
      model: "m",
      max_tokens: 10,
      messages: [{ role: "user", content: [image, image, { type: "text", text: "what?" }] }]
    })).json()
    expect(images.content[0].text).toBe("I see 2 image(s).")
  })

  it("requires x-api-key", async () => {
    const res: JsonResponse = await fetch(`${fake.url}/v1/messages`, { method: "POST", body: JSON.stringify(ask("x")) })
    expect(res.status).toBe(401)
    expect(await res.json()).toMatchObject({ type: "error", error: { type: "authentication_error" } })
  })

  it("answers error statuses with the provider's bodies, consuming the queue in order", async () => {
    fake.script(
      { kind: "status", status: 529 },
      { kind: "status", status: 429 },
      { kind: "status", status: 500 },
      { kind: "status", status: 400 },
      { kind: "status", status: 503, body: { custom: true }, headers: { "x-should-retry": "false" } }
    )
    const expected = ["overloaded_error", "rate_limit_error", "api_error", "invalid_request_error"]
    for (const [i, status] of [529, 429, 500, 400].entries()) {
      const res = await post(ask("x", { stream: true }))
      expect(res.status).toBe(status)
      expect(res.headers.get("retry-after")).toBe(status === 429 ? "1" : null)
      const body = await res.json()
      expect(body).toMatchObject({ type: "error", error: { type: expected[i] } })
      expect(body.error.message).toEqual(expect.any(String))
      expect(body.request_id).toBe(res.headers.get("request-id"))
    }
    const custom = await post(ask("x"))
    expect(custom.status).toBe(503)
    expect(custom.headers.get("x-should-retry")).toBe("false")
    expect(await custom.json()).toEqual({ custom: true })
    expect((await post(ask("x"))).status).toBe(200)
    fake.setDefault({ kind: "status", status: 529 })
    expect((await post(ask("x"))).status).toBe(529)
    expect(fake.requests).toHaveLength(7)
  })

  it("cuts a stream after N events and a JSON body halfway", async () => {
    fake.script({ kind: "cut", afterEvents: 3 }, { kind: "cut", afterEvents: 0 })
    const { frames, error } = await readSse(await post(ask("a b c d", { stream: true })))
    expect(frames.map((f) => f.event)).toEqual(["message_start", "content_block_start", "ping"])
    expect(error).toBeDefined()
    const res = await post(ask("a b c d"))
    expect(res.status).toBe(200)
    await expect(res.text()).rejects.toThrow()
    expect(fake.aborted()).toBe(0)
  })

  it("sends a malformed event and continues", async () => {
    fake.script({ kind: "malformed", afterEvents: 4 })
    const { frames, error } = await readSse(await post(ask("a b c", { stream: true })))
    expect(error).toBeUndefined()
    expect(() => JSON.parse(frames[4].data)).toThrow()
    expect(frames.slice(0, 4).concat(frames.slice(5)).every((f) => JSON.parse(f.data).type === f.event)).toBe(true)
    expect(frames.at(-1)?.event).toBe("message_stop")
  })

  it("ends a stream with an in-band error event (extension)", async () => {
    fake.script({ kind: "errorEvent", afterEvents: 4 })
    const { frames } = await readSse(await post(ask("a b c", { stream: true })))
    expect(frames).toHaveLength(5)
    expect(frames[4].event).toBe("error")
    expect(JSON.parse(frames[4].data)).toEqual({
      type: "error",
      error: { type: "overloaded_error", message: "Overloaded" }
    })
  })

  it("stalls a stream and counts the client's abort", async () => {
    fake.script({ kind: "stall", afterEvents: 2 })
    const controller = new AbortController()
    const res = await post(ask("a b c", { stream: true }), { signal: controller.signal })
    const { frames, reader } = await readFrames(res, 2)
    expect(frames).toHaveLength(2)
    const next = reader.read()
    const outcome = await Promise.race([next.then(() => "data", () => "error"), sleep(150).then(() => "stalled")])
    expect(outcome).toBe("stalled")
    expect(fake.inFlight()).toBe(1)
    controller.abort()
    await next.catch(() => undefined)
    await eventually(() => fake.aborted() === 1 && fake.inFlight() === 0)
  })

  it("sends only keep-alives (pings, comments) after N events, then ends the body without message_stop", async () => {
    fake.script({ kind: "keepAliveStall", afterEvents: 4, everyMs: 10, forMs: 100 })
    const { frames, error } = await readSse(await post(ask("a b c", { stream: true })))
    expect(error).toBeUndefined()
    expect(frames.slice(0, 4).map((f) => f.event)).toEqual([
      "message_start",
      "content_block_start",
      "ping",
      "content_block_delta"
    ])
    const rest = frames.slice(4)
    expect(rest.length).toBeGreaterThanOrEqual(4)
    // `parseFrames` reads a comment as a frame without event or data
    expect(rest.every((f) => (f.event === "ping" && JSON.parse(f.data).type === "ping") || f.data === "")).toBe(true)
    expect(rest.some((f) => f.event === undefined)).toBe(true)
  })

  it("hangs until the client goes away, and destroys on arrival", async () => {
    fake.script({ kind: "hang" }, { kind: "destroy" })
    await expect(post(ask("x"), { signal: AbortSignal.timeout(100) })).rejects.toThrow()
    await eventually(() => fake.aborted() === 1 && fake.inFlight() === 0)
    await expect(post(ask("x"))).rejects.toThrow()
    expect(fake.requests).toHaveLength(2)
    expect(fake.aborted()).toBe(1)
  })

  it("counts a client abort during a slow stream and stops writing", async () => {
    fake.script({ kind: "ok", chunkDelayMs: 40 })
    const controller = new AbortController()
    const started = Date.now()
    const res = await post(ask("one two three four five six seven eight", { stream: true }), {
      signal: controller.signal
    })
    const { frames, reader } = await readFrames(res, 4)
    expect(frames.length).toBeGreaterThanOrEqual(4)
    expect(Date.now() - started).toBeGreaterThanOrEqual(100)
    controller.abort()
    await reader.read().catch(() => undefined)
    await eventually(() => fake.aborted() === 1 && fake.inFlight() === 0)
  })

  it("waits latencyMs before the headers", async () => {
    fake.script({ kind: "ok", latencyMs: 120 })
    const started = Date.now()
    const res = await post(ask("x"))
    expect(Date.now() - started).toBeGreaterThanOrEqual(110)
    expect(res.status).toBe(200)
    await res.json()
  })

  it("answers unknown paths with 404 without consuming the queue; reset clears everything", async () => {
    fake.script({ kind: "status", status: 500 })
    const res: JsonResponse = await fetch(`${fake.url}/v1/nothing`, { method: "POST", body: "{}" })
    expect(res.status).toBe(404)
    expect((await res.json()).error.type).toBe("not_found_error")
    fake.setDefault({ kind: "destroy" })
    fake.reset()
    expect(fake.requests).toHaveLength(0)
    expect((await post(ask("x"))).status).toBe(200)
  })
})

describe("FakeOpenAi", () => {
  let fake: FakeUpstream
  const post = (body: unknown, headers: Record<string, string> = { authorization: "Bearer sk-test" }) =>
    <Promise<JsonResponse>> fetch(`${fake.url}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body)
    })
  const ask = (text: string, extra: Record<string, unknown> = {}) => ({
    model: "gpt-test",
    messages: [{ role: "system", content: "be nice" }, { role: "user", content: text }],
    ...extra
  })
  const chunks = async (res: JsonResponse) => {
    const { frames, error } = await readSse(res)
    expect(error).toBeUndefined()
    expect(frames.every((f) => f.event === undefined)).toBe(true)
    expect(frames.at(-1)?.data).toBe("[DONE]")
    return frames.slice(0, -1).map((f) => JSON.parse(f.data))
  }

  beforeAll(async () => {
    fake = await startFakeOpenAi()
  })
  afterAll(() => fake.close())
  beforeEach(() => fake.reset())

  it("answers a chat.completion", async () => {
    expect(fake.url).toBe(`http://127.0.0.1:${fake.port}/v1`)
    const res = await post(ask("hello there"))
    expect(res.status).toBe(200)
    const body = await res.json()
    expect(body).toMatchObject({
      object: "chat.completion",
      model: "gpt-test",
      choices: [{
        index: 0,
        message: { role: "assistant", content: "Echo: hello there" },
        finish_reason: "stop"
      }],
      usage: { completion_tokens: 3, prompt_tokens_details: { cached_tokens: 0 } }
    })
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + 3)
    expect(fake.requests[0]).toMatchObject({ path: "/v1/chat/completions", body: ask("hello there") })
    expect(fake.requests[0].headers.authorization).toBe("Bearer sk-test")
  })

  it("streams chunks: role first, several content deltas, finish_reason, usage only when asked", async () => {
    const plain = await chunks(await post(ask("one two three", { stream: true })))
    expect(plain.every((c) => c.object === "chat.completion.chunk" && c.model === "gpt-test")).toBe(true)
    expect(plain.every((c) => !("usage" in c))).toBe(true)
    expect(plain[0].choices[0].delta).toMatchObject({ role: "assistant", content: "" })
    const content = plain.slice(1, -1).map((c) => c.choices[0].delta.content)
    expect(content.length).toBeGreaterThan(2)
    expect(content.join("")).toBe("Echo: one two three")
    expect(plain.at(-1).choices[0]).toMatchObject({ delta: {}, finish_reason: "stop" })

    fake.setReply(() => ({ text: "cached", usage: { input: 5, output: 1, cacheRead: 7 } }))
    const withUsage = await chunks(await post(ask("x", { stream: true, stream_options: { include_usage: true } })))
    expect(withUsage.slice(0, -1).every((c) => c.usage === null)).toBe(true)
    expect(withUsage.at(-1)).toMatchObject({
      choices: [],
      usage: { prompt_tokens: 12, completion_tokens: 1, total_tokens: 13, prompt_tokens_details: { cached_tokens: 7 } }
    })
  })

  it("streams parallel tool calls by index; the SDK accumulates them", async () => {
    fake.setReply(() => ({
      toolCalls: [{ name: "a", input: { city: "Paris" } }, { id: "call_b", name: "b", input: { n: 2 } }]
    }))
    const raw = await chunks(await post(ask("x", { stream: true })))
    const deltas = raw.flatMap((c) => c.choices[0]?.delta.tool_calls ?? [])
    const first = deltas.filter((d) => d.id !== undefined)
    expect(first).toEqual([
      { index: 0, id: "call_fake_1", type: "function", function: { name: "a", arguments: "" } },
      { index: 1, id: "call_b", type: "function", function: { name: "b", arguments: "" } }
    ])
    for (const index of [0, 1]) {
      const fragments = deltas.filter((d) => d.index === index && d.id === undefined).map((d) => d.function.arguments)
      expect(fragments.length).toBeGreaterThan(1)
      expect(JSON.parse(fragments.join(""))).toEqual(index === 0 ? { city: "Paris" } : { n: 2 })
    }
    expect(raw.at(-1).choices[0].finish_reason).toBe("tool_calls")

    fake.reset()
    fake.setReply(() => ({ toolCalls: [{ name: "a", input: { city: "Paris" } }, { name: "b", input: { n: 2 } }] }))
    const client = new OpenAI({ baseURL: fake.url, apiKey: "sk-test", maxRetries: 0 })
    const completion = await client.chat.completions.stream({ model: "gpt-test", messages: [] }).finalChatCompletion()
    expect(completion.choices[0].message.tool_calls?.map((c: any) => [c.id, c.function.name, c.function.arguments]))
      .toEqual([["call_fake_1", "a", "{\"city\":\"Paris\"}"], ["call_fake_2", "b", "{\"n\":2}"]])
  })

  it("derives the default reply from tools, tool results and images", async () => {
    const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }]
    const call = await (await post(ask("Use a tool now", { tools }))).json()
    expect(call.choices[0]).toMatchObject({
      message: {
        content: null,
        tool_calls: [{ id: "call_fake_1", type: "function", function: { name: "lookup", arguments: "{}" } }]
      },
      finish_reason: "tool_calls"
    })
    const result = await (await post({
      model: "m",
      messages: [
        { role: "user", content: "use a tool" },
        { role: "assistant", content: null, tool_calls: call.choices[0].message.tool_calls },
        { role: "tool", tool_call_id: "call_fake_1", content: "sunny" }
      ],
      tools
    })).json()
    expect(result.choices[0].message.content).toBe("Tool result received: sunny")
    const image = { type: "image_url", image_url: { url: "data:image/png;base64,AA==" } }
    const seen =
      await (await post({ model: "m", messages: [{ role: "user", content: [{ type: "text", text: "?" }, image] }] }))
        .json()
    expect(seen.choices[0].message.content).toBe("I see 1 image(s).")
  })

  it("requires a bearer token and answers errors in the {error} shape", async () => {
    const denied = await post(ask("x"), {})
    expect(denied.status).toBe(401)
    expect((await denied.json()).error).toMatchObject({ type: "invalid_request_error", param: null })
    fake.script({ kind: "status", status: 429 }, { kind: "status", status: 500 }, { kind: "status", status: 400 })
    for (const status of [429, 500, 400]) {
      const res = await post(ask("x"))
      expect(res.status).toBe(status)
      expect(res.headers.get("retry-after")).toBe(status === 429 ? "1" : null)
      const body = await res.json()
      expect(Object.keys(body.error).sort()).toEqual(["code", "message", "param", "type"])
    }
  })

  it("sends only keep-alives (comments, chunks that say nothing) after N events, then ends the body without [DONE]", async () => {
    fake.script({ kind: "keepAliveStall", afterEvents: 2, everyMs: 10, forMs: 150 })
    const res = await post(ask("a b c", { stream: true }))
    const text = await res.text()
    const blocks = text.split("\n\n").filter((block) => block !== "")
    expect(blocks.length).toBeGreaterThanOrEqual(2 + 4)
    expect(JSON.parse(blocks[1].slice(6)).choices[0].delta.content).toBe("Echo: ")
    const rest = blocks.slice(2)
    expect(rest).toContain(": keep-alive")
    expect(rest).toContain(": OPENROUTER PROCESSING")
    const chunks = rest.filter((block) => block.startsWith("data: ")).map((block) => JSON.parse(block.slice(6)))
    expect(chunks.length).toBeGreaterThan(0)
    for (const chunk of chunks) {
      expect(chunk.choices[0].finish_reason).toBeNull()
      expect(chunk.choices[0].delta.content ?? "").toBe("")
    }
    expect(text).not.toContain("[DONE]")
  })

  it("cuts, corrupts and stalls streams", async () => {
    fake.script(
      { kind: "cut", afterEvents: 2 },
      { kind: "malformed", afterEvents: 1 },
      { kind: "errorEvent", afterEvents: 2 },
      { kind: "stall", afterEvents: 0 }
    )
    const cut = await readSse(await post(ask("a b c", { stream: true })))
    expect(cut.frames).toHaveLength(2)
    expect(cut.error).toBeDefined()
    const bad = await readSse(await post(ask("a b c", { stream: true })))
    expect(() => JSON.parse(bad.frames[1].data)).toThrow()
    expect(bad.frames.at(-1)?.data).toBe("[DONE]")
    const errored = await readSse(await post(ask("a b c", { stream: true })))
    expect(errored.frames).toHaveLength(3)
    expect(JSON.parse(errored.frames[2].data).error).toMatchObject({ type: "server_error", param: null })
    const stalled = await fetch(`${fake.url}/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer k" },
      body: JSON.stringify(ask("x", { stream: true })),
      signal: AbortSignal.timeout(100)
    })
    expect(stalled.status).toBe(200)
    await expect(stalled.text()).rejects.toThrow()
    await eventually(() => fake.aborted() === 1 && fake.inFlight() === 0)
  })
})

describe("freePortThatRefuses", () => {
  it("returns a base URL whose connections are refused", async () => {
    const url = await freePortThatRefuses()
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    const error = await fetch(url).catch((e) => e)
    expect(error).toBeInstanceOf(TypeError)
    expect(String(error.cause?.code ?? error.cause)).toContain("ECONNREFUSED")
  })
})
