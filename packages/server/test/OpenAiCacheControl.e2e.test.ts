/**
 * Prompt caching over an OpenAI-compatible upstream, end to end: the official Anthropic SDK → the real gateway →
 * the fake OpenAI upstream. A provider with `cacheControl: true` (OpenRouter's default) receives the request's
 * `cache_control` markers in its chat completions body; one without it (the default elsewhere) receives none.
 */
import Anthropic from "@anthropic-ai/sdk"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeOpenAi } from "../../../packages/provider-adapters/test/fakes/index.js"
import { ConfigError, decode } from "../src/Config.js"
import type { RunningServer } from "../src/Gateway.js"
import { startServer } from "../src/Gateway.js"

const KEY = "mg-cache-control-key"
const pricing = { prompt: "0.000001", completion: "0.000002" }

let openai: FakeUpstream
let gateway: RunningServer
let client: Anthropic

beforeAll(async () => {
  openai = await startFakeOpenAi()
  const { config } = decode({
    storage: "memory:",
    providers: {
      plain: { kind: "openai", baseUrl: openai.url, apiKey: "sk-o" },
      caching: { kind: "openai", baseUrl: openai.url, apiKey: "sk-o", cacheControl: true }
    },
    models: {
      "plain/gpt": { endpoints: [{ provider: "plain", upstreamModel: "gpt-plain", pricing }] },
      "caching/claude": { endpoints: [{ provider: "caching", upstreamModel: "anthropic/claude-x", pricing }] }
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
beforeEach(() => openai.reset())

const ephemeral = { type: "ephemeral" as const }

/** A Claude Code-shaped turn: a cached system prompt, a cached user block, a cached tool result, automatic caching. */
const params = (model: string) => ({
  model,
  max_tokens: 50,
  cache_control: ephemeral,
  system: [{ type: "text" as const, text: "You are a coding agent.", cache_control: ephemeral }, {
    type: "text" as const,
    text: "Be brief."
  }],
  messages: [
    {
      role: "user" as const,
      content: [{
        type: "text" as const,
        text: "Read the file.",
        cache_control: { type: "ephemeral" as const, ttl: "1h" }
      }]
    },
    {
      role: "assistant" as const,
      content: [{ type: "tool_use" as const, id: "toolu_1", name: "read", input: { path: "a.ts" } }]
    },
    {
      role: "user" as const,
      content: [{
        type: "tool_result" as const,
        tool_use_id: "toolu_1",
        content: "export {}",
        cache_control: ephemeral
      }]
    }
  ],
  tools: [{ name: "read", input_schema: { type: "object" as const, properties: { path: { type: "string" } } } }]
})

describe.each([["JSON", false], ["stream", true]])(
  "POST /v1/messages to an OpenAI-compatible upstream (%s)",
  (_, stream) => {
    const send = async (model: string) => {
      // `cache_control` at the top level is newer than this SDK's types.
      const body = { ...params(model), stream } as any
      if (stream) await client.messages.stream(body).finalMessage()
      else await client.messages.create(body)
      expect(openai.requests).toHaveLength(1)
      return openai.requests[0].body
    }

    it("keeps every cache_control marker for a provider with cacheControl: true", async () => {
      const body = await send("caching/claude")
      expect(body.model).toBe("anthropic/claude-x")
      expect(body.cache_control).toEqual(ephemeral)
      expect(body.messages[0]).toEqual({
        role: "system",
        content: [{ type: "text", text: "You are a coding agent.", cache_control: ephemeral }, {
          type: "text",
          text: "Be brief."
        }]
      })
      expect(body.messages[1]).toEqual({
        role: "user",
        content: [{ type: "text", text: "Read the file.", cache_control: { type: "ephemeral", ttl: "1h" } }]
      })
      expect(body.messages[3]).toEqual({
        role: "tool",
        tool_call_id: "toolu_1",
        content: [{ type: "text", text: "export {}", cache_control: ephemeral }]
      })
    })

    it("sends no cache_control to a provider without it", async () => {
      const body = await send("plain/gpt")
      expect(JSON.stringify(body)).not.toContain("cache_control")
      expect(body.messages[0]).toEqual({ role: "system", content: "You are a coding agent.\n\nBe brief." })
      expect(body.messages[3]).toEqual({ role: "tool", tool_call_id: "toolu_1", content: "export {}" })
    })
  }
)

describe("the cacheControl configuration key", () => {
  const provider = (extra: Record<string, unknown>) => ({ providers: { p: extra } })

  it("takes a boolean on an HTTP provider", () => {
    const { config, warnings } = decode(
      provider({ kind: "openai", baseUrl: "https://openrouter.ai/api/v1", cacheControl: false })
    )
    expect(warnings).toEqual([])
    expect(config.providers.p).toMatchObject({ cacheControl: false })
    expect(() => decode(provider({ kind: "openai", baseUrl: "http://127.0.0.1:1/v1", cacheControl: "yes" })))
      .toThrow(ConfigError)
    expect(() => decode(provider({ kind: "openai", baseUrl: "http://127.0.0.1:1/v1", cacheControl: "yes" })))
      .toThrow(/providers\.p\.cacheControl/)
  })

  it("is an unknown key, ignored with a warning, for the local speech engine", () => {
    const { config, warnings } = decode(provider({ kind: "local-speech", cacheControl: true }))
    expect(warnings).toEqual(["unknown configuration key providers.p.cacheControl (ignored)"])
    expect(config.providers.p).not.toHaveProperty("cacheControl")
  })
})
