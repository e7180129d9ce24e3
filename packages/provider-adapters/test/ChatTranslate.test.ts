import { assert, describe, it } from "@effect/vitest"
import { ChunkTemplate, ToldUsage } from "@model-gateway/core"
import type { Upstream, Wire } from "@model-gateway/core"
import { Either } from "effect"
import OpenAI from "openai"
import * as ChatTranslate from "../src/anthropic/ChatTranslate.js"

type Json = Wire.JsonObject

const defaults: ChatTranslate.MessagesRequestOptions = {
  upstreamModel: "claude-up",
  stream: false,
  defaultMaxTokens: 4096
}

const request = (chat: Json, options: Partial<ChatTranslate.MessagesRequestOptions> = {}): Json => {
  const result = ChatTranslate.toMessagesRequest(chat, { ...defaults, ...options })
  if (Either.isLeft(result)) throw new Error(`unexpected failure: ${result.left.message}`)
  return result.right
}

const requestError = (chat: Json): Upstream.UpstreamError => {
  const result = ChatTranslate.toMessagesRequest(chat, defaults)
  if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
  return result.left
}

const assertError = (chat: Json, kind: Upstream.UpstreamFailure, ...fragments: Array<string>): void => {
  const error = requestError(chat)
  assert.strictEqual(error.kind, kind, error.message)
  for (const fragment of fragments) assert.include(error.message, fragment)
}

const chat = (messages: Array<Json>, extra: Json = {}): Json => ({ model: "gpt-gw", messages, ...extra })

const pick = (object: Json, ...keys: Array<string>): Json =>
  Object.fromEntries(keys.filter((key) => key in object).map((key) => [key, object[key]]))

const hi = [{ role: "user", content: "hi" }]

const tools = [{ type: "function", function: { name: "f", parameters: { type: "object" } } }]

describe("toMessagesRequest", () => {
  it("maps the model, stream and a lone user message, with the default max_tokens", () => {
    assert.deepStrictEqual(request(chat(hi)), {
      model: "claude-up",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4096,
      stream: false
    })
    assert.strictEqual(request(chat(hi, { stream: true }), { stream: true }).stream, true)
  })

  it("takes max_completion_tokens over max_tokens, treats null as absent and refuses a non-number", () => {
    assert.strictEqual(request(chat(hi, { max_tokens: 300 })).max_tokens, 300)
    assert.strictEqual(request(chat(hi, { max_tokens: 300, max_completion_tokens: 500 })).max_tokens, 500)
    assert.strictEqual(request(chat(hi, { max_tokens: 300, max_completion_tokens: null })).max_tokens, 300)
    assertError(chat(hi, { max_tokens: "300" }), "invalid_request", "max_tokens must be a number")
  })

  it("joins leading system and developer messages into system with blank lines", () => {
    const out = request(chat([
      { role: "system", content: "be brief" },
      { role: "developer", content: "use metric units" },
      { role: "user", content: "hi" }
    ]))
    assert.strictEqual(out.system, "be brief\n\nuse metric units")
    assert.deepStrictEqual(out.messages, [{ role: "user", content: "hi" }])
  })

  it("sends system text blocks when parts are given, keeping cache_control", () => {
    const out = request(chat([
      { role: "system", content: "intro" },
      {
        role: "system",
        content: [{ type: "text", text: "long prompt", cache_control: { type: "ephemeral" } }, {
          type: "text",
          text: ""
        }]
      },
      { role: "user", content: "hi" }
    ]))
    assert.deepStrictEqual(out.system, [
      { type: "text", text: "intro" },
      { type: "text", text: "long prompt", cache_control: { type: "ephemeral" } }
    ])
    assertError(
      chat([{ role: "system", content: [{ type: "image_url", image_url: { url: "https://x/y.png" } }] }, ...hi]),
      "unsupported",
      "system message content part of type image_url"
    )
  })

  it("appends a system message from later in the conversation to system, merging the turns around it", () => {
    const out = request(chat([
      { role: "system", content: "be brief" },
      { role: "user", content: "hi" },
      { role: "assistant", content: "hello" },
      { role: "user", content: "what time is it?" },
      { role: "developer", content: "The user's time zone is UTC." },
      { role: "user", content: "in Paris" }
    ]))
    assert.strictEqual(out.system, "be brief\n\nThe user's time zone is UTC.")
    assert.deepStrictEqual(out.messages, [
      { role: "user", content: "hi" },
      { role: "assistant", content: "hello" },
      { role: "user", content: [{ type: "text", text: "what time is it?" }, { type: "text", text: "in Paris" }] }
    ])
  })

  it("translates user text, data: and http images, and PDF files", () => {
    const out = request(chat([{
      role: "user",
      content: [
        { type: "text", text: "compare" },
        { type: "image_url", image_url: { url: "data:image/jpeg;base64,AAAA", detail: "high" } },
        { type: "image_url", image_url: { url: "https://example.com/cat.png" }, cache_control: { type: "ephemeral" } },
        { type: "file", file: { filename: "report.pdf", file_data: "data:application/pdf;base64,JVBE" } },
        { type: "file", file: { file_data: "data:application/pdf;base64,JVBF" } }
      ]
    }]))
    assert.deepStrictEqual(out.messages, [{
      role: "user",
      content: [
        { type: "text", text: "compare" },
        { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "AAAA" } },
        {
          type: "image",
          source: { type: "url", url: "https://example.com/cat.png" },
          cache_control: { type: "ephemeral" }
        },
        {
          type: "document",
          source: { type: "base64", media_type: "application/pdf", data: "JVBE" },
          title: "report.pdf"
        },
        { type: "document", source: { type: "base64", media_type: "application/pdf", data: "JVBF" } }
      ]
    }])
  })

  it("refuses audio input, unknown parts, uploaded files and non-PDF files, and malformed images", () => {
    const part = (content: Json) => chat([{ role: "user", content: [content] }])
    assertError(part({ type: "input_audio", input_audio: { data: "x", format: "wav" } }), "unsupported", "input_audio")
    assertError(part({ type: "video_url", video_url: { url: "x" } }), "unsupported", "part of type video_url")
    assertError(part({ type: "file", file: { file_id: "file-1" } }), "unsupported", "file_id")
    assertError(
      part({ type: "file", file: { file_data: "data:text/plain;base64,aGk=" } }),
      "unsupported",
      "text/plain",
      "application/pdf"
    )
    assertError(part({ type: "image_url", image_url: { url: "ftp://x/y.png" } }), "invalid_request", "http(s)")
    assertError(part({ type: "image_url", image_url: { url: "data:image/png,raw" } }), "invalid_request", "base64")
    assertError(part({ type: "image_url", image_url: {} }), "invalid_request", "without a url")
    assertError(chat([{ role: "user", content: 42 }]), "invalid_request", "user message content")
    assertError(chat([{ role: "user" }]), "invalid_request", "a user message must have content")
    assertError(chat([...hi, { role: "user", content: null }]), "invalid_request", "a user message must have content")
  })

  it("translates assistant text, refusal parts and tool calls with their ids, content null allowed", () => {
    const out = request(chat([
      { role: "user", content: "weather in Paris and Rome?" },
      {
        role: "assistant",
        content: [{ type: "text", text: "Checking. " }, { type: "refusal", refusal: "Not Rome." }],
        tool_calls: [
          { id: "toolu_01A", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }
        ]
      },
      { role: "tool", tool_call_id: "toolu_01A", content: "sunny" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_2", type: "function", function: { name: "get_time", arguments: "" } }]
      }
    ]))
    assert.deepStrictEqual(out.messages, [
      { role: "user", content: "weather in Paris and Rome?" },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Checking. " },
          { type: "text", text: "Not Rome." },
          { type: "tool_use", id: "toolu_01A", name: "get_weather", input: { city: "Paris" } }
        ]
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_01A", content: "sunny" }] },
      { role: "assistant", content: [{ type: "tool_use", id: "call_2", name: "get_time", input: {} }] }
    ])
  })

  it("refuses tool call arguments that are not a JSON object, naming the call", () => {
    const call = (args: unknown) =>
      chat([...hi, {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_bad", type: "function", function: { name: "f", arguments: args } }]
      }])
    assertError(call("{\"city\":"), "invalid_request", "call_bad", "not valid JSON")
    assertError(call("[1, 2]"), "invalid_request", "call_bad", "not a JSON object")
    assertError(call(7), "invalid_request", "call_bad")
    assertError(
      chat([...hi, { role: "assistant", tool_calls: [{ type: "function", function: { name: "f" } }] }]),
      "invalid_request",
      "without an id"
    )
    assertError(
      chat([...hi, { role: "assistant", tool_calls: [{ id: "c1", type: "custom", custom: { name: "f" } }] }]),
      "unsupported",
      "c1"
    )
  })

  it("puts consecutive tool results in one user turn, the next user message after them", () => {
    const out = request(chat([
      { role: "user", content: "weather in Paris and Rome?" },
      {
        role: "assistant",
        content: "",
        tool_calls: [
          { id: "call_A", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } },
          { id: "call_B", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Rome\"}" } }
        ]
      },
      { role: "tool", tool_call_id: "call_A", content: "sunny" },
      { role: "tool", tool_call_id: "call_B", content: [{ type: "text", text: "rain" }] },
      { role: "tool", tool_call_id: "call_C", content: "" },
      { role: "user", content: [{ type: "text", text: "and tomorrow?" }] }
    ]))
    assert.deepStrictEqual((out.messages as Array<Json>)[2], {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "call_A", content: "sunny" },
        { type: "tool_result", tool_use_id: "call_B", content: [{ type: "text", text: "rain" }] },
        { type: "tool_result", tool_use_id: "call_C" },
        { type: "text", text: "and tomorrow?" }
      ]
    })
    assert.strictEqual((out.messages as Array<Json>).length, 3)
    assertError(chat([...hi, { role: "tool", content: "x" }]), "invalid_request", "tool_call_id")
    assertError(
      chat([...hi, { role: "tool", tool_call_id: "c", content: [{ type: "image_url", image_url: { url: "x" } }] }]),
      "unsupported",
      "tool message content part of type image_url"
    )
  })

  it("keeps the ids of a second tool turn", () => {
    const toolTurn = (id: string, city: string) => [
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id, type: "function", function: { name: "get_weather", arguments: JSON.stringify({ city }) } }]
      },
      { role: "tool", tool_call_id: id, content: `${city}: sunny` }
    ]
    const out = request(chat([
      ...hi,
      ...toolTurn("toolu_01XYZ", "Paris"),
      ...toolTurn("call_abc-2", "Rome")
    ]))
    const ids = (out.messages as Array<Json>).flatMap((m) =>
      Array.isArray(m.content) ? (m.content as Array<Json>).map((b) => b.id ?? b.tool_use_id) : []
    )
    assert.deepStrictEqual(ids, ["toolu_01XYZ", "toolu_01XYZ", "call_abc-2", "call_abc-2"])
    assert.deepStrictEqual((out.messages as Array<Json>).map((m) => m.role), [
      "user",
      "assistant",
      "user",
      "assistant",
      "user"
    ])
  })

  it("merges consecutive messages of the same role and leaves out empty ones", () => {
    const out = request(chat([
      { role: "user", content: "a" },
      { role: "user", content: [{ type: "text", text: "b" }] },
      { role: "assistant", content: "c" },
      { role: "assistant", content: null },
      { role: "assistant", content: "d", name: "bot" }
    ]))
    assert.deepStrictEqual(out.messages, [
      { role: "user", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] },
      { role: "assistant", content: [{ type: "text", text: "c" }, { type: "text", text: "d" }] }
    ])
  })

  it("refuses the legacy function role and function_call, and unknown roles", () => {
    assertError(chat([...hi, { role: "function", name: "f", content: "x" }]), "unsupported", "function role")
    assertError(
      chat([...hi, { role: "assistant", content: null, function_call: { name: "f", arguments: "{}" } }]),
      "unsupported",
      "function_call"
    )
    assertError(chat(hi, { functions: [{ name: "f" }] }), "unsupported", "functions")
    assertError(chat(hi, { function_call: "auto" }), "unsupported", "function_call")
    assertError(chat([{ role: "critic", content: "x" }]), "invalid_request", "unknown message role critic")
    assertError(chat([{ role: "system", content: "only a system prompt" }]), "invalid_request", "at least one")
    assertError({ model: "m", messages: "hi" }, "invalid_request", "messages must be an array")
  })

  it("translates function tools, defaulting the parameters and dropping strict", () => {
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
    const out = request(chat(hi, {
      tools: [
        {
          type: "function",
          function: { name: "get_weather", description: "Weather", parameters: schema, strict: true }
        },
        { type: "function", function: { name: "now" } }
      ]
    }))
    assert.deepStrictEqual(out.tools, [
      { name: "get_weather", description: "Weather", input_schema: schema },
      { name: "now", input_schema: { type: "object", properties: {} } }
    ])
    assert.notProperty(out, "tool_choice")
    assertError(chat(hi, { tools: [{ type: "custom", custom: { name: "grammar" } }] }), "unsupported", "custom")
    assertError(chat(hi, { tools: [{ type: "function", function: {} }] }), "invalid_request", "without a name")
    assertError(chat(hi, { tools: "f" }), "invalid_request", "tools must be an array")
  })

  it("maps every tool_choice, and parallel_tool_calls: false to disable_parallel_tool_use", () => {
    const choice = (extra: Json) => request(chat(hi, { tools, ...extra })).tool_choice
    assert.deepStrictEqual(choice({ tool_choice: "auto" }), { type: "auto" })
    assert.deepStrictEqual(choice({ tool_choice: "none" }), { type: "none" })
    assert.deepStrictEqual(choice({ tool_choice: "required" }), { type: "any" })
    assert.deepStrictEqual(choice({ tool_choice: { type: "function", function: { name: "f" } } }), {
      type: "tool",
      name: "f"
    })
    assert.deepStrictEqual(choice({ parallel_tool_calls: false }), { type: "auto", disable_parallel_tool_use: true })
    assert.deepStrictEqual(choice({ tool_choice: "required", parallel_tool_calls: false }), {
      type: "any",
      disable_parallel_tool_use: true
    })
    assert.deepStrictEqual(
      choice({ tool_choice: { type: "function", function: { name: "f" } }, parallel_tool_calls: false }),
      {
        type: "tool",
        name: "f",
        disable_parallel_tool_use: true
      }
    )
    assert.deepStrictEqual(choice({ tool_choice: "none", parallel_tool_calls: false }), { type: "none" })
    assert.isUndefined(choice({ parallel_tool_calls: true }))
    const noTools = request(chat(hi, { tool_choice: "required", parallel_tool_calls: false }))
    assert.notProperty(noTools, "tool_choice")
    assert.notProperty(noTools, "tools")
    assertError(
      chat(hi, { tools, tool_choice: { type: "allowed_tools", allowed_tools: {} } }),
      "unsupported",
      "tool_choice of type allowed_tools"
    )
    assertError(chat(hi, { tools, tool_choice: "sometimes" }), "invalid_request", "sometimes")
  })

  it("copies temperature, top_p and top_k, capping temperature at 1 and keeping only temperature of the two", () => {
    assert.deepStrictEqual(
      pick(request(chat(hi, { temperature: 0.3, top_k: 40 })), "temperature", "top_p", "top_k"),
      { temperature: 0.3, top_k: 40 }
    )
    assert.deepStrictEqual(pick(request(chat(hi, { top_p: 0.9 })), "temperature", "top_p"), { top_p: 0.9 })
    assert.deepStrictEqual(
      pick(request(chat(hi, { temperature: 1.6, top_p: 0.9 })), "temperature", "top_p"),
      { temperature: 1 }
    )
    assertError(chat(hi, { temperature: "hot" }), "invalid_request", "temperature")
  })

  it("maps stop to stop_sequences and user to metadata.user_id, dropping OpenAI's metadata", () => {
    assert.deepStrictEqual(request(chat(hi, { stop: "END" })).stop_sequences, ["END"])
    assert.deepStrictEqual(request(chat(hi, { stop: ["END", "", "STOP"] })).stop_sequences, ["END", "STOP"])
    assert.notProperty(request(chat(hi, { stop: [] })), "stop_sequences")
    assert.notProperty(request(chat(hi, { stop: null })), "stop_sequences")
    assertError(chat(hi, { stop: [1] }), "invalid_request", "stop")
    assert.deepStrictEqual(request(chat(hi, { user: "u-42", metadata: { team: "a" } })).metadata, { user_id: "u-42" })
    assert.deepStrictEqual(request(chat(hi, { safety_identifier: "s-1" })).metadata, { user_id: "s-1" })
    assert.notProperty(request(chat(hi, { metadata: { team: "a" } })), "metadata")
  })

  it("maps response_format: json_schema to output_config, json_object to a system instruction, text to nothing", () => {
    const schema = { type: "object", properties: { a: { type: "number" } }, additionalProperties: false }
    const structured = request(chat(hi, {
      response_format: { type: "json_schema", json_schema: { name: "out", schema, strict: true } }
    }))
    assert.deepStrictEqual(structured.output_config, { format: { type: "json_schema", schema } })
    const json = request(chat([{ role: "system", content: "be brief" }, ...hi], {
      response_format: { type: "json_object" }
    }))
    assert.strictEqual(json.system, `be brief\n\n${ChatTranslate.JSON_OBJECT_INSTRUCTION}`)
    assert.notProperty(json, "output_config")
    assert.strictEqual(
      request(chat(hi, { response_format: { type: "json_object" } })).system,
      ChatTranslate.JSON_OBJECT_INSTRUCTION
    )
    assert.deepStrictEqual(request(chat(hi, { response_format: { type: "text" } })), request(chat(hi)))
    assertError(
      chat(hi, { response_format: { type: "json_schema", json_schema: { name: "x" } } }),
      "invalid_request",
      "without a schema"
    )
    assertError(chat(hi, { response_format: { type: "grammar" } }), "unsupported", "response_format of type grammar")
  })

  it("turns reasoning_effort into a thinking budget, OpenRouter's share of max_tokens, and drops temperature", () => {
    const thinking = (effort: string, max_tokens = 20000) =>
      request(chat(hi, { reasoning_effort: effort, max_tokens })).thinking
    assert.deepStrictEqual(thinking("minimal"), { type: "enabled", budget_tokens: 2000 })
    assert.deepStrictEqual(thinking("low"), { type: "enabled", budget_tokens: 4000 })
    assert.deepStrictEqual(thinking("medium"), { type: "enabled", budget_tokens: 10000 })
    assert.deepStrictEqual(thinking("high"), { type: "enabled", budget_tokens: 16000 })
    assert.deepStrictEqual(thinking("xhigh"), { type: "enabled", budget_tokens: 19000 })
    assert.isUndefined(thinking("none"))
    // At most 32,000 tokens; at least Anthropic's minimum, 1,024.
    assert.deepStrictEqual(thinking("high", 64000), { type: "enabled", budget_tokens: 32000 })
    assert.deepStrictEqual(thinking("minimal", 4096), { type: "enabled", budget_tokens: 1024 })
    // A small cap still leaves room for the answer: "high" on 8,192 tokens thinks for 6,553 of them, not 8,191.
    assert.deepStrictEqual(thinking("high", 8192), { type: "enabled", budget_tokens: 6553 })
    const out = request(chat(hi, { reasoning_effort: "high", max_tokens: 64000, temperature: 0.2, top_k: 5 }))
    assert.notProperty(out, "temperature")
    assert.notProperty(out, "top_k")
    const none = request(chat(hi, { reasoning_effort: "none", temperature: 0.2 }))
    assert.strictEqual(none.temperature, 0.2)
    assertError(chat(hi, { reasoning_effort: "extreme" }), "invalid_request", "reasoning_effort")
  })

  it("turns OpenRouter's reasoning object into thinking, before reasoning_effort", () => {
    const thinking = (reasoning: Json, extra: Json = {}) =>
      request(chat(hi, { reasoning, max_tokens: 64000, ...extra })).thinking
    assert.deepStrictEqual(thinking({ max_tokens: 3000 }), { type: "enabled", budget_tokens: 3000 })
    assert.deepStrictEqual(thinking({ max_tokens: 200 }), { type: "enabled", budget_tokens: 1024 })
    assert.deepStrictEqual(thinking({ effort: "high" }), { type: "enabled", budget_tokens: 32000 })
    assert.deepStrictEqual(thinking({ max_tokens: 2000, effort: "high" }), { type: "enabled", budget_tokens: 2000 })
    assert.deepStrictEqual(thinking({ enabled: true }), { type: "enabled", budget_tokens: 32000 })
    assert.deepStrictEqual(thinking({ effort: "low" }, { reasoning_effort: "high" }), {
      type: "enabled",
      budget_tokens: 12800
    })
    assert.deepStrictEqual(thinking({ exclude: true }, { reasoning_effort: "high" }), {
      type: "enabled",
      budget_tokens: 32000
    })
    assert.isUndefined(thinking({ enabled: false, effort: "high" }, { reasoning_effort: "high" }))
    assert.isUndefined(thinking({ exclude: true }))
    assertError(chat(hi, { reasoning: { effort: "max" } }), "invalid_request", "reasoning.effort")
  })

  it("keeps the thinking budget below max_tokens, and thinks not at all when under 1024 tokens are left", () => {
    const out = (extra: Json) => request(chat(hi, extra))
    assert.deepStrictEqual(out({ reasoning_effort: "high", max_tokens: 8000 }).thinking, {
      type: "enabled",
      budget_tokens: 6400
    })
    assert.deepStrictEqual(out({ reasoning_effort: "high", max_completion_tokens: 2000, max_tokens: 64000 }).thinking, {
      type: "enabled",
      budget_tokens: 1600
    })
    assert.deepStrictEqual(out({ reasoning: { max_tokens: 10000 } }).thinking, { type: "enabled", budget_tokens: 4095 })
    const small = out({ reasoning_effort: "low", max_tokens: 1024, temperature: 0.5 })
    assert.notProperty(small, "thinking")
    assert.strictEqual(small.temperature, 0.5)
    assert.deepStrictEqual(out({ reasoning_effort: "low", max_tokens: 1025 }).thinking, {
      type: "enabled",
      budget_tokens: 1024
    })
  })

  it("leaves thinking off when tool_choice forces a tool, and keeps only a top_p of 0.95 or more with thinking", () => {
    const forced = request(chat(hi, { tools, tool_choice: "required", reasoning_effort: "high", max_tokens: 64000 }))
    assert.notProperty(forced, "thinking")
    const named = request(chat(hi, {
      tools,
      tool_choice: { type: "function", function: { name: "f" } },
      reasoning_effort: "low"
    }))
    assert.notProperty(named, "thinking")
    const auto = request(chat(hi, { tools, tool_choice: "auto", reasoning_effort: "low" }))
    assert.deepStrictEqual(auto.thinking, { type: "enabled", budget_tokens: 1024 })
    assert.strictEqual(request(chat(hi, { reasoning_effort: "low", top_p: 0.97 })).top_p, 0.97)
    assert.notProperty(request(chat(hi, { reasoning_effort: "low", top_p: 0.5 })), "top_p")
  })

  it("refuses n > 1, logprobs, audio output and the audio modality, naming the field", () => {
    assertError(chat(hi, { n: 2 }), "unsupported", "n > 1")
    assertError(chat(hi, { logprobs: true, top_logprobs: 3 }), "unsupported", "logprobs")
    assertError(chat(hi, { audio: { voice: "alloy", format: "mp3" } }), "unsupported", "audio")
    assertError(chat(hi, { modalities: ["text", "audio"] }), "unsupported", "audio modality")
    assert.strictEqual(
      requestError(chat(hi, { n: 3 })).message,
      "n > 1 (several choices) cannot be sent to an Anthropic upstream"
    )
    assert.deepStrictEqual(
      request(chat(hi, { n: 1, logprobs: false, modalities: ["text"], audio: null })),
      request(chat(hi))
    )
  })

  it("drops fields without an Anthropic equivalent silently", () => {
    const out = request(chat(hi, {
      seed: 7,
      frequency_penalty: 0.5,
      presence_penalty: 0.5,
      logit_bias: { "50256": -100 },
      top_logprobs: 2,
      service_tier: "auto",
      store: true,
      metadata: { k: "v" },
      prediction: { type: "content", content: "x" },
      stream_options: { include_usage: true },
      verbosity: "low",
      web_search_options: {},
      prompt_cache_key: "k",
      parallel_tool_calls: true
    }))
    assert.deepStrictEqual(out, request(chat(hi)))
  })
})

// ---------------------------------------------------------------------------------------------------
// answers

const created = 1_700_000_000

const message = (content: Array<Json>, extra: Partial<Wire.Message> = {}): Wire.Message => ({
  id: "msg_01",
  type: "message",
  role: "assistant",
  model: "claude-up",
  content,
  stop_reason: "end_turn",
  stop_sequence: null,
  usage: { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  ...extra
})

const completion = (msg: Wire.Message, options: Partial<ChatTranslate.ChatCompletionOptions> = {}): Json =>
  ChatTranslate.toChatCompletion(msg, { model: "gpt-gw", created, ...options })

const choiceOf = (json: Json): Json => (json.choices as Array<Json>)[0]!

const frame = { id: "chatcmpl-msg_01", object: "chat.completion.chunk", created, model: "gpt-gw" }

const chunk = (delta: Json, finish: string | null = null): Json => ({
  ...frame,
  choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }]
})

const roleChunk = chunk({ role: "assistant", content: "" })

const translator = (options: Partial<ChatTranslate.ChunkTranslatorOptions> = {}) =>
  ChatTranslate.makeChunkTranslator({ id: "chatcmpl-msg_01", model: "gpt-gw", created, includeUsage: true, ...options })

/** Every chunk of a whole stream, `end()` included. */
const run = (
  events: ReadonlyArray<Wire.StreamEvent>,
  options: Partial<ChatTranslate.ChunkTranslatorOptions> = {}
): Array<Json> => {
  const t = translator(options)
  const chunks = events.flatMap((event) => Either.getOrThrow(t.push(event)))
  return [...chunks, ...Either.getOrThrow(t.end())]
}

const pieces = (text: string, size: number): Array<string> => text.match(new RegExp(`[\\s\\S]{1,${size}}`, "g")) ?? []

/**
 * The events Anthropic streams for a message: input usage in `message_start`, each block started, streamed in
 * fragments of `size` characters (tool input after an empty `input_json_delta`, as Anthropic sends it) and stopped.
 */
const streamOf = (msg: Wire.Message, size = 4): Array<Wire.StreamEvent> => {
  const events: Array<Wire.StreamEvent> = [
    {
      type: "message_start",
      message: { ...msg, content: [], stop_reason: null, usage: { ...msg.usage, output_tokens: 1 } }
    },
    { type: "ping" }
  ]
  msg.content.forEach((block, index) => {
    const delta = (d: Json): Wire.StreamEvent => ({ type: "content_block_delta", index, delta: d })
    if (block.type === "text") {
      events.push({ type: "content_block_start", index, content_block: { type: "text", text: "" } })
      events.push(...pieces(block.text as string, size).map((text) => delta({ type: "text_delta", text })))
    } else if (block.type === "thinking") {
      events.push({
        type: "content_block_start",
        index,
        content_block: { type: "thinking", thinking: "", signature: "" }
      })
      events.push(
        ...pieces(block.thinking as string, size).map((thinking) => delta({ type: "thinking_delta", thinking }))
      )
      events.push(delta({ type: "signature_delta", signature: "EqQBCgIYAhIM" }))
    } else if (block.type === "tool_use") {
      events.push({ type: "content_block_start", index, content_block: { ...block, input: {} } })
      events.push(delta({ type: "input_json_delta", partial_json: "" }))
      const json = JSON.stringify(block.input)
      events.push(...pieces(json, size).map((partial_json) => delta({ type: "input_json_delta", partial_json })))
    } else {
      events.push({ type: "content_block_start", index, content_block: block })
    }
    events.push({ type: "content_block_stop", index })
  })
  events.push(
    {
      type: "message_delta",
      delta: { stop_reason: msg.stop_reason, stop_sequence: null },
      usage: { output_tokens: msg.usage.output_tokens }
    },
    { type: "message_stop" }
  )
  return events
}

describe("toChatCompletion", () => {
  it("translates a text answer", () => {
    const msg = message([{ type: "text", text: "Hello", citations: null }, { type: "text", text: " world" }])
    assert.deepStrictEqual(completion(msg), {
      id: "chatcmpl-msg_01",
      object: "chat.completion",
      created,
      model: "gpt-gw",
      choices: [{
        index: 0,
        message: { role: "assistant", content: "Hello world", refusal: null },
        finish_reason: "stop",
        logprobs: null
      }],
      usage: {
        prompt_tokens: 10,
        completion_tokens: 5,
        total_tokens: 15,
        prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }
      }
    })
  })

  it("translates tool_use blocks to tool_calls with their ids, and thinking to reasoning", () => {
    const msg = message([
      { type: "thinking", thinking: "Two cities, ", signature: "sig" },
      { type: "redacted_thinking", data: "xxx" },
      { type: "thinking", thinking: "two calls.", signature: "sig" },
      { type: "tool_use", id: "toolu_01A", name: "get_weather", input: { city: "Paris" } },
      { type: "server_tool_use", id: "srvtoolu_1", name: "web_search", input: { query: "x" } },
      { type: "web_search_tool_result", tool_use_id: "srvtoolu_1", content: [] },
      { type: "tool_use", id: "toolu_01B", name: "get_time", input: {} }
    ], { stop_reason: "tool_use" })
    assert.deepStrictEqual(choiceOf(completion(msg)), {
      index: 0,
      message: {
        role: "assistant",
        content: null,
        refusal: null,
        tool_calls: [
          { id: "toolu_01A", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } },
          { id: "toolu_01B", type: "function", function: { name: "get_time", arguments: "{}" } }
        ],
        reasoning: "Two cities, two calls.",
        reasoning_details: [
          { type: "reasoning.text", text: "Two cities, ", signature: "sig", format: "anthropic-claude-v1", index: 0 },
          { type: "reasoning.encrypted", data: "xxx", format: "anthropic-claude-v1", index: 1 },
          { type: "reasoning.text", text: "two calls.", signature: "sig", format: "anthropic-claude-v1", index: 2 }
        ]
      },
      finish_reason: "tool_calls",
      logprobs: null
    })
    assert.notProperty(choiceOf(completion(msg, { includeReasoning: false })).message, "reasoning")
    assert.notProperty(choiceOf(completion(msg, { includeReasoning: false })).message, "reasoning_details")
    assert.notProperty(choiceOf(completion(message([{ type: "text", text: "x" }]))).message, "reasoning")
  })

  it("maps every stop_reason to a finish_reason", () => {
    const finish = (stop_reason: string | null) =>
      choiceOf(completion(message([{ type: "text", text: "x" }], { stop_reason }))).finish_reason
    assert.strictEqual(finish("end_turn"), "stop")
    assert.strictEqual(finish("stop_sequence"), "stop")
    assert.strictEqual(finish("pause_turn"), "stop")
    assert.strictEqual(finish("max_tokens"), "length")
    assert.strictEqual(finish("model_context_window_exceeded"), "length")
    assert.strictEqual(finish("tool_use"), "tool_calls")
    assert.strictEqual(finish("refusal"), "content_filter")
    assert.strictEqual(finish("compaction"), "stop")
    assert.isNull(finish(null))
  })

  it("counts cached prompt tokens once: in prompt_tokens and again only as a detail", () => {
    const msg = message([{ type: "text", text: "x" }], {
      usage: { input_tokens: 200, output_tokens: 50, cache_read_input_tokens: 800, cache_creation_input_tokens: 100 }
    })
    assert.deepStrictEqual(completion(msg).usage, {
      prompt_tokens: 1100,
      completion_tokens: 50,
      total_tokens: 1150,
      prompt_tokens_details: { cached_tokens: 800, cache_write_tokens: 100 }
    })
    assert.deepStrictEqual(
      ChatTranslate.chatUsage({ input_tokens: 3, output_tokens: 4, cache_read_input_tokens: null }),
      {
        prompt_tokens: 3,
        completion_tokens: 4,
        total_tokens: 7,
        prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }
      }
    )
  })
})

describe("makeChunkTranslator", () => {
  it("streams text: the role chunk once and first, then content, the finish and the usage", () => {
    const chunks = run(streamOf(message([{ type: "text", text: "Hello there" }]), 5))
    assert.deepStrictEqual(chunks, [
      roleChunk,
      chunk({ content: "Hello" }),
      chunk({ content: " ther" }),
      chunk({ content: "e" }),
      chunk({}, "stop"),
      {
        ...frame,
        choices: [],
        usage: {
          prompt_tokens: 10,
          completion_tokens: 5,
          total_tokens: 15,
          prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }
        }
      }
    ])
    assert.strictEqual(chunks.filter((c) => (choiceOf(c)?.delta as Json | undefined)?.role !== undefined).length, 1)
    // The text chunks after the first are made from it (core's `ChunkTemplate`), so that they are written from its frame.
    const template = ChunkTemplate.templateOf(chunks[2])
    assert.isDefined(template)
    assert.strictEqual(template!.chunk, chunks[1])
    assert.strictEqual(ChunkTemplate.templateOf(chunks[3]), template)
    assert.isUndefined(ChunkTemplate.templateOf(chunks[1]))
  })

  it("carries, unseen, the usage told until then on the first chunk and the finish (core's `ToldUsage`)", () => {
    const usage = {
      input_tokens: 1234,
      output_tokens: 90,
      cache_read_input_tokens: 56,
      cache_creation_input_tokens: 78
    }
    const chunks = run(streamOf(message([{ type: "text", text: "Hello there" }], { usage }), 5))
    const told = (output: number) => ({
      prompt_tokens: 1368,
      completion_tokens: output,
      total_tokens: 1368 + output,
      prompt_tokens_details: { cached_tokens: 56, cache_write_tokens: 78 }
    })
    assert.deepStrictEqual(ToldUsage.toldOf(chunks[0]), told(1))
    assert.deepStrictEqual(ToldUsage.toldOf(chunks[4]), told(90))
    assert.deepStrictEqual(chunks.map((c) => ToldUsage.toldOf(c) !== undefined), [
      true,
      false,
      false,
      false,
      true,
      false
    ])
    assert.deepStrictEqual(JSON.parse(JSON.stringify(chunks[0])), roleChunk)
    assert.isUndefined(ToldUsage.toldOf({ ...chunks[0] }))
  })

  it("gives each event's chunks as the event arrives", () => {
    const t = translator()
    const events = streamOf(message([{ type: "text", text: "abcdef" }]), 3)
    const outs = events.map((event) => Either.getOrThrow(t.push(event)))
    assert.deepStrictEqual(outs.map((out) => out.length), [0, 0, 0, 2, 1, 0, 1, 1])
    assert.deepStrictEqual(outs[3], [roleChunk, chunk({ content: "abc" })])
    assert.deepStrictEqual(outs[4], [chunk({ content: "def" })])
    assert.deepStrictEqual(outs[6], [chunk({}, "stop")])
    assert.deepStrictEqual(Either.getOrThrow(t.end()), [])
  })

  it("streams thinking as reasoning and numbered reasoning_details, and nothing for citations, pings, block stops", () => {
    const events: Array<Wire.StreamEvent> = [
      { type: "message_start", message: message([], { usage: { input_tokens: 5, output_tokens: 1 } }) },
      { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "Let me " } },
      { type: "ping" },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "think." } },
      { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "EqQBCgIYAhIM" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
      {
        type: "content_block_delta",
        index: 1,
        delta: { type: "citations_delta", citation: { type: "char_location", cited_text: "x" } }
      },
      { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "" } },
      { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "Answer." } },
      { type: "content_block_stop", index: 1 },
      { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 9 } },
      { type: "message_stop" }
    ]
    const fragment = (text: string): Json => ({
      type: "reasoning.text",
      text,
      format: "anthropic-claude-v1",
      index: 0
    })
    assert.deepStrictEqual(run(events, { includeUsage: false }), [
      roleChunk,
      chunk({ reasoning: "Let me ", reasoning_details: [fragment("Let me ")] }),
      chunk({ reasoning: "think.", reasoning_details: [fragment("think.")] }),
      chunk({ reasoning_details: [{ ...fragment(""), signature: "EqQBCgIYAhIM" }] }),
      chunk({ content: "Answer." }),
      chunk({}, "stop")
    ])
    assert.deepStrictEqual(run(events, { includeUsage: false, includeReasoning: false }), [
      roleChunk,
      chunk({ content: "Answer." }),
      chunk({}, "stop")
    ])
  })

  it("numbers tool calls 0, 1, … whatever their block index, routing interleaved fragments to each", () => {
    const events: Array<Wire.StreamEvent> = [
      { type: "message_start", message: message([], { usage: { input_tokens: 50, output_tokens: 1 } }) },
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Checking both." } },
      { type: "content_block_stop", index: 0 },
      {
        type: "content_block_start",
        index: 1,
        content_block: { type: "tool_use", id: "toolu_A", name: "get_weather", input: {} }
      },
      { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: "" } },
      { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: "{\"city\": " } },
      {
        type: "content_block_start",
        index: 2,
        content_block: { type: "tool_use", id: "toolu_B", name: "get_time", input: {} }
      },
      { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: "" } },
      {
        type: "content_block_delta",
        index: 2,
        delta: { type: "input_json_delta", partial_json: "{\"tz\": \"Europe/" }
      },
      { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: "\"Paris\"}" } },
      { type: "content_block_stop", index: 1 },
      { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: "Rome\"}" } },
      { type: "content_block_stop", index: 2 },
      { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 30 } },
      { type: "message_stop" }
    ]
    assert.deepStrictEqual(run(events, { includeUsage: false }), [
      roleChunk,
      chunk({ content: "Checking both." }),
      chunk({
        tool_calls: [{ index: 0, id: "toolu_A", type: "function", function: { name: "get_weather", arguments: "" } }]
      }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: "{\"city\": " } }] }),
      chunk({
        tool_calls: [{ index: 1, id: "toolu_B", type: "function", function: { name: "get_time", arguments: "" } }]
      }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: "{\"tz\": \"Europe/" } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: "\"Paris\"}" } }] }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: "Rome\"}" } }] }),
      chunk({}, "tool_calls")
    ])
  })

  it("closes the arguments of a tool call whose input streamed empty with \"{}\", with or without deltas", () => {
    const start: Wire.StreamEvent = {
      type: "content_block_start",
      index: 0,
      content_block: { type: "tool_use", id: "t1", name: "now", input: {} }
    }
    const empty: Wire.StreamEvent = {
      type: "content_block_delta",
      index: 0,
      delta: { type: "input_json_delta", partial_json: "" }
    }
    const stop: Wire.StreamEvent = { type: "content_block_stop", index: 0 }
    const finish: Wire.StreamEvent = {
      type: "message_delta",
      delta: { stop_reason: "tool_use" },
      usage: { output_tokens: 3 }
    }
    // one empty fragment (as Anthropic streams a tool without input), none, and a block that never says it stopped
    for (const between of [[empty, stop], [stop], [empty]]) {
      const chunks = run([
        { type: "message_start", message: message([]) },
        start,
        ...between,
        finish,
        { type: "message_stop" }
      ], { includeUsage: false })
      assert.deepStrictEqual(chunks, [
        roleChunk,
        chunk({ tool_calls: [{ index: 0, id: "t1", type: "function", function: { name: "now", arguments: "" } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: "{}" } }] }),
        chunk({}, "tool_calls")
      ])
    }
  })

  it("closes only the empty one of parallel tool calls, each by its own index, id and type on its first only", () => {
    const tool = (index: number, id: string, name: string): Wire.StreamEvent => ({
      type: "content_block_start",
      index,
      content_block: { type: "tool_use", id, name, input: {} }
    })
    const json = (index: number, partial_json: string): Wire.StreamEvent => ({
      type: "content_block_delta",
      index,
      delta: { type: "input_json_delta", partial_json }
    })
    const stop = (index: number): Wire.StreamEvent => ({ type: "content_block_stop", index })
    const chunks = run([
      { type: "message_start", message: message([]) },
      tool(0, "toolu_A", "get_weather"),
      json(0, ""),
      json(0, "{\"city\":"),
      tool(1, "toolu_B", "now"),
      json(1, ""),
      tool(2, "toolu_C", "get_time"),
      json(2, "{\"tz\":\"UTC\"}"),
      stop(1),
      json(0, "\"Paris\"}"),
      stop(0),
      stop(2),
      { type: "message_delta", delta: { stop_reason: "tool_use" }, usage: { output_tokens: 9 } },
      { type: "message_stop" }
    ], { includeUsage: false })
    const first = (index: number, id: string, name: string) =>
      chunk({ tool_calls: [{ index, id, type: "function", function: { name, arguments: "" } }] })
    const more = (index: number, args: string) => chunk({ tool_calls: [{ index, function: { arguments: args } }] })
    assert.deepStrictEqual(chunks, [
      roleChunk,
      first(0, "toolu_A", "get_weather"),
      more(0, "{\"city\":"),
      first(1, "toolu_B", "now"),
      first(2, "toolu_C", "get_time"),
      more(2, "{\"tz\":\"UTC\"}"),
      more(1, "{}"),
      more(0, "\"Paris\"}"),
      chunk({}, "tool_calls")
    ])
  })

  it("sends the input a tool_use block starts with, when it is not empty", () => {
    const chunks = run([
      { type: "message_start", message: message([]) },
      {
        type: "content_block_start",
        index: 0,
        content_block: { type: "tool_use", id: "t1", name: "f", input: { a: 1 } }
      },
      { type: "content_block_stop", index: 0 },
      { type: "message_delta", delta: { stop_reason: "tool_use" }, usage: { output_tokens: 3 } },
      { type: "message_stop" }
    ], { includeUsage: false })
    assert.deepStrictEqual(
      chunks[1],
      chunk({
        tool_calls: [{ index: 0, id: "t1", type: "function", function: { name: "f", arguments: "{\"a\":1}" } }]
      })
    )
  })

  it("maps every stop_reason in the finish chunk", () => {
    const finish = (stop_reason: string) =>
      run(streamOf(message([{ type: "text", text: "x" }], { stop_reason })), { includeUsage: false }).at(-1)
    assert.deepStrictEqual(finish("end_turn"), chunk({}, "stop"))
    assert.deepStrictEqual(finish("stop_sequence"), chunk({}, "stop"))
    assert.deepStrictEqual(finish("pause_turn"), chunk({}, "stop"))
    assert.deepStrictEqual(finish("max_tokens"), chunk({}, "length"))
    assert.deepStrictEqual(finish("model_context_window_exceeded"), chunk({}, "length"))
    assert.deepStrictEqual(finish("tool_use"), chunk({}, "tool_calls"))
    assert.deepStrictEqual(finish("refusal"), chunk({}, "content_filter"))
  })

  it("reports usage from message_start and message_delta, cached tokens counted once, only when asked", () => {
    const msg = message([{ type: "text", text: "x" }], {
      usage: { input_tokens: 20, output_tokens: 70, cache_read_input_tokens: 1000, cache_creation_input_tokens: 300 }
    })
    const usage = {
      prompt_tokens: 1320,
      completion_tokens: 70,
      total_tokens: 1390,
      prompt_tokens_details: { cached_tokens: 1000, cache_write_tokens: 300 }
    }
    assert.deepStrictEqual(run(streamOf(msg)).at(-1), { ...frame, choices: [], usage })
    assert.deepStrictEqual(completion(msg).usage, usage)
    const repeated = streamOf(msg).map((event) =>
      event.type === "message_delta" ?
        {
          ...event,
          usage: {
            input_tokens: 20,
            output_tokens: 70,
            cache_read_input_tokens: 1000,
            cache_creation_input_tokens: null,
            server_tool_use: null
          }
        } :
        event
    )
    assert.deepStrictEqual(run(repeated).at(-1), { ...frame, choices: [], usage })
    const without = run(streamOf(msg), { includeUsage: false })
    assert.isFalse(without.some((c) => "usage" in c))
    assert.deepStrictEqual(without.at(-1), chunk({}, "stop"))
  })

  it("fails on an error event, classified as the Anthropic adapter classifies it", () => {
    const failure = (type: string | undefined) => {
      const t = translator()
      Either.getOrThrow(t.push({ type: "message_start", message: message([]) }))
      const result = t.push({ type: "error", error: { type, message: `${type} happened` } })
      if (Either.isRight(result)) throw new Error("expected a failure")
      return result.left
    }
    assert.strictEqual(failure("overloaded_error").kind, "overloaded")
    assert.strictEqual(failure("rate_limit_error").kind, "rate_limited")
    assert.strictEqual(failure("invalid_request_error").kind, "invalid_request")
    assert.strictEqual(failure("timeout_error").kind, "timeout")
    assert.strictEqual(failure("api_error").kind, "server_error")
    assert.strictEqual(failure("overloaded_error").message, "overloaded_error happened")
    assert.strictEqual(failure("overloaded_error").errorType, "overloaded_error")
    const t = translator()
    const bare = t.push({ type: "error" })
    assert.isTrue(
      Either.isLeft(bare) && bare.left.kind === "server_error" && bare.left.message === "upstream stream error"
    )
  })

  it("ends cleanly after message_stop only, ignoring what comes after it", () => {
    const t = translator()
    for (const event of streamOf(message([{ type: "text", text: "x" }]))) Either.getOrThrow(t.push(event))
    assert.deepStrictEqual(
      Either.getOrThrow(t.push({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "late" } })),
      []
    )
    assert.deepStrictEqual(t.end(), Either.right([]))
    const cut = translator()
    const events = streamOf(message([{ type: "text", text: "partial answer" }]))
    for (const event of events.slice(0, 5)) Either.getOrThrow(cut.push(event))
    const result = cut.end()
    assert.isTrue(Either.isLeft(result))
    if (Either.isLeft(result)) {
      assert.strictEqual(result.left.kind, "transport")
      assert.strictEqual(result.left.message, "upstream stream ended before message_stop")
    }
    const afterDelta = translator()
    for (const event of streamOf(message([{ type: "text", text: "x" }])).slice(0, -1)) afterDelta.push(event)
    assert.isTrue(Either.isLeft(afterDelta.end()))
  })

  it("fails as transport on a stream out of order", () => {
    const kindOf = (events: Array<Wire.StreamEvent>) => {
      const t = translator()
      const results = events.map((event) => t.push(event))
      const last = results.at(-1)!
      assert.isTrue(results.slice(0, -1).every(Either.isRight))
      return Either.isLeft(last) ? `${last.left.kind}: ${last.left.message}` : "ok"
    }
    const start: Wire.StreamEvent = { type: "message_start", message: message([]) }
    assert.strictEqual(kindOf([start, start]), "transport: upstream sent a second message_start")
    assert.strictEqual(
      kindOf([{ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }]),
      "transport: upstream sent content_block_start before message_start"
    )
    assert.strictEqual(
      kindOf([start, { type: "content_block_delta", index: 3, delta: { type: "text_delta", text: "x" } }]),
      "transport: upstream sent a delta for block 3, which never started"
    )
  })

  it("ends an empty answer with the role chunk and the finish", () => {
    assert.deepStrictEqual(run(streamOf(message([])), { includeUsage: false }), [roleChunk, chunk({}, "stop")])
  })
})

// ---------------------------------------------------------------------------------------------------
// the official OpenAI SDK reading the chunks

/** Frames chunks as the gateway will (`data: {json}` … `data: [DONE]`) and lets the OpenAI SDK accumulate them. */
const sdkFinalCompletion = async (chunks: ReadonlyArray<Json>): Promise<Json> => {
  const sse = chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n"
  const client = new OpenAI({
    apiKey: "test",
    baseURL: "http://gateway.invalid/v1",
    maxRetries: 0,
    fetch: async () => new Response(sse, { status: 200, headers: { "content-type": "text/event-stream" } })
  })
  const stream = client.chat.completions.stream({
    model: "gpt-gw",
    messages: [{ role: "user", content: "hi" }],
    stream_options: { include_usage: true }
  })
  return (await stream.finalChatCompletion()) as unknown as Json
}

/** The SDK's completion without what it adds itself (`parsed`) nor `reasoning`, which it does not accumulate. */
/** A completion less what a stream does not carry whole: the reasoning (in pieces), its signed details (not sent). */
const comparable = (json: Json): Json => {
  const choice = choiceOf(json)
  const { parsed: _parsed, reasoning: _reasoning, reasoning_details: _details, ...message } = choice.message as Json
  return { ...json, choices: [{ ...choice, message }] }
}

describe("with the openai SDK", () => {
  it("accumulates text, reasoning and cached usage into toChatCompletion's completion", async () => {
    const msg = message([
      { type: "thinking", thinking: "The user greets me; answer kindly.", signature: "sig" },
      { type: "text", text: "Hello! How can I help you today?" }
    ], {
      stop_reason: "max_tokens",
      usage: { input_tokens: 12, output_tokens: 40, cache_read_input_tokens: 2048, cache_creation_input_tokens: 64 }
    })
    const chunks = run(streamOf(msg, 5))
    const expected = completion(msg)
    const final = await sdkFinalCompletion(chunks)
    assert.deepStrictEqual(comparable(final), comparable(expected))
    assert.strictEqual(choiceOf(final).finish_reason, "length")
    assert.strictEqual((final.usage as Json).prompt_tokens, 2124)
    const reasoning = chunks.map((c) => (choiceOf(c)?.delta as Json | undefined)?.reasoning ?? "").join("")
    assert.strictEqual(reasoning, (choiceOf(expected).message as Json).reasoning)
  })

  it("accumulates parallel tool calls streamed interleaved into toChatCompletion's completion", async () => {
    const msg = message([
      { type: "text", text: "Checking both." },
      { type: "tool_use", id: "toolu_01A", name: "get_weather", input: { city: "Paris", unit: "celsius" } },
      { type: "tool_use", id: "toolu_01B", name: "get_time", input: { tz: "Europe/Rome" } }
    ], { stop_reason: "tool_use" })
    const sequential = streamOf(msg, 6)
    const firstToolStart = sequential.findIndex((e) => e.type === "content_block_start" && e.index === 1)
    const ofBlock = (index: number) => sequential.filter((e) => e.index === index && e.type === "content_block_delta")
    const interleaved: Array<Wire.StreamEvent> = [
      ...sequential.slice(0, firstToolStart),
      sequential[firstToolStart]!,
      sequential.find((e) => e.type === "content_block_start" && e.index === 2)!,
      ...ofBlock(1).flatMap((event, i) => [event, ...(ofBlock(2)[i] ? [ofBlock(2)[i]!] : [])]),
      ...ofBlock(2).slice(ofBlock(1).length),
      { type: "content_block_stop", index: 1 },
      { type: "content_block_stop", index: 2 },
      ...sequential.slice(-2)
    ]
    for (const events of [sequential, interleaved]) {
      const chunks = run(events)
      assert.isFalse(
        chunks.some((c) =>
          ((choiceOf(c)?.delta as Json | undefined)?.tool_calls as Array<Json> | undefined)?.some((call) =>
            (call.function as Json).arguments === "" && call.id === undefined
          )
        ),
        "an empty-arguments chunk"
      )
      const final = await sdkFinalCompletion(chunks)
      assert.deepStrictEqual(comparable(final), comparable(completion(msg)))
      const calls = (choiceOf(final).message as Json).tool_calls as Array<Json>
      assert.deepStrictEqual(calls.map((call) => [call.id, JSON.parse((call.function as Json).arguments as string)]), [
        ["toolu_01A", { city: "Paris", unit: "celsius" }],
        ["toolu_01B", { tz: "Europe/Rome" }]
      ])
      assert.strictEqual(choiceOf(final).finish_reason, "tool_calls")
    }
  })

  it("accumulates a tool call without input among parallel ones as toChatCompletion's \"{}\"", async () => {
    const msg = message([
      { type: "tool_use", id: "toolu_01A", name: "get_weather", input: { city: "Paris" } },
      { type: "tool_use", id: "toolu_01B", name: "now", input: {} },
      { type: "tool_use", id: "toolu_01C", name: "get_time", input: { tz: "UTC" } }
    ], { stop_reason: "tool_use" })
    // Anthropic streams no fragment but an empty one for a tool without input (`streamOf` would stream "{}")
    const events = streamOf(msg, 5).filter((e) =>
      !(e.index === 1 && e.type === "content_block_delta" && (e.delta as Json).partial_json !== "")
    )
    for (const withoutDelta of [false, true]) {
      const chunks = run(
        withoutDelta ? events.filter((e) => !(e.index === 1 && e.type === "content_block_delta")) : events
      )
      const final = await sdkFinalCompletion(chunks)
      assert.deepStrictEqual(comparable(final), comparable(completion(msg)))
      const calls = (choiceOf(final).message as Json).tool_calls as Array<Json>
      assert.deepStrictEqual(calls.map((call) => (call.function as Json).arguments), [
        "{\"city\":\"Paris\"}",
        "{}",
        "{\"tz\":\"UTC\"}"
      ])
    }
  })
})

describe("thinking in a chat tool loop over an Anthropic upstream", () => {
  const signed = [
    { type: "thinking", thinking: "look it up", signature: "sig-1" },
    { type: "redacted_thinking", data: "opaque" },
    { type: "tool_use", id: "toolu_1", name: "f", input: { q: 1 } }
  ]

  it("answers the signed thinking blocks as OpenRouter's reasoning_details, and takes them back first in the turn", () => {
    const answer = choiceOf(completion(message(signed, { stop_reason: "tool_use" }))).message as Json
    assert.strictEqual(answer.reasoning, "look it up")
    assert.deepStrictEqual(answer.reasoning_details, [
      { type: "reasoning.text", text: "look it up", signature: "sig-1", format: "anthropic-claude-v1", index: 0 },
      { type: "reasoning.encrypted", data: "opaque", format: "anthropic-claude-v1", index: 1 }
    ])
    // the client hands the assistant message back as it got it, then the tool's result
    const next = request(chat([...hi, answer, { role: "tool", tool_call_id: "toolu_1", content: "42" }], {
      tools,
      reasoning_effort: "low",
      max_tokens: 8000
    }))
    assert.deepStrictEqual((next.messages as Array<Json>)[1], {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "look it up", signature: "sig-1" },
        { type: "redacted_thinking", data: "opaque" },
        { type: "tool_use", id: "toolu_1", name: "f", input: { q: 1 } }
      ]
    })
    assert.deepStrictEqual(next.thinking, { type: "enabled", budget_tokens: 1600 })
  })

  it("streams the signed thinking in numbered fragments, which come back as the same blocks merged or not", () => {
    const blocks = [
      { type: "thinking", thinking: "First, the weather. ", signature: "EqQBCgIYAhIM" },
      { type: "redacted_thinking", data: "opaque" },
      { type: "thinking", thinking: "Then the time.", signature: "EqQBCgIYAhIM" },
      { type: "tool_use", id: "toolu_1", name: "f", input: { q: 1 } }
    ]
    const fragments = run(streamOf(message(blocks, { stop_reason: "tool_use" }), 5)).flatMap((c) =>
      ((choiceOf(c)?.delta as Json | undefined)?.reasoning_details ?? []) as Array<Json>
    )
    assert.deepStrictEqual(fragments.map((f) => f.index), [0, 0, 0, 0, 0, 1, 2, 2, 2, 2])
    // merged by number, as OpenRouter's clients do (texts joined, the signature kept)
    const byIndex = new Map<unknown, Json>()
    for (const f of fragments) {
      const into = byIndex.get(f.index)
      if (into === undefined) byIndex.set(f.index, { ...f })
      else Object.assign(into, { text: `${into.text}${f.text}` }, f.signature ? { signature: f.signature } : {})
    }
    const expected = [
      ...blocks.slice(0, 3),
      { type: "tool_use", id: "toolu_1", name: "f", input: { q: 1 } }
    ]
    for (const details of [[...byIndex.values()], fragments]) {
      const turn = {
        role: "assistant",
        content: null,
        reasoning_details: details,
        tool_calls: [{ id: "toolu_1", type: "function", function: { name: "f", arguments: "{\"q\":1}" } }]
      }
      const next = request(chat([...hi, turn, { role: "tool", tool_call_id: "toolu_1", content: "42" }], {
        tools,
        reasoning_effort: "low",
        max_tokens: 8000
      }))
      assert.deepStrictEqual((next.messages as Array<Json>)[1], { role: "assistant", content: expected })
      assert.deepStrictEqual(next.thinking, { type: "enabled", budget_tokens: 1600 })
    }
    // the openai SDK's finalChatCompletion() keeps only the last fragment: a signature without its text is left out
    // (Anthropic would refuse it), and the turn runs with thinking off
    const sdkKept = {
      role: "assistant",
      content: null,
      reasoning_details: [fragments.at(-1)],
      tool_calls: [{ id: "toolu_1", type: "function", function: { name: "f", arguments: "{\"q\":1}" } }]
    }
    const withLast = request(chat([...hi, sdkKept, { role: "tool", tool_call_id: "toolu_1", content: "42" }], {
      tools,
      reasoning_effort: "low",
      max_tokens: 8000
    }))
    assert.strictEqual(fragments.at(-1)!.text, "")
    assert.isUndefined(withLast.thinking)
    assert.strictEqual(((withLast.messages as Array<Json>)[1].content as Array<Json>)[0]!.type, "tool_use")
    // without reasoning asked for, neither the text nor the details are streamed
    const hidden = run(streamOf(message(blocks, { stop_reason: "tool_use" }), 5), { includeReasoning: false })
    assert.isFalse(hidden.some((c) => "reasoning_details" in ((choiceOf(c)?.delta ?? {}) as Json)))
  })

  it("leaves thinking off when the last tool turn came back without its thinking, which Anthropic would refuse", () => {
    const toolTurn = {
      role: "assistant",
      content: null,
      reasoning: "look it up",
      tool_calls: [{ id: "toolu_1", type: "function", function: { name: "f", arguments: "{\"q\":1}" } }]
    }
    const withoutDetails = chat([...hi, toolTurn, { role: "tool", tool_call_id: "toolu_1", content: "42" }], {
      tools,
      reasoning_effort: "low",
      max_tokens: 8000
    })
    assert.isUndefined(request(withoutDetails).thinking)
    // unsigned details (another provider's reasoning) are not thinking blocks Anthropic would take
    const unsigned = { ...toolTurn, reasoning_details: [{ type: "reasoning.text", text: "look it up" }] }
    const next = request(chat([...hi, unsigned, { role: "tool", tool_call_id: "toolu_1", content: "42" }], {
      tools,
      reasoning_effort: "low",
      max_tokens: 8000
    }))
    assert.isUndefined(next.thinking)
    assert.strictEqual(((next.messages as Array<Json>)[1].content as Array<Json>)[0]!.type, "tool_use")
    // a conversation whose last assistant turn used no tool keeps thinking on
    const plain = chat([...hi, { role: "assistant", content: "hello" }, ...hi], { reasoning_effort: "low" })
    assert.deepStrictEqual(request(plain).thinking, { type: "enabled", budget_tokens: 1024 })
  })
})
