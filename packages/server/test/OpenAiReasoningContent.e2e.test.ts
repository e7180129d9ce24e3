/**
 * A thinking model's tool loop over an OpenAI-compatible upstream, end to end as Claude Code runs it: the official
 * Anthropic SDK (streamed) → the real gateway → the fake OpenAI upstream answering with DeepSeek's
 * `reasoning_content`. The reasoning comes to the client as a thinking block; handed back with the assistant turn, it
 * goes upstream again as `reasoning_content` to a provider with `reasoningContent: true` (DeepSeek's and Moonshot's
 * default, whose thinking models refuse a tool turn without it), and not to one without.
 */
import Anthropic from "@anthropic-ai/sdk"
import { OpenAiUpstream } from "@model-gateway/provider-adapters"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeOpenAi } from "../../../packages/provider-adapters/test/fakes/index.js"
import { decode } from "../src/Config.js"
import type { RunningServer } from "../src/Gateway.js"
import { startServer } from "../src/Gateway.js"

const KEY = "mg-reasoning-content-key"
const pricing = { prompt: "0.000001", completion: "0.000002" }
const thinking = "The user wants the weather in Paris; call the tool."

let openai: FakeUpstream
let gateway: RunningServer
let client: Anthropic

beforeAll(async () => {
  openai = await startFakeOpenAi()
  const { config } = decode({
    storage: "memory:",
    providers: {
      plain: { kind: "openai", baseUrl: openai.url, apiKey: "sk-o" },
      deepseek: { kind: "openai", baseUrl: openai.url, apiKey: "sk-o", reasoningContent: true }
    },
    models: {
      "plain/thinker": { endpoints: [{ provider: "plain", upstreamModel: "thinker", pricing }] },
      "deepseek/reasoner": { endpoints: [{ provider: "deepseek", upstreamModel: "deepseek-reasoner", pricing }] }
    },
    keys: [{ key: KEY }]
  })
  gateway = await startServer(config, { host: "127.0.0.1", port: 0, requestLog: false })
  client = new Anthropic({ baseURL: gateway.url, apiKey: KEY, maxRetries: 0 })
})
afterAll(async () => {
  await gateway.close(1000)
  await openai.close()
})
beforeEach(() => {
  openai.reset()
  openai.setReply((body) =>
    body.messages.some((m: { role: string }) => m.role === "tool")
      ? { text: "Sunny in Paris." }
      : { thinking, toolCalls: [{ name: "get_weather", input: { city: "Paris" } }] }
  )
})

const tools = [{
  name: "get_weather",
  input_schema: { type: "object" as const, properties: { city: { type: "string" } } }
}]

/** A Claude Code-shaped loop: streamed, thinking on, the assistant's content handed back as it came. */
const loop = async (model: string) => {
  const messages: Array<Anthropic.MessageParam> = [{ role: "user", content: "weather in Paris?" }]
  const params = { model, max_tokens: 32000, thinking: { type: "enabled" as const, budget_tokens: 2048 }, tools }
  const first = await client.messages.stream({ ...params, messages }).finalMessage()
  expect(first.content[0]).toMatchObject({ type: "thinking", thinking })
  const call = first.content.find((block) => block.type === "tool_use")!
  messages.push({ role: "assistant", content: first.content }, {
    role: "user",
    content: [{ type: "tool_result", tool_use_id: call.id, content: "sunny, 21°C" }]
  })
  const second = await client.messages.stream({ ...params, messages }).finalMessage()
  expect(second.content).toMatchObject([{ type: "text", text: "Sunny in Paris." }])
  return openai.requests[1]!.body.messages.find((m: { role: string }) => m.role === "assistant")
}

describe("a thinking model's tool loop over an OpenAI-compatible upstream", () => {
  it("hands the thinking back as reasoning_content to a provider with reasoningContent: true", async () => {
    const assistant = await loop("deepseek/reasoner")
    expect(assistant).toMatchObject({ role: "assistant", reasoning_content: thinking })
    expect(assistant.tool_calls).toHaveLength(1)
  })

  it("sends no reasoning_content to a provider without it", async () => {
    const assistant = await loop("plain/thinker")
    expect(assistant).not.toHaveProperty("reasoning_content")
  })

  it("is on by default for DeepSeek's and Moonshot's APIs only", () => {
    expect(OpenAiUpstream.defaultReasoningContent("https://api.deepseek.com")).toBe(true)
    expect(OpenAiUpstream.defaultReasoningContent("https://api.deepseek.com/v1")).toBe(true)
    expect(OpenAiUpstream.defaultReasoningContent("https://api.moonshot.ai/v1")).toBe(true)
    expect(OpenAiUpstream.defaultReasoningContent("https://api.moonshot.cn/v1")).toBe(true)
    expect(OpenAiUpstream.defaultReasoningContent("https://api.openai.com/v1")).toBe(false)
    expect(OpenAiUpstream.defaultReasoningContent("https://openrouter.ai/api/v1")).toBe(false)
    expect(OpenAiUpstream.defaultReasoningContent("not a url")).toBe(false)
  })
})
