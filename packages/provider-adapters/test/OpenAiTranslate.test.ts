import { MessageStream } from "@anthropic-ai/sdk/lib/MessageStream"
import { Stream as SdkStream } from "@anthropic-ai/sdk/streaming"
import { assert, describe, it } from "@effect/vitest"
import type { Upstream } from "@model-gateway/core"
import { Wire } from "@model-gateway/core"
import { Either } from "effect"
import * as OpenAiTranslate from "../src/openai/OpenAiTranslate.js"
import * as OpenAiUpstream from "../src/openai/OpenAiUpstream.js"

type Json = Wire.JsonObject

const request = (body: Json, options: Partial<OpenAiTranslate.ChatRequestOptions> = {}): Json => {
  const result = OpenAiTranslate.toChatRequest(body, { upstreamModel: "gpt-test", stream: false, ...options })
  if (Either.isLeft(result)) throw new Error(`unexpected failure: ${result.left.message}`)
  return result.right
}

const requestError = (
  body: Json,
  options: Partial<OpenAiTranslate.ChatRequestOptions> = {}
): Upstream.UpstreamError => {
  const result = OpenAiTranslate.toChatRequest(body, { upstreamModel: "gpt-test", stream: false, ...options })
  if (Either.isRight(result)) throw new Error("expected a failure")
  return result.left
}

const base = (messages: Array<Json>, extra: Json = {}): Json => ({ max_tokens: 100, messages, ...extra })

const chunk = (delta: Json, extra: Json = {}): Json => ({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  model: "gpt-test",
  choices: [{ index: 0, delta, finish_reason: null }],
  ...extra
})

const finish = (reason: string): Json => ({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  choices: [{ index: 0, delta: {}, finish_reason: reason }]
})

const usageChunk = (usage: Json): Json => ({ id: "chatcmpl-1", object: "chat.completion.chunk", choices: [], usage })

const run = (chunks: ReadonlyArray<Json>, passThrough?: boolean): Array<Wire.StreamEvent> => {
  const translator = passThrough === undefined
    ? OpenAiTranslate.makeStreamTranslator("claude-gw")
    : OpenAiTranslate.makeStreamTranslator("claude-gw", "msg_fixed", { passThrough })
  const events: Array<Wire.StreamEvent> = []
  for (const c of chunks) {
    const out = translator.push(c)
    if (Either.isLeft(out)) throw new Error(`push failed: ${out.left.message}`)
    events.push(...out.right)
  }
  const last = translator.end()
  if (Either.isLeft(last)) throw new Error(`end failed: ${last.left.message}`)
  return [...events, ...last.right]
}

/** Checks the event order the Anthropic SDK accumulator relies on. */
const assertValidOrder = (events: ReadonlyArray<Wire.StreamEvent>): void => {
  assert.strictEqual(events[0]?.type, "message_start")
  assert.strictEqual(events.filter((e) => e.type === "message_start").length, 1)
  assert.strictEqual(events.at(-1)?.type, "message_stop")
  assert.strictEqual(events.at(-2)?.type, "message_delta")
  let open: number | undefined
  let next = 0
  for (const event of events.slice(1, -2)) {
    if (event.type === "content_block_start") {
      assert.strictEqual(open, undefined, "a block starts while another is open")
      assert.strictEqual(event.index, next++)
      open = event.index as number
    } else if (event.type === "content_block_delta") {
      assert.strictEqual(event.index, open)
    } else if (event.type === "content_block_stop") {
      assert.strictEqual(event.index, open)
      open = undefined
    } else {
      assert.fail(`unexpected event ${event.type} inside the message`)
    }
  }
  assert.strictEqual(open, undefined)
  const delta = events.at(-2) as Json
  assert.isNumber((delta.usage as Json).output_tokens)
}

/** Feeds events, as named SSE frames, through the Anthropic SDK's own parser and accumulator. */
const sdkFinalMessage = async (events: ReadonlyArray<Wire.StreamEvent>): Promise<{
  content: Array<unknown>
  stop_reason: string | null
  usage: { input_tokens: number; output_tokens: number }
}> => {
  const sse = events.map(Wire.sseFrame).join("")
  const parsed: Array<unknown> = []
  for await (const event of SdkStream.fromSSEResponse(new Response(sse), new AbortController())) parsed.push(event)
  assert.strictEqual(parsed.length, events.length)
  const ndjson = parsed.map((event) => JSON.stringify(event) + "\n").join("")
  return MessageStream.fromReadableStream(new Response(ndjson).body!).finalMessage()
}

describe("toChatRequest", () => {
  it("maps the model, system prompt, sampling fields and metadata", () => {
    const out = request(
      base([{ role: "user", content: "hi" }], {
        model: "claude-x",
        system: "be brief",
        temperature: 0.2,
        top_p: 0.9,
        top_k: 40,
        stop_sequences: ["END"],
        metadata: { user_id: "u1" }
      })
    )
    assert.deepStrictEqual(out, {
      model: "gpt-test",
      messages: [{ role: "system", content: "be brief" }, { role: "user", content: "hi" }],
      max_tokens: 100,
      temperature: 0.2,
      top_p: 0.9,
      top_k: 40,
      stop: ["END"],
      user: "u1"
    })
  })

  it("drops top_k for an upstream that does not take it (OpenAI refuses it as an unrecognised argument)", () => {
    const body = base([{ role: "user", content: "hi" }], { top_k: 40 })
    const translated = (supportsTopK: boolean | undefined) => request(body, { supportsTopK })
    assert.notProperty(translated(false), "top_k")
    assert.strictEqual(translated(true).top_k, 40)
    assert.strictEqual(translated(undefined).top_k, 40)
  })

  it("joins system text blocks and keeps cache_control only when asked", () => {
    const body = base([{ role: "user", content: "hi" }], {
      system: [{ type: "text", text: "a" }, { type: "text", text: "b", cache_control: { type: "ephemeral" } }]
    })
    assert.deepStrictEqual((request(body).messages as Array<Json>)[0], { role: "system", content: "a\n\nb" })
    assert.deepStrictEqual((request(body, { cacheControl: true }).messages as Array<Json>)[0], {
      role: "system",
      content: [{ type: "text", text: "a" }, { type: "text", text: "b", cache_control: { type: "ephemeral" } }]
    })
  })

  it("keeps cache_control on system, user, assistant and tool result text only when asked", () => {
    const ephemeral = { type: "ephemeral" }
    const hour = { type: "ephemeral", ttl: "1h" }
    const body = base([
      { role: "user", content: [{ type: "text", text: "rules" }, { type: "text", text: "long", cache_control: hour }] },
      {
        role: "assistant",
        content: [
          { type: "text", text: "ok", cache_control: ephemeral },
          ...["t1", "t2", "t3"].map((id) => ({ type: "tool_use", id, name: "read", input: {} }))
        ]
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "t1", content: "file one", cache_control: ephemeral },
          {
            type: "tool_result",
            tool_use_id: "t2",
            is_error: true,
            content: [{ type: "text", text: "a" }, { type: "text", text: "b", cache_control: ephemeral }]
          },
          {
            type: "tool_result",
            tool_use_id: "t3",
            content: [{ type: "text", text: "c" }, { type: "text", text: "" }],
            cache_control: hour
          },
          { type: "text", text: "next", cache_control: ephemeral }
        ]
      }
    ], {
      cache_control: ephemeral,
      system: [{ type: "text", text: "sys", cache_control: ephemeral }, { type: "text", text: "more" }]
    })

    const off = request(body)
    assert.notInclude(JSON.stringify(off), "cache_control")
    assert.deepStrictEqual(off.messages, [
      { role: "system", content: "sys\n\nmore" },
      { role: "user", content: [{ type: "text", text: "rules" }, { type: "text", text: "long" }] },
      {
        role: "assistant",
        content: "ok",
        tool_calls: ["t1", "t2", "t3"].map((id) => ({
          id,
          type: "function",
          function: { name: "read", arguments: "{}" }
        }))
      },
      { role: "tool", tool_call_id: "t1", content: "file one" },
      { role: "tool", tool_call_id: "t2", content: "Error: a\nb" },
      { role: "tool", tool_call_id: "t3", content: "c\n" },
      { role: "user", content: [{ type: "text", text: "next" }] }
    ])

    const on = request(body, { cacheControl: true })
    // Automatic caching: OpenRouter's chat completions take the request's own marker at the top level.
    assert.deepStrictEqual(on.cache_control, ephemeral)
    assert.deepStrictEqual(on.messages, [
      {
        role: "system",
        content: [{ type: "text", text: "sys", cache_control: ephemeral }, { type: "text", text: "more" }]
      },
      { role: "user", content: [{ type: "text", text: "rules" }, { type: "text", text: "long", cache_control: hour }] },
      {
        role: "assistant",
        content: [{ type: "text", text: "ok", cache_control: ephemeral }],
        tool_calls: ["t1", "t2", "t3"].map((id) => ({
          id,
          type: "function",
          function: { name: "read", arguments: "{}" }
        }))
      },
      { role: "tool", tool_call_id: "t1", content: [{ type: "text", text: "file one", cache_control: ephemeral }] },
      {
        role: "tool",
        tool_call_id: "t2",
        content: [{ type: "text", text: "Error: a" }, { type: "text", text: "b", cache_control: ephemeral }]
      },
      // The result's own marker goes on its last text part; Anthropic refuses one on an empty part.
      { role: "tool", tool_call_id: "t3", content: [{ type: "text", text: "c", cache_control: hour }] },
      { role: "user", content: [{ type: "text", text: "next", cache_control: ephemeral }] }
    ])

    // Without a marker, a tool result stays text and the system prompt joined, markers kept or not.
    const plain = request(
      base([{ role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "x" }] }], {
        system: [{ type: "text", text: "a" }, { type: "text", text: "b" }]
      }),
      { cacheControl: true }
    )
    assert.deepStrictEqual(plain.messages, [
      { role: "system", content: "a\n\nb" },
      { role: "tool", tool_call_id: "t1", content: "x" }
    ])
    assert.notProperty(plain, "cache_control")
  })

  it("keeps cache markers by default on OpenRouter only", () => {
    assert.isTrue(OpenAiUpstream.defaultCacheControl("https://openrouter.ai/api/v1"))
    assert.isFalse(OpenAiUpstream.defaultCacheControl("https://api.openai.com/v1"))
    assert.isFalse(OpenAiUpstream.defaultCacheControl("http://127.0.0.1:8000/v1"))
    assert.isFalse(OpenAiUpstream.defaultCacheControl("https://openrouter.ai.example.com/v1"))
    assert.isFalse(OpenAiUpstream.defaultCacheControl("not a url"))
  })

  it("keeps system messages sent among the others in their place (Claude Code's mid-conversation system)", () => {
    const out = request(
      base([
        { role: "user", content: "hi" },
        { role: "assistant", content: "hello" },
        { role: "system", content: "The user's time zone is UTC." },
        { role: "system", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] },
        { role: "user", content: "what time is it?" }
      ], { system: "be brief" })
    )
    assert.deepStrictEqual(out.messages, [
      { role: "system", content: "be brief" },
      { role: "user", content: "hi" },
      { role: "assistant", content: "hello" },
      { role: "system", content: "The user's time zone is UTC." },
      { role: "system", content: "a\n\nb" },
      { role: "user", content: "what time is it?" }
    ])
  })

  it("caps the output with the field the endpoint takes", () => {
    const body = base([{ role: "user", content: "hi" }])
    assert.strictEqual(request(body).max_tokens, 100)
    const reasoning = request(body, { maxTokensField: "max_completion_tokens" })
    assert.strictEqual(reasoning.max_completion_tokens, 100)
    assert.notProperty(reasoning, "max_tokens")
    // By default: what OpenAI's API takes on api.openai.com, `max_tokens` elsewhere.
    assert.strictEqual(OpenAiUpstream.defaultMaxTokensField("https://api.openai.com/v1"), "max_completion_tokens")
    assert.strictEqual(OpenAiUpstream.defaultMaxTokensField("http://127.0.0.1:8000/v1"), "max_tokens")
    assert.strictEqual(OpenAiUpstream.defaultMaxTokensField("https://openrouter.ai/api/v1"), "max_tokens")
  })

  it("streams with include_usage", () => {
    const out = request(base([{ role: "user", content: "hi" }], { stream: true }), { stream: true })
    assert.strictEqual(out.stream, true)
    assert.deepStrictEqual(out.stream_options, { include_usage: true })
  })

  it("translates base64 and url images", () => {
    const out = request(base([{
      role: "user",
      content: [
        { type: "text", text: "what is this" },
        { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "AAAA" } },
        { type: "image", source: { type: "url", url: "https://example.com/cat.png" } }
      ]
    }]))
    assert.deepStrictEqual(out.messages, [{
      role: "user",
      content: [
        { type: "text", text: "what is this" },
        { type: "image_url", image_url: { url: "data:image/jpeg;base64,AAAA" } },
        { type: "image_url", image_url: { url: "https://example.com/cat.png" } }
      ]
    }])
  })

  it("translates documents when supported and refuses them otherwise", () => {
    const body = base([{
      role: "user",
      content: [
        {
          type: "document",
          title: "report.pdf",
          source: { type: "base64", media_type: "application/pdf", data: "JVBE" }
        },
        { type: "document", source: { type: "text", media_type: "text/plain", data: "plain words" } }
      ]
    }])
    assert.deepStrictEqual(request(body, { supportsDocuments: true }).messages, [{
      role: "user",
      content: [
        { type: "file", file: { filename: "report.pdf", file_data: "data:application/pdf;base64,JVBE" } },
        { type: "text", text: "plain words" }
      ]
    }])
    const error = requestError(body)
    assert.strictEqual(error.kind, "unsupported")
    assert.include(error.message, "does not accept document blocks")
  })

  it("translates custom tools and refuses server tools", () => {
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
    const out = request(base([{ role: "user", content: "weather?" }], {
      tools: [{ name: "get_weather", description: "Weather by city", input_schema: schema, strict: true }]
    }))
    assert.deepStrictEqual(out.tools, [{
      type: "function",
      function: { name: "get_weather", description: "Weather by city", parameters: schema, strict: true }
    }])
    assert.isUndefined(out.tool_choice)
    const error = requestError(base([{ role: "user", content: "x" }], {
      tools: [{ type: "web_search_20250305", name: "web_search" }]
    }))
    assert.strictEqual(error.kind, "unsupported")
  })

  it("maps every tool_choice and disable_parallel_tool_use", () => {
    const tools = [{ name: "f", input_schema: { type: "object" } }]
    const choice = (tool_choice: Json) => request(base([{ role: "user", content: "x" }], { tools, tool_choice }))
    assert.strictEqual(choice({ type: "auto" }).tool_choice, "auto")
    assert.strictEqual(choice({ type: "any" }).tool_choice, "required")
    assert.strictEqual(choice({ type: "none" }).tool_choice, "none")
    assert.deepStrictEqual(choice({ type: "tool", name: "f" }).tool_choice, {
      type: "function",
      function: { name: "f" }
    })
    assert.isUndefined(choice({ type: "auto" }).parallel_tool_calls)
    assert.strictEqual(choice({ type: "auto", disable_parallel_tool_use: true }).parallel_tool_calls, false)
    const noTools = request(base([{ role: "user", content: "x" }], {
      tool_choice: { type: "auto", disable_parallel_tool_use: true }
    }))
    assert.isUndefined(noTools.parallel_tool_calls)
    assert.isUndefined(noTools.tool_choice)
  })

  it("keeps tool ids across a tool_use / tool_result turn, tool messages first", () => {
    const out = request(base([
      { role: "user", content: "weather in Paris and Rome?" },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "hmm", signature: "sig" },
          { type: "redacted_thinking", data: "xxx" },
          { type: "text", text: "Checking." },
          { type: "tool_use", id: "toolu_01ABC", name: "get_weather", input: { city: "Paris" } },
          { type: "tool_use", id: "call_xyz-2", name: "get_weather", input: { city: "Rome" } }
        ]
      },
      {
        role: "user",
        content: [
          { type: "text", text: "thanks" },
          { type: "tool_result", tool_use_id: "toolu_01ABC", content: "sunny" },
          {
            type: "tool_result",
            tool_use_id: "call_xyz-2",
            is_error: true,
            content: [{ type: "text", text: "timeout" }, {
              type: "image",
              source: { type: "base64", media_type: "image/png", data: "PNG" }
            }]
          }
        ]
      }
    ]))
    assert.deepStrictEqual(out.messages, [
      { role: "user", content: "weather in Paris and Rome?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [
          { id: "toolu_01ABC", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } },
          { id: "call_xyz-2", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Rome\"}" } }
        ]
      },
      { role: "tool", tool_call_id: "toolu_01ABC", content: "sunny" },
      { role: "tool", tool_call_id: "call_xyz-2", content: "Error: timeout" },
      {
        role: "user",
        content: [
          { type: "text", text: "Images returned by tool call call_xyz-2:" },
          { type: "image_url", image_url: { url: "data:image/png;base64,PNG" } },
          { type: "text", text: "thanks" }
        ]
      }
    ])
  })

  it("sends an assistant turn with only tool calls with null content", () => {
    const out = request(base([
      { role: "user", content: "x" },
      { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "f", input: {} }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "ok" }] }
    ]))
    assert.deepStrictEqual((out.messages as Array<Json>)[1], {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "t1", type: "function", function: { name: "f", arguments: "{}" } }]
    })
    assert.deepStrictEqual((out.messages as Array<Json>)[2], { role: "tool", tool_call_id: "t1", content: "ok" })
    assert.strictEqual((out.messages as Array<Json>).length, 3)
  })

  it("hands an assistant turn's thinking back as reasoning_content to a provider that requires it", () => {
    const conversation = base([
      { role: "user", content: "weather in Paris?" },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "The user wants ", signature: "" },
          { type: "thinking", thinking: "the weather.", signature: "" },
          { type: "redacted_thinking", data: "xxx" },
          { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } }
        ]
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "call_1", content: "sunny" }] },
      {
        role: "assistant",
        content: [{ type: "tool_use", id: "call_2", name: "get_weather", input: { city: "Rome" } }]
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "call_2", content: "rain" }] },
      { role: "assistant", content: "Sunny in Paris, rain in Rome." },
      { role: "user", content: "thanks" }
    ])
    const assistants = (out: Json) => (out.messages as Array<Json>).filter((m) => m.role === "assistant")
    const kept = assistants(request(conversation, { reasoningContent: true }))
    assert.strictEqual(kept[0]!.reasoning_content, "The user wants the weather.")
    // a tool turn without thinking gets an empty one (DeepSeek refuses a tool turn without the field); a plain answer
    // without thinking gets none
    assert.strictEqual(kept[1]!.reasoning_content, "")
    assert.notProperty(kept[2]!, "reasoning_content")
    for (const message of assistants(request(conversation))) assert.notProperty(message, "reasoning_content")
  })

  it("maps thinking and effort only when the upstream supports reasoning", () => {
    const thinking = (budget_tokens: number) =>
      base([{ role: "user", content: "x" }], { thinking: { type: "enabled", budget_tokens } })
    assert.isUndefined(request(thinking(10000)).reasoning_effort)
    assert.isUndefined(request(thinking(10000)).thinking)
    assert.strictEqual(request(thinking(1024), { supportsReasoning: true }).reasoning_effort, "low")
    assert.strictEqual(request(thinking(2048), { supportsReasoning: true }).reasoning_effort, "low")
    assert.strictEqual(request(thinking(8192), { supportsReasoning: true }).reasoning_effort, "medium")
    assert.strictEqual(request(thinking(16000), { supportsReasoning: true }).reasoning_effort, "high")
    const effort = base([{ role: "user", content: "x" }], { output_config: { effort: "low" } })
    assert.strictEqual(request(effort, { supportsReasoning: true }).reasoning_effort, "low")
    assert.isUndefined(request(effort).reasoning_effort)
  })

  it("maps a json_schema output format to response_format", () => {
    const schema = { type: "object", properties: { a: { type: "number" } } }
    const out = request(base([{ role: "user", content: "x" }], {
      output_config: { format: { type: "json_schema", schema } }
    }))
    assert.deepStrictEqual(out.response_format, {
      type: "json_schema",
      json_schema: { name: "output", schema, strict: true }
    })
  })
})

describe("fromChatCompletion", () => {
  const completion = (message: Json, finish_reason: string, usage: Json = {}): Json => ({
    id: "chatcmpl-9",
    object: "chat.completion",
    choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason }],
    usage: { prompt_tokens: 10, completion_tokens: 5, ...usage }
  })
  const translate = (json: Json): Wire.Message => {
    const result = OpenAiTranslate.fromChatCompletion(json, "claude-gw")
    if (Either.isLeft(result)) throw new Error(result.left.message)
    return result.right
  }

  it("translates reasoning, text and tool calls", () => {
    const message = translate(completion({
      content: "Let me look.",
      reasoning_content: "need weather",
      tool_calls: [
        { id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } },
        { id: "call_2", type: "function", function: { name: "broken", arguments: "{\"city\":" } }
      ]
    }, "tool_calls"))
    assert.deepStrictEqual(message, {
      id: "msg_chatcmpl-9",
      type: "message",
      role: "assistant",
      model: "claude-gw",
      content: [
        { type: "thinking", thinking: "need weather", signature: "" },
        { type: "text", text: "Let me look.", citations: null },
        { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } },
        { type: "tool_use", id: "call_2", name: "broken", input: { _raw: "{\"city\":" } }
      ],
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
    })
  })

  it("maps finish reasons", () => {
    const reason = (finish: string) => translate(completion({ content: "x" }, finish)).stop_reason
    assert.strictEqual(reason("stop"), "end_turn")
    assert.strictEqual(reason("length"), "max_tokens")
    assert.strictEqual(reason("tool_calls"), "tool_use")
    assert.strictEqual(reason("function_call"), "tool_use")
    assert.strictEqual(reason("content_filter"), "refusal")
  })

  it("never counts cached tokens twice", () => {
    const openai = translate(completion({ content: "x" }, "stop", {
      prompt_tokens: 1000,
      prompt_tokens_details: { cached_tokens: 800 }
    }))
    assert.deepStrictEqual(openai.usage, {
      input_tokens: 200,
      output_tokens: 5,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 800
    })
    const deepseek = translate(completion({ content: "x" }, "stop", {
      prompt_tokens: 1000,
      prompt_cache_hit_tokens: 600,
      prompt_cache_miss_tokens: 400
    }))
    assert.strictEqual(deepseek.usage.input_tokens, 400)
    assert.strictEqual(deepseek.usage.cache_read_input_tokens, 600)
    const openrouter = OpenAiTranslate.usageFromOpenAi({
      prompt_tokens: 1000,
      completion_tokens: 7,
      prompt_tokens_details: { cached_tokens: 300, cache_write_tokens: 500 }
    })
    assert.deepStrictEqual(openrouter, {
      input_tokens: 200,
      output_tokens: 7,
      cache_creation_input_tokens: 500,
      cache_read_input_tokens: 300
    })
  })

  it("classifies error bodies and malformed answers", () => {
    const error = OpenAiTranslate.fromChatCompletion({ error: { code: 429, message: "slow down" } }, "m")
    assert.isTrue(Either.isLeft(error))
    if (Either.isLeft(error)) {
      assert.strictEqual(error.left.kind, "rate_limited")
      assert.strictEqual(error.left.message, "slow down")
    }
    const malformed = OpenAiTranslate.fromChatCompletion({ id: "x", object: "chat.completion" }, "m")
    assert.isTrue(Either.isLeft(malformed) && malformed.left.kind === "transport")
  })
})

describe("classifyErrorBody", () => {
  it("maps statuses to kinds with the upstream message", () => {
    const kind = (status: number, body: unknown = {}) => OpenAiTranslate.classifyErrorBody(status, body).kind
    assert.strictEqual(kind(429), "rate_limited")
    assert.strictEqual(kind(529), "overloaded")
    assert.strictEqual(kind(503, { error: { type: "overloaded_error", message: "Overloaded" } }), "overloaded")
    assert.strictEqual(kind(503), "server_error")
    assert.strictEqual(kind(500), "server_error")
    assert.strictEqual(kind(400), "invalid_request")
    assert.strictEqual(kind(413), "invalid_request")
    assert.strictEqual(kind(422), "invalid_request")
    assert.strictEqual(kind(401), "auth")
    assert.strictEqual(kind(403), "auth")
    assert.strictEqual(kind(404), "not_found")
    const error = OpenAiTranslate.classifyErrorBody(
      429,
      { error: { message: "Rate limit reached", type: "requests" } },
      1500
    )
    assert.strictEqual(error.message, "Rate limit reached")
    assert.strictEqual(error.status, 429)
    assert.strictEqual(error.retryAfterMs, 1500)
  })
})

describe("makeStreamTranslator", () => {
  it("for a caller that passes events on, text deltas unparsed: the same frames, byte for byte", () => {
    const chunks = [
      chunk({ role: "assistant", content: "" }),
      chunk({ reasoning_content: "mull" }),
      chunk({ content: "a \"quote\",\nline\u2028 é 😀 \\" }),
      chunk({ content: "more" }),
      finish("stop"),
      usageChunk({ prompt_tokens: 12, completion_tokens: 2 })
    ]
    const parsed = run(chunks, false)
    const passed = run(chunks, true)
    assert.deepStrictEqual(passed.map(Wire.sseFrame), parsed.map(Wire.sseFrame))
    const deltas = passed.filter((e) => e.type === "content_block_delta")
    // the text deltas carry no field but their type; the thinking delta is still an object
    assert.deepStrictEqual(deltas.map((e) => Object.keys(e)), [["type", "index", "delta"], ["type"], ["type"]])
  })

  it("streams text with message_start exactly once and first", async () => {
    const events = run([
      chunk({ role: "assistant", content: "" }),
      chunk({ content: "Hel" }),
      chunk({ content: "lo" }),
      finish("stop"),
      usageChunk({ prompt_tokens: 12, completion_tokens: 2 })
    ])
    assertValidOrder(events)
    assert.deepStrictEqual(events, [
      {
        type: "message_start",
        message: {
          id: "msg_chatcmpl-1",
          type: "message",
          role: "assistant",
          model: "claude-gw",
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
        }
      },
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hel" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "lo" } },
      { type: "content_block_stop", index: 0 },
      {
        type: "message_delta",
        delta: { stop_reason: "end_turn", stop_sequence: null },
        usage: { input_tokens: 12, output_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
      },
      { type: "message_stop" }
    ])
    const message = await sdkFinalMessage(events)
    assert.deepStrictEqual(message.content, [{ type: "text", text: "Hello" }])
    assert.strictEqual(message.stop_reason, "end_turn")
    assert.strictEqual(message.usage.output_tokens, 2)
    assert.strictEqual(message.usage.input_tokens, 12)
  })

  it("emits each event as soon as its chunk arrives", () => {
    const translator = OpenAiTranslate.makeStreamTranslator("claude-gw", "msg_fixed")
    assert.deepStrictEqual(translator.push(chunk({ role: "assistant" })), Either.right([]))
    const first = Either.getOrThrow(translator.push(chunk({ content: "a" })))
    assert.deepStrictEqual(first.map((e) => e.type), ["message_start", "content_block_start", "content_block_delta"])
    assert.strictEqual((first[0].message as Json).id, "msg_fixed")
    const second = Either.getOrThrow(translator.push(chunk({ content: "b" })))
    assert.deepStrictEqual(second.map((e) => e.type), ["content_block_delta"])
  })

  it("puts reasoning in a thinking block before the text", async () => {
    const events = run([
      chunk({ role: "assistant", content: null, reasoning_content: "Let me " }),
      chunk({ reasoning_content: "think." }),
      chunk({ reasoning: "OpenRouter style." }),
      chunk({ content: "Answer." }),
      finish("stop"),
      usageChunk({ prompt_tokens: 3, completion_tokens: 9 })
    ])
    assertValidOrder(events)
    const message = await sdkFinalMessage(events)
    assert.deepStrictEqual(message.content, [
      { type: "thinking", thinking: "Let me think.OpenRouter style.", signature: "" },
      { type: "text", text: "Answer." }
    ])
  })

  it("does not double the reasoning when a server sends reasoning and reasoning_content", () => {
    const events = run([chunk({ reasoning_content: "x", reasoning: "x" }), finish("stop")])
    const deltas = events.filter((e) => e.type === "content_block_delta")
    assert.deepStrictEqual(deltas.map((e) => e.delta), [{ type: "thinking_delta", thinking: "x" }])
  })

  it("routes parallel tool calls interleaved by index to the right blocks", async () => {
    const events = run([
      chunk({ role: "assistant", content: null }),
      chunk({
        tool_calls: [{ index: 0, id: "call_A", type: "function", function: { name: "get_weather", arguments: "" } }]
      }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: "{\"ci" } }] }),
      chunk({
        tool_calls: [{ index: 1, id: "call_B", type: "function", function: { name: "get_time", arguments: "{\"tz" } }]
      }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: "ty\": \"Pa" } }] }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: "\": \"Europe/" } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: "ris\"}" } }] }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: "Rome\"}" } }] }),
      finish("tool_calls"),
      usageChunk({ prompt_tokens: 50, completion_tokens: 20 })
    ])
    assertValidOrder(events)
    for (const event of events) {
      if (event.type === "content_block_delta") assert.notStrictEqual((event.delta as Json).partial_json, "")
    }
    const message = await sdkFinalMessage(events)
    assert.deepStrictEqual(message.content, [
      { type: "tool_use", id: "call_A", name: "get_weather", input: { city: "Paris" } },
      { type: "tool_use", id: "call_B", name: "get_time", input: { tz: "Europe/Rome" } }
    ])
    assert.strictEqual(message.stop_reason, "tool_use")
  })

  it("streams sequential tool calls split over many chunks without waiting", async () => {
    const args = "{\"query\": \"effect typescript streams\", \"limit\": 10}"
    const chunks: Array<Json> = [chunk({ role: "assistant", content: "Searching." })]
    for (const [index, id] of [[0, "call_1"], [1, "call_2"]] as const) {
      chunks.push(chunk({ tool_calls: [{ index, id, type: "function", function: { name: "search", arguments: "" } }] }))
      for (let i = 0; i < args.length; i += 3) {
        chunks.push(chunk({ tool_calls: [{ index, function: { arguments: args.slice(i, i + 3) } }] }))
      }
    }
    const translator = OpenAiTranslate.makeStreamTranslator("claude-gw")
    const events: Array<Wire.StreamEvent> = []
    for (const c of chunks) {
      const out = Either.getOrThrow(translator.push(c))
      const fragment = ((c.choices as Array<Json>)[0].delta as Json).tool_calls as Array<Json> | undefined
      const text = fragment && ((fragment[0].function as Json).arguments as string)
      if (text) assert.isTrue(out.some((e) => (e.delta as Json | undefined)?.partial_json === text))
      events.push(...out)
    }
    events.push(...Either.getOrThrow(translator.push(finish("tool_calls"))))
    events.push(...Either.getOrThrow(translator.end()))
    assertValidOrder(events)
    const message = await sdkFinalMessage(events)
    assert.deepStrictEqual(message.content, [
      { type: "text", text: "Searching." },
      { type: "tool_use", id: "call_1", name: "search", input: { query: "effect typescript streams", limit: 10 } },
      { type: "tool_use", id: "call_2", name: "search", input: { query: "effect typescript streams", limit: 10 } }
    ])
  })

  it("produces no block for tool_calls: []", () => {
    const events = run([
      chunk({ role: "assistant", content: "", tool_calls: [] }),
      chunk({ content: "hi", tool_calls: [] }),
      chunk({ tool_calls: [] }),
      finish("stop")
    ])
    assertValidOrder(events)
    assert.deepStrictEqual(
      events.filter((e) => e.type === "content_block_start").map((e) => e.content_block),
      [{ type: "text", text: "" }]
    )
    assert.strictEqual((events.at(-2)!.delta as Json).stop_reason, "end_turn")
  })

  it("sends a whole tool call given in one chunk, with an id it keeps", () => {
    const events = run([
      chunk({
        tool_calls: [{ index: 0, id: "toolu_keep", type: "function", function: { name: "f", arguments: "{\"a\":1}" } }]
      }),
      finish("stop")
    ])
    assertValidOrder(events)
    assert.deepStrictEqual(events[1].content_block, { type: "tool_use", id: "toolu_keep", name: "f", input: {} })
    assert.deepStrictEqual(events[2].delta, { type: "input_json_delta", partial_json: "{\"a\":1}" })
    assert.strictEqual((events.at(-2)!.delta as Json).stop_reason, "tool_use")
  })

  it("separates whole calls that a server sends all at index 0 or without an index", () => {
    const call = (id: string, args: string, index?: number) =>
      chunk({
        tool_calls: [{ ...(index === undefined ? {} : { index }), id, function: { name: "f", arguments: args } }]
      })
    for (const index of [0, undefined]) {
      const events = run([call("c1", "{\"n\":1}", index), call("c2", "{\"n\":2}", index), finish("tool_calls")])
      assertValidOrder(events)
      const starts = events.filter((e) => e.type === "content_block_start").map((e) => (e.content_block as Json).id)
      assert.deepStrictEqual(starts, ["c1", "c2"])
      const deltas = events.filter((e) => e.type === "content_block_delta").map((e) => [e.index, e.delta])
      assert.deepStrictEqual(deltas, [[0, { type: "input_json_delta", partial_json: "{\"n\":1}" }], [1, {
        type: "input_json_delta",
        partial_json: "{\"n\":2}"
      }]])
    }
  })

  it("maps finish reasons", () => {
    const reason = (finish_reason: string) => {
      const events = run([chunk({ content: "x" }), finish(finish_reason)])
      return (events.at(-2)!.delta as Json).stop_reason
    }
    assert.strictEqual(reason("stop"), "end_turn")
    assert.strictEqual(reason("length"), "max_tokens")
    assert.strictEqual(reason("tool_calls"), "tool_use")
    assert.strictEqual(reason("content_filter"), "refusal")
  })

  it("reports usage with cached tokens not double counted, usage after the finish chunk", () => {
    const events = run([
      chunk({ content: "x" }),
      finish("stop"),
      usageChunk({ prompt_tokens: 1000, completion_tokens: 4, prompt_tokens_details: { cached_tokens: 900 } })
    ])
    assert.deepStrictEqual(events.at(-2)!.usage, {
      input_tokens: 100,
      output_tokens: 4,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 900
    })
  })

  it("reports usage sent before the finish chunk, and in message_start when known", () => {
    const events = run([
      usageChunk({ prompt_tokens: 30, completion_tokens: 0, prompt_tokens_details: { cached_tokens: 10 } }),
      chunk({ content: "x" }),
      usageChunk({ prompt_tokens: 30, completion_tokens: 6, prompt_tokens_details: { cached_tokens: 10 } }),
      finish("length")
    ])
    assertValidOrder(events)
    const start = events[0].message as Json
    assert.deepStrictEqual(start.usage, {
      input_tokens: 20,
      output_tokens: 0,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 10
    })
    assert.deepStrictEqual(events.at(-2), {
      type: "message_delta",
      delta: { stop_reason: "max_tokens", stop_sequence: null },
      usage: { input_tokens: 20, output_tokens: 6, cache_creation_input_tokens: 0, cache_read_input_tokens: 10 }
    })
  })

  it("always gives message_delta a usage.output_tokens, even without a usage chunk", async () => {
    const events = run([chunk({ content: "x" }), finish("stop")])
    assert.strictEqual((events.at(-2)!.usage as Json).output_tokens, 0)
    const message = await sdkFinalMessage(events)
    assert.strictEqual(message.usage.output_tokens, 0)
  })

  it("fails a stream cut short before finish_reason", () => {
    const translator = OpenAiTranslate.makeStreamTranslator("claude-gw")
    Either.getOrThrow(translator.push(chunk({ content: "partial" })))
    const result = translator.end()
    assert.isTrue(Either.isLeft(result))
    if (Either.isLeft(result)) {
      assert.strictEqual(result.left.kind, "transport")
      assert.include(result.left.message, "without finish_reason")
    }
  })

  it("surfaces an in-band error chunk", () => {
    const translator = OpenAiTranslate.makeStreamTranslator("claude-gw")
    Either.getOrThrow(translator.push(chunk({ content: "partial" })))
    const result = translator.push({
      id: "chatcmpl-1",
      error: { code: 502, message: "provider went away" },
      choices: [{ index: 0, delta: {}, finish_reason: "error" }]
    })
    assert.isTrue(Either.isLeft(result))
    if (Either.isLeft(result)) {
      assert.strictEqual(result.left.kind, "server_error")
      assert.strictEqual(result.left.message, "provider went away")
    }
  })

  it("ends an empty answer with a valid message", async () => {
    const events = run([chunk({ role: "assistant", content: "" }), finish("stop")])
    assert.deepStrictEqual(events.map((e) => e.type), ["message_start", "message_delta", "message_stop"])
    const message = await sdkFinalMessage(events)
    assert.deepStrictEqual(message.content, [])
  })
})
