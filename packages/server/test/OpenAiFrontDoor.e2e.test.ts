/**
 * The OpenAI-compatible front door end to end with the official `openai` SDK: chat completions (text, tools round
 * trip, image, streams), embeddings and the Responses API, over an OpenAI-compatible upstream (passed through) and an
 * Anthropic one (translated), fallbacks, and every error status in OpenAI's error body.
 */
import { UsageLog } from "@model-gateway/core"
import { OpenRouter } from "@openrouter/sdk"
import * as OpenRouterErrors from "@openrouter/sdk/models/errors"
import { Effect } from "effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { Harness } from "./harness.js"
import { json, KEY, startHarness } from "./harness.js"

let h: Harness
let client: OpenAI

beforeAll(async () => {
  h = await startHarness({
    models: {
      // Marked distillable (provider.enforce_distillable_text); the harness's own models are not.
      "acme/open": {
        name: "Fake open weights",
        distillable: true,
        endpoints: [{
          provider: "acme",
          upstreamModel: "open-fake-1",
          pricing: { prompt: "0.000001", completion: "0" }
        }]
      },
      // Two endpoints of one provider: a failure of the first falls back to the second.
      "acme/twin": {
        endpoints: [
          { provider: "acme", upstreamModel: "twin-fake-1", pricing: { prompt: "0.000001", completion: "0.000002" } },
          { provider: "acme", upstreamModel: "twin-fake-2", pricing: { prompt: "0.000001", completion: "0.000002" } }
        ]
      }
    }
  })
  client = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: KEY, maxRetries: 0 })
})
afterAll(() => h.close())
beforeEach(() => h.reset())

const PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
const weather = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
  }
}

describe.each([
  ["an OpenAI-compatible upstream (passed through)", "acme/gpt", "acme"],
  ["an Anthropic upstream (translated)", "anthro/claude", "anthro"]
])("chat completions over %s", (_name, model, provider) => {
  it("answers chat.completions.create with the catalogue's model id, the provider and the cost", async () => {
    const completion = await client.chat.completions.create({
      model,
      max_tokens: 50,
      messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "hello there" }]
    })
    expect(completion.object).toBe("chat.completion")
    expect(completion.model).toBe(model)
    expect(completion.choices[0].message).toMatchObject({ role: "assistant", content: "Echo: hello there" })
    expect(completion.choices[0].finish_reason).toBe("stop")
    expect((completion as unknown as { provider: string }).provider).toBe(provider)
    expect(completion.usage!.prompt_tokens).toBeGreaterThan(0)
    expect((completion.usage as unknown as { cost: number }).cost).toBeGreaterThan(0)
  })

  it("runs a tools round trip with the ids it was given", async () => {
    const messages: Array<OpenAI.Chat.ChatCompletionMessageParam> = [
      { role: "user", content: "use a tool to get the weather in Paris" }
    ]
    const first = await client.chat.completions.create({ model, max_tokens: 50, messages, tools: [weather] })
    expect(first.choices[0].finish_reason).toBe("tool_calls")
    const call = first.choices[0].message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall
    expect(call.function.name).toBe("get_weather")
    messages.push(first.choices[0].message, { role: "tool", tool_call_id: call.id, content: "sunny, 21°C" })
    const second = await client.chat.completions.create({ model, max_tokens: 50, messages, tools: [weather] })
    expect(second.choices[0].message.content).toBe("Tool result received: sunny, 21°C")
  })

  it("takes an image", async () => {
    const completion = await client.chat.completions.create({
      model,
      max_tokens: 50,
      messages: [{
        role: "user",
        content: [
          { type: "text", text: "what is this?" },
          { type: "image_url", image_url: { url: `data:image/png;base64,${PNG_1PX}` } }
        ]
      }]
    })
    expect(completion.choices[0].message.content).toBe("I see 1 image(s).")
  })

  it("streams with .stream() to the final completion, usage only when asked for", async () => {
    const runner = client.chat.completions.stream({
      model,
      max_tokens: 50,
      messages: [{ role: "user", content: "one two three four" }],
      stream_options: { include_usage: true }
    })
    const chunks: Array<string> = []
    runner.on("content", (delta) => chunks.push(delta))
    const final = await runner.finalChatCompletion()
    expect(final.choices[0].message.content).toBe("Echo: one two three four")
    expect(chunks.length).toBeGreaterThan(1)
    expect(final.model).toBe(model)
    expect(final.usage?.completion_tokens).toBeGreaterThan(0)
    const raw = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model, max_tokens: 20, stream: true, messages: [{ role: "user", content: "hi" }] })
    })
    const text = await raw.text()
    expect(raw.headers.get("content-type")).toMatch(/^text\/event-stream/)
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true)
    expect(text).not.toContain("\"usage\"")
  })
})

describe("pass-through to an OpenAI-compatible endpoint", () => {
  // Text chunks that repeat the last one but for their text are read without parsing and written from that chunk's
  // frame (core's `ChunkTemplate`): each must still be the upstream's chunk with the catalogue's model id and the
  // provider, without OpenAI's `usage: null` (OpenRouter sends none, and its SDK refuses it).
  it.each([false, true])(
    "passes each chunk of a stream on as the upstream sent it (include_usage %s)",
    async (usage) => {
      const words = "one two three four five six seven eight nine ten"
      const raw = await fetch(`${h.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
        body: JSON.stringify({
          model: "acme/gpt",
          max_tokens: 50,
          stream: true,
          ...(usage ? { stream_options: { include_usage: true } } : {}),
          messages: [{ role: "user", content: words }]
        })
      })
      const data = (await raw.text()).split("\n\n").filter((frame) => frame.startsWith("data: ")).map((frame) =>
        frame.slice(6)
      )
      expect(data.at(-1)).toBe("[DONE]")
      const chunks = data.slice(0, -1).map((text) => JSON.parse(text) as Record<string, any>)
      const content = chunks.filter((chunk) => chunk.choices.length > 0)
      expect(content.length).toBeGreaterThan(10)
      for (const chunk of content) {
        expect(Object.keys(chunk)).toEqual([
          "id",
          "object",
          "created",
          "model",
          "service_tier",
          "system_fingerprint",
          "choices",
          "provider"
        ])
        expect(chunk).toMatchObject({ id: content[0].id, object: "chat.completion.chunk", model: "acme/gpt" })
        expect(chunk.provider).toBe("acme")
      }
      expect(content.map((chunk) => chunk.choices[0].delta.content ?? "").join("")).toBe(`Echo: ${words}`)
      expect(chunks.length - content.length).toBe(usage ? 1 : 0)
    }
  )

  it("forwards the fields the gateway does not know untouched, with the model id rewritten", async () => {
    await client.chat.completions.create({
      model: "acme/gpt",
      max_completion_tokens: 30,
      seed: 7,
      logit_bias: { "50256": -100 },
      user: "end-user-1",
      messages: [{ role: "user", content: "hi" }],
      // the gateway's own fields
      ...({ session_id: "s-1", provider: { sort: "price" } } as object)
    })
    const sent = h.openai.requests[0].body
    expect(sent).toMatchObject({ model: "gpt-fake-1", seed: 7, logit_bias: { "50256": -100 }, user: "end-user-1" })
    // The endpoint takes `max_tokens` (the default away from api.openai.com): the cap goes in the field it takes.
    expect(sent.max_tokens).toBe(30)
    expect(sent).not.toHaveProperty("max_completion_tokens")
    expect(sent).not.toHaveProperty("session_id")
    expect(sent).not.toHaveProperty("provider")
  })

  it.each([false, true])(
    "sends a large body as the client wrote it, but for the gateway's changes (stream %s)",
    async (stream) => {
      const messages = `[{"role": "system", "content": "Be brief ✓"},\n  {"role": "user", "content": ${
        JSON.stringify("y".repeat(6000))
      }}]`
      const response = await fetch(`${h.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
        body: `{"model": "acme/gpt", "max_completion_tokens": 30, "temperature": 1.0, "session_id": "s-1",` +
          ` "messages": ${messages}, "stream": ${stream}}`
      })
      expect(response.status).toBe(200)
      await response.text()
      const sent = h.openai.requests.at(-1)!
      expect(sent.text).toContain(`"messages": ${messages}`)
      expect(sent.text).toContain(`"temperature": 1.0`)
      expect(sent.body).toMatchObject({ model: "gpt-fake-1", max_tokens: 30, stream })
      expect(sent.body).not.toHaveProperty("max_completion_tokens")
      expect(sent.body).not.toHaveProperty("session_id")
      if (stream) expect(sent.body.stream_options).toEqual({ include_usage: true })
    }
  )
})

describe("a 200 from an OpenAI-compatible upstream that is not an answer", () => {
  it("fails the attempt instead of passing it on as a success: an error object, no choice, no data", async () => {
    const records = () =>
      h.gateway.gateway.runtime.runPromise(
        Effect.flatMap(UsageLog.UsageLog, (log) => Effect.zipRight(log.flush, log.list({ limit: 10_000 })))
      )
    const before = new Set((await records()).map((r) => r.requestId))
    const params = { model: "acme/gpt", max_tokens: 20, messages: [{ role: "user" as const, content: "hi" }] }
    h.openai.script({ kind: "status", status: 200, body: { error: { message: "model is overloaded", code: 503 } } })
    const overloaded = await client.chat.completions.create(params).catch((e) => e)
    expect(overloaded).toBeInstanceOf(OpenAI.APIError)
    expect(overloaded.status).toBeGreaterThanOrEqual(500)
    h.openai.script({ kind: "status", status: 200, body: { id: "x", object: "chat.completion", choices: [] } })
    const empty = await client.chat.completions.create(params).catch((e) => e)
    expect(empty).toBeInstanceOf(OpenAI.APIError)
    expect(empty.status).toBeGreaterThanOrEqual(500)
    h.openai.script({ kind: "status", status: 200, body: "[]" })
    const notAnObject = await client.chat.completions.create(params).catch((e) => e)
    expect(notAnObject).toBeInstanceOf(OpenAI.APIError)
    h.openai.script({ kind: "status", status: 200, body: { object: "list" } })
    const noData = await client.embeddings.create({ model: "acme/gpt", input: "x" }).catch((e) => e)
    expect(noData).toBeInstanceOf(OpenAI.APIError)
    // nothing of it was billed
    const added = (await records()).filter((r) => !before.has(r.requestId))
    expect(added.length).toBeGreaterThan(0)
    expect(added.filter((r) => Number(r.cost) > 0)).toEqual([])
  })
})

describe("a provider configuration that is wrong", () => {
  it("is a 502 the SDKs do not retry (x-should-retry: false); a passing overload is retried", async () => {
    const retrying = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: KEY, maxRetries: 2 })
    const params = { model: "acme/gpt", max_tokens: 20, messages: [{ role: "user" as const, content: "hi" }] }
    h.openai.setDefault({ kind: "status", status: 401 })
    const refused = await retrying.chat.completions.create(params).catch((e) => e)
    expect(refused.status).toBe(502)
    expect(refused.headers.get("x-should-retry")).toBe("false")
    expect(h.openai.requests).toHaveLength(1)
    h.reset()
    h.openai.script({ kind: "status", status: 529 })
    const retried = await retrying.chat.completions.create(params)
    expect(retried.choices[0]!.message.content).toBe("Echo: hi")
    expect(h.openai.requests).toHaveLength(2)
  })
})

describe("the request id", () => {
  it("reaches the openai SDK under OpenAI's header name too, on answers, streams and errors", async () => {
    const params = { model: "acme/gpt", max_tokens: 20, messages: [{ role: "user" as const, content: "hi" }] }
    const { data, response } = await client.chat.completions.create(params).withResponse()
    const requestId = (data as unknown as { readonly _request_id: string })._request_id
    expect(requestId).toMatch(/^req_[0-9a-f]{32}$/)
    expect(response.headers.get("request-id")).toBe(requestId)
    const { response: streamed } = await client.chat.completions.create({ ...params, stream: true }).withResponse()
    expect(streamed.headers.get("x-request-id")).toBe(streamed.headers.get("request-id"))
    const error = await client.chat.completions.create({ ...params, model: "nobody/nothing" }).catch((e) => e)
    expect(error).toBeInstanceOf(OpenAI.NotFoundError)
    expect(error.requestID).toMatch(/^req_[0-9a-f]{32}$/)
    // the messages routes keep Anthropic's name alone
    const messages = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": KEY, "anthropic-version": "2023-06-01" },
      body: JSON.stringify(params)
    })
    expect(messages.status).toBe(200)
    expect(messages.headers.get("request-id")).toMatch(/^req_/)
    expect(messages.headers.get("x-request-id")).toBeNull()
  })
})

describe("a streamed chat tool loop with thinking over an Anthropic upstream", () => {
  it("streams the signed thinking as reasoning_details, which the next turn hands back as Anthropic's blocks", async () => {
    const thinking = "The user wants the weather in Paris; I should call the tool."
    h.anthropic.setReply((body) =>
      body.messages.length === 1
        ? { thinking, toolCalls: [{ name: "get_weather", input: { city: "Paris" } }], stopReason: "tool_use" }
        : { text: "Sunny in Paris." }
    )
    const messages: Array<OpenAI.Chat.ChatCompletionMessageParam> = [{ role: "user", content: "weather in Paris?" }]
    const ask = () =>
      client.chat.completions.create({
        model: "anthro/claude",
        max_tokens: 8000,
        reasoning_effort: "low",
        messages,
        tools: [weather],
        stream: true
      })
    // The client merges the streamed entries by their index (texts joined), as OpenRouter's clients do.
    const details = new Map<number, Record<string, string | number>>()
    const calls: Array<OpenAI.Chat.ChatCompletionMessageFunctionToolCall> = []
    let reasoning = ""
    for await (const chunk of await ask()) {
      const delta = (chunk.choices[0]?.delta ?? {}) as Record<string, any>
      reasoning += delta.reasoning ?? ""
      for (const detail of delta.reasoning_details ?? []) {
        const into = details.get(detail.index)
        if (into === undefined) details.set(detail.index, { ...detail })
        else {
          into.text = `${into.text ?? ""}${detail.text ?? ""}`
          if (detail.signature) into.signature = detail.signature
        }
      }
      for (const call of delta.tool_calls ?? []) {
        if (call.id) calls[call.index] = { id: call.id, type: "function", function: { ...call.function } }
        else calls[call.index]!.function.arguments += call.function.arguments
      }
    }
    expect(reasoning).toBe(thinking)
    const signed = h.anthropic.requests[0]!.body
    expect(signed.thinking).toEqual({ type: "enabled", budget_tokens: 1600 })
    expect([...details.values()]).toEqual([
      {
        type: "reasoning.text",
        text: thinking,
        signature: expect.stringMatching(/^sig_fake_/),
        format: "anthropic-claude-v1",
        index: 0
      }
    ])
    messages.push(
      {
        role: "assistant",
        content: null,
        tool_calls: calls,
        ...({ reasoning_details: [...details.values()] } as object)
      },
      { role: "tool", tool_call_id: calls[0]!.id, content: "sunny, 21°C" }
    )
    let answer = ""
    for await (const chunk of await ask()) answer += chunk.choices[0]?.delta.content ?? ""
    expect(answer).toBe("Sunny in Paris.")
    const next = h.anthropic.requests[1]!.body
    expect(next.thinking).toEqual({ type: "enabled", budget_tokens: 1600 })
    expect(next.messages[1]).toEqual({
      role: "assistant",
      content: [
        { type: "thinking", thinking, signature: details.get(0)!.signature },
        { type: "tool_use", id: calls[0]!.id, name: "get_weather", input: { city: "Paris" } }
      ]
    })
  })
  it("runs the loop with thinking off when the openai SDK's finalChatCompletion() message is handed back", async () => {
    h.anthropic.setReply((body) =>
      body.messages.length === 1
        ? { thinking: "Call the tool.", toolCalls: [{ name: "get_weather", input: { city: "Rome" } }] }
        : { text: "Sunny in Rome." }
    )
    const messages: Array<OpenAI.Chat.ChatCompletionMessageParam> = [{ role: "user", content: "weather in Rome?" }]
    const params = { model: "anthro/claude", max_tokens: 8000, reasoning_effort: "low" as const, tools: [weather] }
    const first = await client.chat.completions.stream({ ...params, messages }).finalChatCompletion()
    const message = first.choices[0]!.message
    // the SDK keeps the last fragment of each delta field it does not know: here the signature, without its text
    expect((message as unknown as { reasoning_details: Array<unknown> }).reasoning_details).toEqual([
      expect.objectContaining({ type: "reasoning.text", text: "", signature: expect.any(String) })
    ])
    const call = message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall
    messages.push(message, { role: "tool", tool_call_id: call.id, content: "sunny" })
    const second = await client.chat.completions.stream({ ...params, messages }).finalChatCompletion()
    expect(second.choices[0]!.message.content).toBe("Sunny in Rome.")
    const next = h.anthropic.requests[1]!.body
    expect(next).not.toHaveProperty("thinking")
    expect(next.messages[1].content[0].type).toBe("tool_use")
  })
})

describe("a streamed tool call without arguments over an Anthropic upstream", () => {
  it("is \"{}\" in the openai SDK's finalChatCompletion() among parallel calls, empty delta or none", async () => {
    const now = { type: "function" as const, function: { name: "now", parameters: { type: "object", properties: {} } } }
    for (const fragments of [[""], []]) {
      h.anthropic.setReply(() => ({
        toolCalls: [
          { id: "toolu_paris", name: "get_weather", input: { city: "Paris" } },
          // Anthropic streams a tool without input as `input: {}`, then one empty fragment (or none)
          { id: "toolu_now", name: "now", input: {}, fragments },
          { id: "toolu_rome", name: "get_weather", input: { city: "Rome" } }
        ]
      }))
      const final = await client.chat.completions.stream({
        model: "anthro/claude",
        max_tokens: 50,
        messages: [{ role: "user", content: "weather in Paris and Rome, and the time" }],
        tools: [weather, now]
      }).finalChatCompletion()
      expect(final.choices[0]!.finish_reason).toBe("tool_calls")
      const calls = final.choices[0]!.message.tool_calls as Array<OpenAI.Chat.ChatCompletionMessageFunctionToolCall>
      expect(calls.map((call) => [call.id, call.type, call.function.name, call.function.arguments])).toEqual([
        ["toolu_paris", "function", "get_weather", "{\"city\":\"Paris\"}"],
        ["toolu_now", "function", "now", "{}"],
        ["toolu_rome", "function", "get_weather", "{\"city\":\"Rome\"}"]
      ])
      // the same as the answer not streamed
      const json = await client.chat.completions.create({
        model: "anthro/claude",
        max_tokens: 50,
        messages: [{ role: "user", content: "weather in Paris and Rome, and the time" }],
        tools: [weather, now]
      })
      expect(json.choices[0]!.message.tool_calls).toEqual(calls)
    }
  })
})

describe("@openrouter/sdk chat.send", () => {
  it("passes the SDK's validation, JSON and streamed, over both upstream kinds", async () => {
    const openrouter = new OpenRouter({ serverURL: `${h.url}/v1`, apiKey: KEY, retryConfig: { strategy: "none" } })
    for (const model of ["acme/gpt", "anthro/claude"]) {
      const completion = await openrouter.chat.send({
        chatRequest: { model, messages: [{ role: "user", content: "hello router" }], maxTokens: 40 }
      }) as { choices: Array<{ message: { content: unknown } }>; model: string }
      expect(completion.model).toBe(model)
      expect(completion.choices[0].message.content).toBe("Echo: hello router")
      const stream = await openrouter.chat.send({
        chatRequest: { model, messages: [{ role: "user", content: "stream router" }], stream: true }
      }) as AsyncIterable<{ choices: Array<{ delta: { content?: string | null } }> }>
      let text = ""
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ""
      expect(text).toBe("Echo: stream router")
      // With usage asked for: an OpenAI upstream's `usage: null` on each chunk failed the SDK's validation.
      const counted = await openrouter.chat.send({
        chatRequest: {
          model,
          messages: [{ role: "user", content: "count router" }],
          stream: true,
          streamOptions: { includeUsage: true }
        }
      }) as AsyncIterable<{ choices: Array<{ delta: { content?: string | null } }>; usage?: { cost?: number } }>
      let counts = ""
      const usages: Array<{ cost?: number }> = []
      for await (const chunk of counted) {
        counts += chunk.choices[0]?.delta.content ?? ""
        if (chunk.usage !== undefined) usages.push(chunk.usage)
      }
      expect(counts).toBe("Echo: count router")
      expect(usages).toHaveLength(1)
      expect(usages[0].cost).toBeGreaterThan(0)
    }
  })

  it("takes `models` without `model`, as OpenRouter's model routing: the first is requested, the next its fallback", async () => {
    const openrouter = new OpenRouter({ serverURL: `${h.url}/v1`, apiKey: KEY, retryConfig: { strategy: "none" } })
    h.anthropic.script({ kind: "status", status: 529 })
    const completion = await openrouter.chat.send({
      chatRequest: { models: ["anthro/claude", "acme/gpt"], messages: [{ role: "user", content: "hello models" }] }
    }) as { choices: Array<{ message: { content: unknown } }>; model: string }
    expect(completion.model).toBe("acme/gpt")
    expect(completion.choices[0].message.content).toBe("Echo: hello models")
    expect(h.anthropic.requests).toHaveLength(1)
    expect(h.openai.requests[0].body.model).toBe("gpt-fake-1")
    const none = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ models: [], messages: [{ role: "user", content: "x" }] })
    })
    expect(none.status).toBe(400)
    expect(((await none.json()) as { error: { message: string } }).error.message).toContain("model")
  })

  interface SdkChunk {
    readonly id: string
    readonly object: string
    readonly created: number
    readonly model: string
    readonly choices: ReadonlyArray<{ readonly finishReason: string | null }>
    readonly error?: { readonly code: number; readonly message: string }
  }

  // The error chunk is one of the stream's chunks: the SDK validates it like the others and delivers it.
  it.each(
    [
      ["cut mid-answer", { kind: "cut", afterEvents: 3 }],
      ["an in-band upstream error", { kind: "errorEvent", afterEvents: 3 }],
      ["a stall", { kind: "stall", afterEvents: 3 }]
    ] as const
  )("delivers the error chunk of a stream failing after content (%s)", async (_name, fault) => {
    h.openai.script(fault)
    const openrouter = new OpenRouter({ serverURL: `${h.url}/v1`, apiKey: KEY, retryConfig: { strategy: "none" } })
    const stream = await openrouter.chat.send({
      chatRequest: { model: "acme/gpt", stream: true, messages: [{ role: "user", content: "one two three four five" }] }
    }) as AsyncIterable<SdkChunk>
    const chunks: Array<SdkChunk> = []
    for await (const chunk of stream) chunks.push(chunk)
    const last = chunks.at(-1)!
    expect(chunks.length).toBeGreaterThan(1)
    expect(last.choices[0].finishReason).toBe("error")
    expect(last.error).toMatchObject({ code: expect.any(Number), message: expect.any(String) })
    const identity = ({ created, id, model, object }: SdkChunk) => ({ id, object, created, model })
    expect(chunks[0].model).toBe("acme/gpt")
    for (const chunk of chunks) expect(identity(chunk)).toEqual(identity(chunks[0]))
  })

  it("the error chunk repeats the stream's id, object, created and model on the wire", async () => {
    h.openai.script({ kind: "cut", afterEvents: 3 })
    const raw = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: "acme/gpt", stream: true, messages: [{ role: "user", content: "one two three" }] })
    })
    const text = await raw.text()
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true)
    const chunks = text.split("\n\n").filter((frame) => frame.startsWith("data: {")).map((frame) =>
      JSON.parse(frame.slice("data: ".length))
    )
    const last = chunks.at(-1)
    expect(last).toMatchObject({
      choices: [{ index: 0, delta: {}, finish_reason: "error" }],
      error: { code: expect.any(Number), message: expect.any(String), type: expect.any(String) }
    })
    const identity = ({ created, id, model, object }: Record<string, unknown>) => ({ id, object, created, model })
    expect(identity(chunks[0])).toEqual({
      id: expect.any(String),
      object: "chat.completion.chunk",
      created: expect.any(Number),
      model: "acme/gpt"
    })
    for (const chunk of chunks) expect(identity(chunk)).toEqual(identity(chunks[0]))
  })

  it("honours provider.enforceDistillableText: a distillable model answers, another is refused as zdr refuses", async () => {
    const openrouter = new OpenRouter({ serverURL: `${h.url}/v1`, apiKey: KEY, retryConfig: { strategy: "none" } })
    const send = (model: string, provider: { enforceDistillableText?: boolean | null; zdr?: boolean }) =>
      openrouter.chat.send({ chatRequest: { model, messages: [{ role: "user", content: "distil me" }], provider } })
    const completion = await send("acme/open", { enforceDistillableText: true }) as {
      choices: Array<{ message: { content: unknown } }>
      model: string
    }
    expect(completion.model).toBe("acme/open")
    expect(completion.choices[0].message.content).toBe("Echo: distil me")
    expect(h.openai.requests.at(-1)!.body).toMatchObject({ model: "open-fake-1" })
    expect(h.openai.requests.at(-1)!.body.provider).toBeUndefined()
    for (const enforceDistillableText of [false, null]) {
      const answer = await send("acme/gpt", { enforceDistillableText }) as { model: string }
      expect(answer.model).toBe("acme/gpt")
    }
    const sent = h.openai.requests.length
    const refused = await send("acme/gpt", { enforceDistillableText: true }).catch((error: unknown) => error)
    const zdr = await send("acme/gpt", { zdr: true }).catch((error: unknown) => error)
    expect(h.openai.requests).toHaveLength(sent)
    expect(zdr).toBeInstanceOf(OpenRouterErrors.BadRequestResponseError)
    expect(refused).toBeInstanceOf(OpenRouterErrors.BadRequestResponseError)
    const [distil, retention] = [refused, zdr] as Array<OpenRouterErrors.BadRequestResponseError>
    expect(distil.statusCode).toBe(400)
    expect(distil.statusCode).toBe(retention.statusCode)
    const body = JSON.parse(distil.body)
    expect(body.error.message).toBe(
      "No endpoints found that can serve this request (provider.enforce_distillable_text): " +
        "provider.enforce_distillable_text removed acme/gpt via acme (the model is not marked distillable)"
    )
    const expected = JSON.parse(retention.body)
    expected.error.message = expected.error.message.replaceAll("provider.zdr", "provider.enforce_distillable_text")
      .replace("is not a zero-data-retention endpoint", "the model is not marked distillable")
    expect(body).toEqual(expected)
  })

  it("answers errors with the body the SDK reads into its typed errors", async () => {
    const openrouter = new OpenRouter({ serverURL: `${h.url}/v1`, apiKey: KEY, retryConfig: { strategy: "none" } })
    const send = (model: string, client = openrouter) =>
      client.chat.send({ chatRequest: { model, messages: [{ role: "user", content: "x" }] } })
    const unknown = await send("nobody/nothing").catch((error: unknown) => error)
    expect(unknown).toBeInstanceOf(OpenRouterErrors.NotFoundResponseError)
    expect((unknown as OpenRouterErrors.NotFoundResponseError).error).toMatchObject({
      code: 404,
      message: expect.stringContaining("nobody/nothing")
    })
    const stranger = new OpenRouter({ serverURL: `${h.url}/v1`, apiKey: "wrong", retryConfig: { strategy: "none" } })
    await expect(send("acme/gpt", stranger)).rejects.toBeInstanceOf(OpenRouterErrors.UnauthorizedResponseError)
    const upstream = [
      [400, 400, OpenRouterErrors.BadRequestResponseError],
      // the provider returned an error: 502 (spec 7.2), as OpenRouter answers
      [500, 502, OpenRouterErrors.BadGatewayResponseError],
      [529, 529, OpenRouterErrors.ProviderOverloadedResponseError],
      [429, 429, OpenRouterErrors.TooManyRequestsResponseError]
    ] as const
    for (const [upstreamStatus, status, type] of upstream) {
      h.openai.script({ kind: "status", status: upstreamStatus })
      const error = await send("acme/gpt").catch((error: unknown) => error)
      expect(error, String(upstreamStatus)).toBeInstanceOf(type)
      expect((error as OpenRouterErrors.OpenRouterError).statusCode).toBe(status)
    }
    for (const [path, body] of [["/embeddings", { input: "x" }], ["/responses", { input: "x" }]] as const) {
      const response = await fetch(`${h.url}/v1${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ model: "nobody/nothing", ...body })
      })
      expect(response.status).toBe(404)
      expect((await json(response)).error).toMatchObject({ code: 404, type: "not_found_error", param: null })
    }
  })
})

describe("usage", () => {
  it("records one usage record per request with its route, model, provider, tokens and cost", async () => {
    const response = await client.chat.completions.create({
      model: "acme/gpt",
      messages: [{ role: "user", content: "count me" }]
    }).withResponse()
    const requestId = response.response.headers.get("request-id")
    const records = await h.gateway.gateway.runtime.runPromise(
      Effect.flatMap(UsageLog.UsageLog, (log) => Effect.zipRight(log.flush, log.list({ limit: 50 })))
    )
    const record = records.find((r) => r.requestId === requestId)
    expect(record).toMatchObject({
      route: "POST /v1/chat/completions",
      model: "acme/gpt",
      provider: "acme",
      status: 200,
      attempts: 1,
      inputTokens: response.data.usage!.prompt_tokens,
      outputTokens: response.data.usage!.completion_tokens
    })
    expect(Number(record!.cost)).toBeGreaterThan(0)
  })

  describe("a chat stream over an Anthropic upstream that breaks off", () => {
    // message_start tells 1234 prompt tokens (and cache reads and writes), message_delta 90 output tokens. The stream's
    // frames: message_start, content_block_start, ping, eight text deltas, content_block_stop, message_delta,
    // message_stop.
    const told = { input: 1234, cacheRead: 56, cacheWrite: 78, output: 90 }
    const words = "one two three four five six seven eight"

    const cutAfter = async (events: number) => {
      h.anthropic.setReply(() => ({ text: words, usage: told }))
      h.anthropic.script({ kind: "cut", afterEvents: events })
      const response = await fetch(`${h.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
        body: JSON.stringify({
          model: "anthro/claude",
          stream: true,
          max_tokens: 100,
          messages: [{ role: "user", content: "count to eight" }]
        })
      })
      expect(response.status).toBe(200)
      const text = await response.text()
      expect(text, "an in-band error, not a silent end").toContain("\"finish_reason\":\"error\"")
      const requestId = response.headers.get("request-id")!
      const recordOf = async () =>
        (await h.gateway.gateway.runtime.runPromise(
          Effect.flatMap(UsageLog.UsageLog, (log) => Effect.zipRight(log.flush, log.list({ limit: 50 })))
        )).find((r) => r.requestId === requestId)
      await expect.poll(recordOf).toBeDefined()
      return { record: (await recordOf())!, text }
    }

    it("before message_delta: billed message_start's prompt and cache counts, only the output estimated", async () => {
      const { record, text } = await cutAfter(5)
      const carried = text.split("\n\n").filter((frame) => frame.startsWith("data: {")).map((frame) =>
        JSON.parse(frame.slice("data: ".length))
      ).map((chunk) => chunk.choices?.[0]?.delta?.content ?? "").join("")
      expect(carried.length).toBeGreaterThan(0)
      expect(record).toMatchObject({
        model: "anthro/claude",
        inputTokens: 1234,
        cacheReadTokens: 56,
        cacheWriteTokens: 78,
        outputTokens: Math.max(1, Math.ceil(carried.length / 4))
      })
      // Cache writes at the prompt's price (the harness prices no cache write), reads at their own.
      const cost = 1234 * 0.000003 + 56 * 0.0000003 + 78 * 0.000003 + record.outputTokens * 0.000015
      expect(Number(record.cost)).toBeCloseTo(cost, 12)
    })

    it("after message_delta, before message_stop: billed the counts the upstream told, its output too", async () => {
      const { record } = await cutAfter(13)
      expect(record).toMatchObject({ inputTokens: 1234, cacheReadTokens: 56, cacheWriteTokens: 78, outputTokens: 90 })
    })
  })
})

describe("embeddings and responses", () => {
  it("embeds through an OpenAI-compatible endpoint, with usage and cost", async () => {
    const result = await client.embeddings.create({ model: "acme/gpt", input: ["first text", "second"] })
    expect(result.data.map((d) => d.index)).toEqual([0, 1])
    expect(result.model).toBe("acme/gpt")
    expect(result.usage.prompt_tokens).toBeGreaterThan(0)
    expect(h.openai.requests[0]).toMatchObject({ path: "/v1/embeddings", body: { model: "gpt-fake-1" } })
  })

  it("refuses embeddings for a model whose endpoints cannot serve them, with a 400", async () => {
    await expect(client.embeddings.create({ model: "anthro/claude", input: "x" })).rejects.toBeInstanceOf(
      OpenAI.BadRequestError
    )
  })

  it("creates a response, JSON and streamed", async () => {
    const response = await client.responses.create({ model: "acme/gpt", input: "tell me something" })
    expect(response.output_text).toBe("Echo: tell me something")
    expect(response.model).toBe("acme/gpt")
    const stream = await client.responses.create({ model: "acme/gpt", input: "stream this", stream: true })
    const types: Array<string> = []
    let text = ""
    for await (const event of stream) {
      types.push(event.type)
      if (event.type === "response.output_text.delta") text += event.delta
      if (event.type === "response.completed") expect(event.response.model).toBe("acme/gpt")
    }
    expect(types[0]).toBe("response.created")
    expect(types.at(-1)).toBe("response.completed")
    expect(text).toBe("Echo: stream this")
  })

  it("refuses max_output_tokens under 1 or not an integer with a 400 naming it, as chat max_tokens", async () => {
    const post = (path: string, body: Record<string, unknown>) =>
      fetch(`${h.url}/v1/${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ model: "acme/gpt", ...body })
      })
    for (const cap of [-100, 0, 1.5]) {
      const refused = await post("responses", { input: "x", max_output_tokens: cap })
      expect(refused.status).toBe(400)
      expect((await json(refused)).error).toEqual({
        code: 400,
        type: "invalid_request_error",
        param: "max_output_tokens",
        message: `max_output_tokens: must be an integer of at least 1, got ${cap}`
      })
      const chat = await post("chat/completions", { messages: [{ role: "user", content: "x" }], max_tokens: cap })
      expect((await json(chat)).error).toEqual({
        code: 400,
        type: "invalid_request_error",
        param: "max_tokens",
        message: `max_tokens: must be an integer of at least 1, got ${cap}`
      })
    }
    await expect(client.responses.create({ model: "acme/gpt", input: "x", max_output_tokens: 0 })).rejects
      .toBeInstanceOf(OpenAI.BadRequestError)
    expect(h.openai.requests).toHaveLength(0)
    // a cap of 1 or more, or null, goes through as it was sent
    await client.responses.create({ model: "acme/gpt", input: "x", max_output_tokens: 16 })
    await client.responses.create({ model: "acme/gpt", input: "x", max_output_tokens: null })
    expect(h.openai.requests.map((r) => r.body.max_output_tokens)).toEqual([16, null])
  })

  it("a stream ends at the upstream's last event ([DONE], response.completed), not at its body's later end", async () => {
    // the fake ends each body 800 ms after its last event (under the transport's 1 s drain limit)
    h.openai.script({ kind: "ok", endDelayMs: 800 }, { kind: "ok", endDelayMs: 800 })
    let started = Date.now()
    const chat = await client.chat.completions.stream({
      model: "acme/gpt",
      messages: [{ role: "user", content: "chat at once" }]
    }).finalChatCompletion()
    expect(chat.choices[0]?.message.content).toBe("Echo: chat at once")
    expect(Date.now() - started).toBeLessThan(700)
    started = Date.now()
    const stream = await client.responses.create({ model: "acme/gpt", input: "respond at once", stream: true })
    const types: Array<string> = []
    for await (const event of stream) types.push(event.type)
    expect(types.at(-1)).toBe("response.completed")
    expect(Date.now() - started).toBeLessThan(700)
    // neither upstream request was aborted: their bodies' ends were read after the streams
    await expect.poll(() => h.openai.inFlight(), { timeout: 2_000 }).toBe(0)
    expect(h.openai.aborted()).toBe(0)
  })
})

const usageRecords = () =>
  h.gateway.gateway.runtime.runPromise(
    Effect.flatMap(UsageLog.UsageLog, (log) => Effect.zipRight(log.flush, log.list({ limit: 100 })))
  )

describe("a Responses stream failing before its first delta (pitfall 3)", () => {
  // OpenAI sends `response.created`, `in_progress`, `output_item.added` and `content_part.added` before the first
  // delta: none of them is content, and an upstream that fails after them is one that never answered.
  it.each([
    ["output_item.added", 3],
    ["content_part.added", 4]
  ])("falls back to the next endpoint after %s: one clean stream, billed once", async (_name, afterEvents) => {
    const before = new Set((await usageRecords()).map((r) => r.requestId))
    h.openai.script({ kind: "cut", afterEvents })
    const stream = client.responses.stream({ model: "acme/twin", input: "one two three" })
    const events: Array<{ type: string; sequence_number: number }> = []
    stream.on("event", (event) => events.push(event))
    const response = await stream.finalResponse()
    expect(response.output_text).toBe("Echo: one two three")
    expect(response.model).toBe("acme/twin")
    // The planner may try either first (equal prices): the one asked second answered.
    const asked = h.openai.requests.map((r) => r.body.model)
    expect([...asked].sort()).toEqual(["twin-fake-1", "twin-fake-2"])
    expect(events.filter((e) => e.type === "response.created")).toHaveLength(1)
    expect(events.at(-1)!.type).toBe("response.completed")
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, n) => n))
    const records = (await usageRecords()).filter((r) => !before.has(r.requestId))
    expect(records).toHaveLength(1)
    const record = records[0]
    expect(record).toMatchObject({
      route: "POST /v1/responses",
      status: 200,
      errorType: null,
      attempts: 2,
      outputTokens: response.usage!.output_tokens
    })
    expect(record.endpointId).toBe(asked[1] === "twin-fake-1" ? "acme/twin@acme" : "acme/twin@acme#2")
  })
})

describe("a Responses stream failing after content", () => {
  interface SdkEvent {
    readonly type: string
    readonly sequenceNumber?: number
    readonly isUnknown?: boolean
    readonly code?: string | null
    readonly message?: string
    readonly param?: string | null
  }

  it("ends with OpenAI's error event, which @openrouter/sdk's responses.send types as one", async () => {
    // created, in_progress, output_item.added, content_part.added and two deltas, then the body ends.
    h.openai.script({ kind: "end", afterEvents: 6 })
    const openrouter = new OpenRouter({ serverURL: `${h.url}/v1`, apiKey: KEY, retryConfig: { strategy: "none" } })
    const stream = await openrouter.responses.send({
      responsesRequest: { model: "acme/gpt", input: "one two three four five", stream: true }
    }) as unknown as AsyncIterable<SdkEvent>
    const events: Array<SdkEvent> = []
    for await (const event of stream) events.push(event)
    // (The fake's `response` objects lack fields the SDK's schema requires: `response.created` and `in_progress` come
    // out as unknown events.)
    expect(events.slice(2).map((e) => e.type)).toEqual([
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "error"
    ])
    const error = events.at(-1)!
    expect(error.isUnknown).toBeUndefined()
    expect(error).toMatchObject({
      code: "api_error",
      message: "upstream stream ended before response.completed",
      param: null,
      sequenceNumber: 6
    })
    expect(events.slice(2).map((e) => e.sequenceNumber)).toEqual([2, 3, 4, 5, 6])
  })
})

describe("beta headers (pitfall 12)", () => {
  // Each provider's own beta header reaches an endpoint of that protocol, as anthropic-beta does on /v1/messages; no
  // other client header does (cookies, tracing, x-forwarded-*, the SDK's own x-stainless-*).
  const others = {
    cookie: "session=secret",
    traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "x-forwarded-for": "203.0.113.7",
    "x-custom-header": "private"
  }
  const beta = { "OpenAI-Beta": "assistants=v2", "anthropic-beta": "context-1m-2025-08-07" }
  const headers = { ...beta, ...others }

  const forwardsNothingElse = (received: Record<string, unknown>) => {
    for (const name of [...Object.keys(others), "x-stainless-lang", "x-stainless-retry-count"]) {
      expect(received).not.toHaveProperty(name)
    }
  }

  it("forwards OpenAI-Beta to an OpenAI-compatible endpoint on chat completions, JSON and streamed", async () => {
    const completion = await client.chat.completions.create({
      model: "acme/gpt",
      messages: [{ role: "user", content: "hello" }]
    }, { headers })
    expect(completion.choices[0].message.content).toBe("Echo: hello")
    const runner = client.chat.completions.stream({ model: "acme/gpt", messages: [{ role: "user", content: "hi" }] }, {
      headers
    })
    expect((await runner.finalChatCompletion()).choices[0].message.content).toBe("Echo: hi")
    expect(h.openai.requests).toHaveLength(2)
    for (const received of h.openai.requests) {
      expect(received.path).toBe("/v1/chat/completions")
      expect(received.headers["openai-beta"]).toBe("assistants=v2")
      expect(received.headers).not.toHaveProperty("anthropic-beta")
      expect(received.headers.authorization).toBe("Bearer sk-upstream-openai")
      forwardsNothingElse(received.headers)
    }
  })

  it("forwards OpenAI-Beta on responses, JSON and streamed, and on embeddings", async () => {
    const response = await client.responses.create({ model: "acme/gpt", input: "tell me" }, { headers })
    expect(response.output_text).toBe("Echo: tell me")
    const stream = await client.responses.create({ model: "acme/gpt", input: "stream it", stream: true }, { headers })
    for await (const _ of stream) {
      // read to the end
    }
    const embedded = await client.embeddings.create({ model: "acme/gpt", input: "embed me" }, { headers })
    expect(embedded.data).toHaveLength(1)
    expect(h.openai.requests.map((r) => r.path)).toEqual(["/v1/responses", "/v1/responses", "/v1/embeddings"])
    for (const received of h.openai.requests) {
      expect(received.headers["openai-beta"]).toBe("assistants=v2")
      expect(received.headers).not.toHaveProperty("anthropic-beta")
      forwardsNothingElse(received.headers)
    }
  })

  it("forwards a client's defaultHeaders as well", async () => {
    const betaClient = new OpenAI({
      baseURL: `${h.url}/v1`,
      apiKey: KEY,
      maxRetries: 0,
      defaultHeaders: { "OpenAI-Beta": "responses=v1" }
    })
    await betaClient.chat.completions.create({ model: "acme/gpt", messages: [{ role: "user", content: "hello" }] })
    expect(h.openai.requests.at(-1)!.headers["openai-beta"]).toBe("responses=v1")
  })

  it("forwards anthropic-beta to an Anthropic endpoint serving chat completions, JSON and streamed", async () => {
    const completion = await client.chat.completions.create({
      model: "anthro/claude",
      messages: [{ role: "user", content: "hello" }]
    }, { headers: { ...headers, "anthropic-version": "2099-01-01" } })
    expect(completion.choices[0].message.content).toBe("Echo: hello")
    const runner = client.chat.completions.stream({
      model: "anthro/claude",
      messages: [{ role: "user", content: "hi" }]
    }, { headers })
    expect((await runner.finalChatCompletion()).choices[0].message.content).toBe("Echo: hi")
    expect(h.anthropic.requests).toHaveLength(2)
    for (const received of h.anthropic.requests) {
      expect(received.path).toBe("/v1/messages")
      expect(received.headers["anthropic-beta"]).toBe("context-1m-2025-08-07")
      expect(received.headers).not.toHaveProperty("openai-beta")
      // The translation decides the request's shape: the adapter's version, not the client's.
      expect(received.headers["anthropic-version"]).toBe("2023-06-01")
      expect(received.headers["x-api-key"]).toBe("sk-upstream-anthropic")
      forwardsNothingElse(received.headers)
    }
  })

  it("sends no beta header when the client sent none", async () => {
    await client.chat.completions.create({ model: "acme/gpt", messages: [{ role: "user", content: "hello" }] })
    await client.chat.completions.create({ model: "anthro/claude", messages: [{ role: "user", content: "hello" }] })
    expect(h.openai.requests.at(-1)!.headers).not.toHaveProperty("openai-beta")
    expect(h.anthropic.requests.at(-1)!.headers).not.toHaveProperty("anthropic-beta")
  })
})

describe("fallbacks and errors", () => {
  it("falls back from a failing endpoint to the next model, JSON and streamed", async () => {
    h.anthropic.script({ kind: "status", status: 529 }, { kind: "status", status: 529 })
    const body = {
      model: "anthro/claude",
      max_tokens: 20,
      messages: [{ role: "user" as const, content: "hi" }],
      ...({ fallbacks: [{ model: "acme/gpt" }] } as object)
    }
    const completion = await client.chat.completions.create(body)
    expect(completion.model).toBe("acme/gpt")
    const streamed = await client.chat.completions.stream(body).finalChatCompletion()
    expect(streamed.model).toBe("acme/gpt")
  })

  it("answers every error status with OpenAI's error body, as the SDK expects", async () => {
    const bad = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: "acme/gpt", messages: [] })
    })
    expect(bad.status).toBe(400)
    expect((await json(bad)).error).toMatchObject({ type: "invalid_request_error", param: "messages" })
    // An output cap under 1 can never be served: refused here, before any upstream is asked.
    for (const field of ["max_tokens", "max_completion_tokens"]) {
      const before = h.openai.requests.length
      const capped = await fetch(`${h.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ model: "acme/gpt", messages: [{ role: "user", content: "x" }], [field]: 0 })
      })
      expect(capped.status).toBe(400)
      expect((await json(capped)).error).toMatchObject({ type: "invalid_request_error", param: field })
      expect(h.openai.requests.length).toBe(before)
    }
    const unauthorized = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: "wrong", maxRetries: 0 })
    await expect(
      unauthorized.chat.completions.create({ model: "acme/gpt", messages: [{ role: "user", content: "x" }] })
    )
      .rejects.toBeInstanceOf(OpenAI.AuthenticationError)
    await expect(
      client.chat.completions.create({ model: "nobody/nothing", messages: [{ role: "user", content: "x" }] })
    )
      .rejects.toBeInstanceOf(OpenAI.NotFoundError)
    h.openai.script({ kind: "status", status: 429 })
    await expect(client.chat.completions.create({ model: "acme/gpt", messages: [{ role: "user", content: "x" }] }))
      .rejects.toBeInstanceOf(OpenAI.RateLimitError)
    h.openai.script({ kind: "status", status: 500 })
    await expect(client.chat.completions.create({ model: "acme/gpt", messages: [{ role: "user", content: "x" }] }))
      .rejects.toBeInstanceOf(OpenAI.InternalServerError)
    await expect(
      client.chat.completions.create({
        model: "acme/gpt",
        messages: [{ role: "user", content: "x" }],
        ...({ plugins: [{ id: "fusion" }] } as object)
      })
    ).rejects.toThrow(/served on \/v1\/messages only/)
  })

  it("an upstream 5xx other than 503 and 529 is a 502 on chat, responses and embeddings, JSON and streamed", async () => {
    const chat = { model: "acme/gpt", messages: [{ role: "user" as const, content: "x" }] }
    const calls = [
      ["chat", () => client.chat.completions.create(chat)],
      ["chat stream", () => client.chat.completions.create({ ...chat, stream: true })],
      ["responses", () => client.responses.create({ model: "acme/gpt", input: "x" })],
      ["responses stream", () => client.responses.create({ model: "acme/gpt", input: "x", stream: true })],
      ["embeddings", () => client.embeddings.create({ model: "acme/gpt", input: "x" })]
    ] as const
    for (const upstream of [500, 502, 501]) {
      for (const [name, call] of calls) {
        h.reset()
        h.openai.setDefault({ kind: "status", status: upstream })
        const error = await (call() as Promise<unknown>).catch((e: unknown) => e)
        const label = `${name} after an upstream ${upstream}`
        expect(error, label).toBeInstanceOf(OpenAI.InternalServerError)
        const failed = error as InstanceType<typeof OpenAI.InternalServerError>
        expect(failed.status, label).toBe(502)
        expect(failed.error, label).toMatchObject({ code: 502, type: "server_error", param: null })
        // Not the 502 of a provider configuration that is wrong: the SDKs may retry this one.
        expect(failed.headers.get("x-should-retry"), label).toBeNull()
      }
    }
    // Overloads stay 529, on every route
    for (const [name, call] of calls) {
      h.reset()
      h.openai.setDefault({ kind: "status", status: 529 })
      expect(((await (call() as Promise<unknown>).catch((e: unknown) => e)) as { status: number }).status, name)
        .toBe(529)
    }
    // A passing provider error is retried by the SDK and answered
    h.reset()
    h.openai.script({ kind: "status", status: 502 })
    const retrying = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: KEY, maxRetries: 1 })
    expect((await retrying.embeddings.create({ model: "acme/gpt", input: "x" })).data).toHaveLength(1)
    expect(h.openai.requests).toHaveLength(2)
  })

  it("a provider error after content ends a chat stream with an error chunk of code 502", async () => {
    h.openai.script({ kind: "errorEvent", afterEvents: 3, status: 500 })
    const raw = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: "acme/gpt", stream: true, messages: [{ role: "user", content: "one two three" }] })
    })
    const frames = (await raw.text()).split("\n\n").filter((frame) => frame.startsWith("data: {"))
    const last = JSON.parse(frames.at(-1)!.slice("data: ".length))
    expect(last).toMatchObject({
      choices: [{ index: 0, delta: {}, finish_reason: "error" }],
      error: { code: 502, type: "api_error" }
    })
  })

  it("ends a stream cut after content with an error chunk the SDK raises, never a silent end", async () => {
    h.openai.script({ kind: "cut", afterEvents: 3 })
    const runner = client.chat.completions.stream({
      model: "acme/gpt",
      messages: [{ role: "user", content: "one two three four five six" }]
    })
    await expect(runner.finalChatCompletion()).rejects.toThrow()
  })
})

describe("a large conversation falling back", () => {
  // A body of 64 KiB or more lets go of its conversation once its first attempt's text is made (core's
  // `Conversation`); a fallback parses the client's bytes again. What the fallback sends must be the client's
  // conversation whole, whatever the first attempt did with it (passed through, or translated for Anthropic).
  /** 3,000 turns, over 64 KiB of JSON, each marked with its index to check their order where they arrive. */
  const messages: Array<OpenAI.Chat.ChatCompletionMessageParam> = [
    ...Array.from({ length: 3000 }, (_, n): OpenAI.Chat.ChatCompletionMessageParam =>
      n % 2 === 0
        ? { role: "user", content: `${String(n).padStart(6, "0")} é ${"w".repeat(20)}` }
        : { role: "assistant", content: `${String(n).padStart(6, "0")} é ${"w".repeat(20)}` }),
    { role: "user", content: "last" }
  ]
  const order = (text: string) => [...text.matchAll(/"(\d{6}) é w+"/g)].map((match) => Number(match[1]))
  const indices = Array.from({ length: 3000 }, (_, n) => n)

  let big: Harness
  let bigClient: OpenAI
  beforeAll(async () => {
    big = await startHarness({
      models: {
        "acme/second": {
          endpoints: [{
            provider: "acme",
            upstreamModel: "gpt-fake-2",
            pricing: { prompt: "0.000001", completion: "0.000002" }
          }]
        }
      }
    })
    bigClient = new OpenAI({ baseURL: `${big.url}/v1`, apiKey: KEY, maxRetries: 0 })
  })
  afterAll(() => big.close())
  beforeEach(() => big.reset())

  const ask = async (model: string, fallback: string, stream: boolean) => {
    const body = { model, max_tokens: 20, messages, ...({ fallbacks: [{ model: fallback }] } as object) }
    const completion = stream
      ? await bigClient.chat.completions.stream(body).finalChatCompletion()
      : await bigClient.chat.completions.create(body)
    expect(completion.model).toBe(fallback)
  }

  it.each([false, true])("from Anthropic to an OpenAI-compatible endpoint (stream %s)", async (stream) => {
    big.anthropic.script({ kind: "status", status: 529 })
    await ask("anthro/claude", "acme/gpt", stream)
    expect(big.anthropic.requests.at(-1)!.body.messages).toHaveLength(3001)
    const received = big.openai.requests.at(-1)!
    expect(received.body.messages).toEqual(messages)
    expect(order(received.text)).toEqual(indices)
  })

  it.each([false, true])("from an OpenAI-compatible endpoint to Anthropic, translated (stream %s)", async (stream) => {
    big.openai.script({ kind: "status", status: 500 })
    await ask("acme/gpt", "anthro/claude", stream)
    expect(big.openai.requests.at(-1)!.body.messages).toEqual(messages)
    const received = big.anthropic.requests.at(-1)!
    expect(received.body.messages).toHaveLength(3001)
    expect(order(received.text)).toEqual(indices)
  })

  it("embeds a large input whole, in order", async () => {
    const input = messages.map((m) => m.content as string)
    const result = await bigClient.embeddings.create({ model: "acme/gpt", input })
    expect(result.data).toHaveLength(input.length)
    expect(result.data.map((d) => d.index)).toEqual(input.map((_, i) => i))
    const received = big.openai.requests.at(-1)!
    expect(received.path).toBe("/v1/embeddings")
    expect(received.body.input).toEqual(input)
    expect(order(received.text)).toEqual(indices)
  })

  it("from one OpenAI-compatible endpoint to another, on the Responses API", async () => {
    big.openai.script({ kind: "status", status: 500 })
    const input = messages.map((m) => ({ role: m.role as "user" | "assistant", content: m.content as string }))
    const response = await bigClient.responses.create({
      model: "acme/gpt",
      input,
      ...({ fallbacks: [{ model: "acme/second" }] } as object)
    })
    expect(response.model).toBe("acme/second")
    const [first, second] = big.openai.requests.slice(-2)
    expect(first.body.model).toBe("gpt-fake-1")
    expect(second.body).toMatchObject({ model: "gpt-fake-2", input })
    expect(order(second.text)).toEqual(indices)
  })
})

describe("a model on a route that does not serve what it outputs", () => {
  // A speech-only model and an embeddings-only one, both on the OpenAI-compatible fake: had the gateway sent them a
  // request of another API, the fake would have answered it, as a real speech upstream does not (it answers 404).
  let m: Harness
  let mClient: OpenAI
  beforeAll(async () => {
    const endpoint = (upstreamModel: string) => ({
      provider: "acme",
      upstreamModel,
      pricing: { prompt: "0.000015", completion: "0" }
    })
    m = await startHarness({
      models: {
        "acme/tts": { outputModalities: ["audio"], endpoints: [endpoint("tts-fake")] },
        "acme/embed": { outputModalities: ["embeddings"], endpoints: [endpoint("embed-fake")] }
      }
    })
    mClient = new OpenAI({ baseURL: `${m.url}/v1`, apiKey: KEY, maxRetries: 0 })
  })
  afterAll(() => m.close())
  beforeEach(() => m.reset())

  it("embeddings to a speech model: a 400 on `model` naming the speech route, no upstream called", async () => {
    const error = await mClient.embeddings.create({ model: "acme/tts", input: "x" }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    const refused = error as InstanceType<typeof OpenAI.BadRequestError>
    expect(refused.status).toBe(400)
    expect(refused.param).toBe("model")
    expect(refused.message).toContain(
      "Model 'acme/tts' does not output embeddings (it outputs audio); send it to POST /v1/audio/speech"
    )
    expect(m.openai.requests).toHaveLength(0)
    // As a candidate it is skipped: nothing is asked of it when the requested model fails
    m.openai.script({ kind: "status", status: 500 })
    await expect(
      mClient.embeddings.create({ model: "acme/gpt", input: "x", ...({ models: ["acme/tts"] } as object) })
    ).rejects.toBeInstanceOf(OpenAI.InternalServerError)
    expect(m.openai.requests.map((r) => r.body.model)).toEqual(["gpt-fake-1"])
  })

  it("embeds with an embeddings model", async () => {
    const result = await mClient.embeddings.create({ model: "acme/embed", input: "x" })
    expect(result.model).toBe("acme/embed")
    expect(m.openai.requests[0]).toMatchObject({ path: "/v1/embeddings", body: { model: "embed-fake" } })
  })

  it("an embeddings model on responses and chat: a 400 naming the embeddings route, not the speech one", async () => {
    const calls = [
      () => mClient.responses.create({ model: "acme/embed", input: "x" }),
      () => mClient.chat.completions.create({ model: "acme/embed", messages: [{ role: "user", content: "x" }] })
    ]
    for (const call of calls) {
      const error = await call().catch((e: unknown) => e)
      expect(error).toBeInstanceOf(OpenAI.BadRequestError)
      const refused = error as InstanceType<typeof OpenAI.BadRequestError>
      expect(refused.param).toBe("model")
      expect(refused.message).toContain(
        "Model 'acme/embed' does not answer in text (it outputs embeddings); send it to POST /v1/embeddings"
      )
      expect(refused.message).not.toContain("audio/speech")
    }
    expect(m.openai.requests).toHaveLength(0)
  })
})
