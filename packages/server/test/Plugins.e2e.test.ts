/**
 * The routing and processing plugins end to end: the real gateway server (its own configuration with
 * scored models, moderation, fusion presets and a fake web search provider) in front of fake Anthropic
 * and OpenAI-compatible upstreams over real HTTP.
 */
import Anthropic from "@anthropic-ai/sdk"
import type { WebSearch } from "@model-gateway/core"
import { Effect } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeAnthropic, startFakeOpenAi } from "../../../packages/provider-adapters/test/fakes/index.js"
import { pdfBase64 } from "../../../packages/provider-adapters/test/fakes/Pdf.js"
import { decode } from "../src/Config.js"
import type { RunningServer } from "../src/Gateway.js"
import { startServer } from "../src/Gateway.js"

const KEY = "mg-plugins-test-key"
const METADATA = { "x-service-metadata": "enabled" }

let anthropic: FakeUpstream
let openai: FakeUpstream
/** Moderation (blocklist), fusion presets and a web search provider configured. */
let full: RunningServer
/** The same catalogue with none of those. */
let bare: RunningServer
let client: Anthropic
const searches: Array<{ query: string; options: WebSearch.SearchOptions }> = []

const scores = (code: number, math: number, writing: number, analysis: number, chat: number) => ({
  code,
  math,
  writing,
  analysis,
  chat
})

/**
 * Costs per token (prompt + completion): cheap 3e-6, gpt 6e-6, mid 18e-6, premium 90e-6, so the scored
 * models sit at cost percentiles 0, 33.3, 66.7 and 100 (bands low, medium, xhigh, max). `anthro/small`
 * has no scores (never a router candidate while others are scored) and a context of 2000 tokens.
 */
const configFor = (extra: Record<string, unknown>) => {
  const timeouts = { firstByteMs: 2000, idleMs: 2000, requestMs: 3000 }
  return decode({
    server: { basePath: "/v1" },
    storage: "memory:",
    providers: {
      anthro: { kind: "anthropic", baseUrl: anthropic.url, apiKey: "sk-upstream-anthropic", timeouts },
      acme: { kind: "openai", baseUrl: openai.url, apiKey: "sk-upstream-openai", timeouts }
    },
    models: {
      "anthro/cheap": {
        endpoints: [{
          provider: "anthro",
          upstreamModel: "claude-cheap",
          pricing: { prompt: "0.000001", completion: "0.000002" }
        }],
        scores: scores(0.5, 0.4, 0.6, 0.5, 0.7)
      },
      "acme/gpt": {
        endpoints: [{
          provider: "acme",
          upstreamModel: "gpt-fake-1",
          pricing: { prompt: "0.000002", completion: "0.000004" },
          inputModalities: ["text", "image"]
        }],
        scores: scores(0.6, 0.6, 0.6, 0.6, 0.6)
      },
      "anthro/mid": {
        endpoints: [{
          provider: "anthro",
          upstreamModel: "claude-mid",
          pricing: { prompt: "0.000003", completion: "0.000015" }
        }],
        scores: scores(0.8, 0.7, 0.92, 0.8, 0.8)
      },
      "anthro/premium": {
        endpoints: [{
          provider: "anthro",
          upstreamModel: "claude-premium",
          pricing: { prompt: "0.000015", completion: "0.000075" }
        }],
        scores: scores(0.95, 0.95, 0.9, 0.95, 0.85)
      },
      "anthro/small": {
        endpoints: [{
          provider: "anthro",
          upstreamModel: "claude-small",
          pricing: { prompt: "0.000001", completion: "0.000001" },
          contextLength: 2000
        }]
      }
    },
    keys: [{ key: KEY, management: true }],
    autoRouter: { slug: "auto" },
    ...extra
  }).config
}

const fakeSearch: WebSearch.WebSearchService = {
  search: (query, options) =>
    Effect.sync(() => {
      searches.push({ query, options })
      return [
        { url: "https://example.com/tides", title: "Tide tables", snippet: "High tide at 07:42 today." },
        { url: "https://example.org/moon", title: "Moon phases", snippet: "The moon is waxing gibbous." }
      ]
    }),
  fetch: (url) => Effect.succeed({ url, title: "Fetched", text: "fetched page text" })
}

beforeAll(async () => {
  anthropic = await startFakeAnthropic()
  openai = await startFakeOpenAi()
  full = await startServer(
    configFor({
      moderation: { kind: "blocklist", terms: ["forbidden phrase"] },
      fusion: {
        panel: ["anthro/premium"],
        // all three presets: Config.ts requires every key of the record (see the report)
        presets: {
          "general-budget": ["anthro/cheap", "acme/gpt"],
          "general-high": ["anthro/premium", "anthro/mid"],
          "general-fast": ["anthro/cheap"]
        }
      }
    }),
    { host: "127.0.0.1", port: 0, webSearch: fakeSearch, requestLog: false }
  )
  bare = await startServer(configFor({}), { host: "127.0.0.1", port: 0, requestLog: false })
  client = new Anthropic({ baseURL: full.url, apiKey: KEY, maxRetries: 0 })
})

afterAll(async () => {
  await Promise.all([full?.close(1000), bare?.close(1000)])
  await Promise.all([anthropic?.close(), openai?.close()])
})

beforeEach(() => {
  anthropic.reset()
  openai.reset()
  searches.length = 0
})

const post = (server: RunningServer, body: unknown, headers: Record<string, string> = METADATA) =>
  fetch(`${server.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}`, ...headers },
    body: JSON.stringify(body)
  })

/** Posts to `server` and returns the status and the parsed body. */
const ask = async (server: RunningServer, body: Record<string, unknown>) => {
  const response = await post(server, { max_tokens: 100, ...body })
  return { status: response.status, body: await response.json() as any }
}

type Step = { type: string; name: string; summary: string }

const stepsOf = (body: any, name: string): Array<Step> =>
  (body.service_metadata?.pipeline ?? []).filter((s: Step) => s.name === name)

const summaries = (body: any, name: string): string => stepsOf(body, name).map((s) => s.summary).join("\n")

const user = (text: string) => [{ role: "user", content: text }]

/** Upstream model ids of every request the fakes received, in order of arrival per fake. */
const upstreamModels = () => [...anthropic.requests, ...openai.requests].map((r) => r.body.model as string)

const CODE = "Write a python function that reverses a linked list and fix the bug in my code"
const POEM = "Write a poem about the sea at dawn"

describe("auto-router", () => {
  it("routes model 'auto' to a catalogue model, saying which task and why", async () => {
    const { body, status } = await ask(full, { model: "auto", messages: user(CODE) })
    expect(status).toBe(200)
    // code task, default cost_quality_tradeoff 9: cheapness dominates
    expect(body.model).toBe("anthro/cheap")
    expect(body.provider).toBe("anthro")
    expect(anthropic.requests.map((r) => r.body.model)).toEqual(["claude-cheap"])
    const why = summaries(body, "auto-router")
    expect(why).toContain("classified the conversation as code")
    expect(why).toContain("cost_quality_tradeoff 9 (default)")
    expect(why).toContain("chose anthro/cheap")
    expect(stepsOf(body, "auto-router").every((s) => s.type === "plugin")).toBe(true)
  })

  it("works through the SDK, streamed and not", async () => {
    const params = {
      model: "auto",
      max_tokens: 50,
      messages: [{ role: "user" as const, content: POEM }],
      ...({ plugins: [{ id: "auto-router", cost_quality_tradeoff: 0 }] } as {})
    }
    const message = await client.messages.create(params)
    // writing task, quality only: anthro/mid has the best writing score
    expect(message.model).toBe("anthro/mid")
    expect(message.content[0]).toMatchObject({ type: "text", text: `Echo: ${POEM}` })
    const streamed = await client.messages.stream(params).finalMessage()
    expect(streamed.model).toBe("anthro/mid")
    expect(anthropic.requests.map((r) => r.body.model)).toEqual(["claude-mid", "claude-mid"])
  })

  it("chooses by task: the same settings pick another model for code", async () => {
    const { body } = await ask(full, {
      model: "auto",
      messages: user(CODE),
      plugins: [{ id: "auto-router", cost_quality_tradeoff: 0 }]
    })
    expect(body.model).toBe("anthro/premium")
    expect(summaries(body, "auto-router")).toContain("cost_quality_tradeoff 0:")
  })

  it("overrides another requested model when the plugin is given", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/cheap",
      messages: user(CODE),
      plugins: [{ id: "auto-router", cost_quality_tradeoff: 0 }]
    })
    expect(status).toBe(200)
    expect(body.model).toBe("anthro/premium")
    expect(upstreamModels()).toEqual(["claude-premium"])
  })

  it("honours allowed_models and excluded_models, exclusion winning", async () => {
    const allowed = await ask(full, {
      model: "auto",
      messages: user(CODE),
      plugins: [{
        id: "auto-router",
        cost_quality_tradeoff: 0,
        allowed_models: ["anthro/cheap", "acme/*"]
      }]
    })
    expect(allowed.body.model).toBe("acme/gpt")
    expect(summaries(allowed.body, "auto-router")).toMatch(/not in allowed_models/)

    const excluded = await ask(full, {
      model: "auto",
      messages: user(CODE),
      plugins: [{ id: "auto-router", allowed_models: ["anthro/*"], excluded_models: ["anthro/cheap"] }]
    })
    // cheapest remaining scored candidate (anthro/small has no score)
    expect(excluded.body.model).toBe("anthro/mid")
    expect(summaries(excluded.body, "auto-router")).toContain("removed by excluded_models")

    const both = await ask(full, {
      model: "auto",
      messages: user(CODE),
      plugins: [{ id: "auto-router", allowed_models: ["anthro/mid"], excluded_models: ["ANTHRO/MID"] }]
    })
    expect(both.status).toBe(400)
    expect(both.body.error.type).toBe("invalid_request_error")
    expect(both.body.error.message).toContain("plugins[0].excluded_models")
    expect(upstreamModels().sort()).toEqual(["claude-mid", "gpt-fake-1"])
  })

  it.each([
    ["low", "anthro/cheap", "cost_tier low: 1 candidate in the band"],
    ["medium", "acme/gpt", "cost_tier medium: 1 candidate in the band"],
    ["high", "acme/gpt", "no candidate in the band; using the nearest band, medium"],
    ["max", "anthro/premium", "cost_tier max: 1 candidate in the band"]
  ])("cost_tier %s picks from its band", async (tier, model, summary) => {
    const { body } = await ask(full, {
      model: "auto",
      messages: user(CODE),
      plugins: [{ id: "auto-router", cost_tier: tier }]
    })
    expect(body.model).toBe(model)
    expect(summaries(body, "auto-router")).toContain(summary)
  })

  it("pin_model reuses the model of the latest assistant message", async () => {
    const messages = [
      { role: "user", content: "hello" },
      { role: "assistant", model: "anthro/cheap", content: [{ type: "text", text: "hi" }] },
      { role: "user", content: "and more" },
      { role: "assistant", model: "anthro/premium", content: [{ type: "text", text: "sure" }] },
      { role: "user", content: CODE }
    ]
    const pinned = await ask(full, { model: "auto", messages, plugins: [{ id: "auto-router", pin_model: true }] })
    expect(pinned.status).toBe(200)
    expect(pinned.body.model).toBe("anthro/premium")
    expect(summaries(pinned.body, "auto-router")).toContain("pin_model: reusing anthro/premium")

    const notCandidate = await ask(full, {
      model: "auto",
      messages,
      plugins: [{ id: "auto-router", pin_model: true, excluded_models: ["anthro/premium"] }]
    })
    expect(notCandidate.body.model).toBe("anthro/cheap")
    expect(summaries(notCandidate.body, "auto-router")).toContain("anthro/premium is not a candidate")

    const unpinned = await ask(full, { model: "auto", messages, plugins: [{ id: "auto-router" }] })
    expect(unpinned.body.model).toBe("anthro/cheap")
  })

  it("auto-beta-router chooses the same way, and rejects pin_model", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/small",
      messages: user(CODE),
      plugins: [{ id: "auto-beta-router", cost_tier: "max" }]
    })
    expect(status).toBe(200)
    expect(body.model).toBe("anthro/premium")
    expect(summaries(body, "auto-beta-router")).toContain("classified the conversation as code")
    const pinned = await ask(full, {
      model: "auto",
      messages: user(CODE),
      plugins: [{ id: "auto-beta-router", pin_model: true }]
    })
    expect(pinned.status).toBe(400)
    expect(pinned.body.error.message).toContain("pin_model")
  })
})

describe("pareto-router and switchyard-router", () => {
  // chat task: the frontier is cheap (0.7), mid (0.8), premium (0.85); acme/gpt (0.6) is dominated
  it("pareto-router picks the knee of the cost/quality frontier", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/cheap",
      messages: user("hello there, how are you?"),
      plugins: [{ id: "pareto-router" }]
    })
    expect(status).toBe(200)
    expect(body.model).toBe("anthro/mid")
    const why = summaries(body, "pareto-router")
    expect(why).toContain("classified the conversation as chat")
    expect(why).toContain("3 of 4 candidates on the cost/quality frontier (anthro/cheap, anthro/mid, anthro/premium)")
    expect(why).toContain("chose the knee, anthro/mid")
  })

  it("a disabled router plugin leaves the requested model", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/cheap",
      messages: user("hello there, how are you?"),
      plugins: [{ id: "pareto-router", enabled: false }, { id: "auto-router", enabled: false, cost_tier: "max" }]
    })
    expect(status).toBe(200)
    expect(body.model).toBe("anthro/cheap")
    expect(stepsOf(body, "pareto-router")).toEqual([])
    expect(stepsOf(body, "auto-router")).toEqual([])
  })

  it("switchyard-router falls back to the pareto pick with the default policy", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/premium",
      messages: user("hello there, how are you?"),
      plugins: [{ id: "switchyard-router" }]
    })
    expect(status).toBe(200)
    expect(body.model).toBe("anthro/mid")
    expect(summaries(body, "switchyard-router")).toContain(
      "policy named no model; using the pareto-router's pick, anthro/mid"
    )
  })
})

describe("response-healing", () => {
  const schema = {
    type: "object",
    properties: {
      name: { type: "string" },
      age: { type: "integer" },
      tags: { type: "array", items: { type: "string" } }
    },
    required: ["name", "age", "tags"],
    additionalProperties: false
  }
  const expected = { name: "Ada", age: 36, tags: ["math", "engines"] }
  const request = (plugins: Array<unknown>) => ({
    model: "anthro/mid",
    messages: user("Describe Ada Lovelace as JSON"),
    output_config: { format: { type: "json_schema", schema } },
    plugins
  })

  it.each([
    ["a ```json fence", "```json\n{\"name\": \"Ada\", \"age\": 36, \"tags\": [\"math\", \"engines\"]}\n```"],
    ["trailing commas", "{\"name\": \"Ada\", \"age\": 36, \"tags\": [\"math\", \"engines\",],}"],
    ["unquoted keys and single quotes", "{name: 'Ada', age: 36, tags: ['math', 'engines']}"],
    [
      "prose around it",
      "Sure! Here is the JSON you asked for:\n{\"name\": \"Ada\", \"age\": 36, \"tags\": [\"math\", \"engines\"]}\nAnything else?"
    ],
    ["all of them", "Here you go:\n```json\n{name: \"Ada\", age: 36, tags: ['math', 'engines',],}\n```\nEnjoy."]
  ])("repairs %s into valid JSON matching the schema", async (_label, raw) => {
    anthropic.setReply(() => ({ text: raw }))
    const { body, status } = await ask(full, request([{ id: "response-healing" }]))
    expect(status).toBe(200)
    expect(body.content).toHaveLength(1)
    expect(JSON.parse(body.content[0].text)).toEqual(expected)
    expect(summaries(body, "response-healing")).toContain("repaired the JSON answer; it matches the schema")
  })

  it("keeps a thinking block before the repaired text", async () => {
    anthropic.setReply(() => ({ thinking: "the user wants JSON", text: "{name: 'Ada', age: 36, tags: []}" }))
    const { body, status } = await ask(full, request([{ id: "response-healing" }]))
    expect(status).toBe(200)
    expect(body.content.map((b: { type: string }) => b.type)).toEqual(["thinking", "text"])
    expect(body.content[0].thinking).toBe("the user wants JSON")
    expect(JSON.parse(body.content[1].text)).toEqual({ name: "Ada", age: 36, tags: [] })
  })

  it("leaves the answer untouched without the plugin, or when it is disabled", async () => {
    const raw = "```json\n{name: 'Ada', age: 36, tags: ['math',],}\n```"
    anthropic.setReply(() => ({ text: raw }))
    for (const plugins of [[], [{ id: "response-healing", enabled: false }]]) {
      const { body, status } = await ask(full, request(plugins))
      expect(status).toBe(200)
      expect(body.content[0].text).toBe(raw)
      expect(stepsOf(body, "response-healing")).toEqual([])
    }
  })

  it("says so when the answer cannot satisfy the schema, and keeps it", async () => {
    anthropic.setReply(() => ({ text: "{\"name\": \"Ada\"}" }))
    const { body, status } = await ask(full, request([{ id: "response-healing" }]))
    expect(status).toBe(200)
    expect(body.content[0].text).toBe("{\"name\": \"Ada\"}")
    expect(summaries(body, "response-healing")).toContain("could not repair the answer")
  })
})

describe("context-compression", () => {
  const filler = "lorem ipsum dolor sit amet ".repeat(10)
  const conversation = () => {
    const messages: Array<{ role: string; content: string }> = [{ role: "user", content: `FIRST TURN ${filler}` }]
    for (let i = 0; i < 20; i++) {
      messages.push({ role: "assistant", content: `answer ${i} ${filler}` })
      messages.push({ role: "user", content: `question ${i} ${filler}` })
    }
    messages.push({ role: "assistant", content: `answer last ${filler}` })
    messages.push({ role: "user", content: "LAST TURN: so what now?" })
    return messages
  }

  it("rejects an unknown engine with a 400", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/small",
      messages: conversation(),
      plugins: [{ id: "context-compression", engine: "squeeze" }]
    })
    expect(status).toBe(400)
    expect(body.error.message).toContain("unknown engine 'squeeze'")
  })

  it("without the plugin, a prompt over the context length is refused naming the context length", async () => {
    const { body, status } = await ask(full, { model: "anthro/small", messages: conversation() })
    expect(status).toBe(400)
    expect(body.error.type).toBe("invalid_request_error")
    expect(body.error.message).toMatch(/context length of 2000/)
    expect(anthropic.requests).toHaveLength(0)
  })

  it("middle-out removes messages from the middle, keeping the first user turn and the last turn", async () => {
    const messages = conversation()
    const { body, status } = await ask(full, {
      model: "anthro/small",
      messages,
      plugins: [{ id: "context-compression", engine: "middle-out" }]
    })
    expect(status).toBe(200)
    expect(body.content[0].text).toBe("Echo: LAST TURN: so what now?")
    expect(anthropic.requests).toHaveLength(1)
    const sent: Array<{ role: string; content: unknown }> = anthropic.requests[0].body.messages
    expect(sent.length).toBeLessThan(messages.length)
    expect(sent[0]).toEqual(messages[0])
    expect(sent.at(-1)).toEqual(messages.at(-1))
    for (let i = 1; i < sent.length; i++) expect(sent[i].role).not.toBe(sent[i - 1].role)
    expect(JSON.stringify(anthropic.requests[0].body).length / 4).toBeLessThan(2000)
    expect(summaries(body, "context-compression")).toMatch(/middle-out removed \d+ message\(s\) to fit/)
  })

  it("answers 400 when even middle-out cannot make the prompt fit", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/small",
      messages: [...conversation().slice(0, -1), { role: "user", content: filler.repeat(40) }],
      plugins: [{ id: "context-compression" }]
    })
    expect(status).toBe(400)
    expect(body.error.message).toContain(
      "context-compression: the prompt cannot fit anthro/small@anthro's context of 2000"
    )
    expect(anthropic.requests).toHaveLength(0)
  })

  it("leaves a prompt that fits alone", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/small",
      messages: user("short"),
      plugins: [{ id: "context-compression" }]
    })
    expect(status).toBe(200)
    expect(anthropic.requests[0].body.messages).toEqual(user("short"))
    expect(stepsOf(body, "context-compression")).toEqual([])
  })
})

describe("fusion", () => {
  // every upstream answer bills 100 input and 10 output tokens
  const usage = { input: 100, output: 10 }
  const costs = { "anthro/cheap": 0.00012, "acme/gpt": 0.00024, "anthro/mid": 0.00045, "anthro/premium": 0.00225 }
  beforeEach(() => {
    anthropic.setReply((b) => ({ text: `analysis from ${b.model}`, usage }))
    openai.setReply((b) => ({ text: `analysis from ${b.model}`, usage }))
  })

  it("runs the analysis models, then the synthesis model with their analyses, and bills the sum", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/cheap",
      messages: user("Which is better, tea or coffee?"),
      plugins: [{ id: "fusion", analysis_models: ["anthro/cheap", "acme/gpt"], model: "anthro/mid" }]
    })
    expect(status).toBe(200)
    expect(body.model).toBe("anthro/mid")
    expect(anthropic.requests.length + openai.requests.length).toBe(3)
    expect(openai.requests.map((r) => r.body.model)).toEqual(["gpt-fake-1"])
    expect(anthropic.requests.map((r) => r.body.model).sort()).toEqual(["claude-cheap", "claude-mid"])
    const synthesis = anthropic.requests.find((r) => r.body.model === "claude-mid")!.body
    expect(synthesis.system).toContain("Analysis by anthro/cheap:\nanalysis from claude-cheap")
    expect(synthesis.system).toContain("Analysis by acme/gpt:\nanalysis from gpt-fake-1")
    expect(synthesis).not.toHaveProperty("plugins")
    expect(body.usage.input_tokens).toBe(300)
    expect(body.usage.output_tokens).toBe(30)
    const total = costs["anthro/cheap"] + costs["acme/gpt"] + costs["anthro/mid"]
    expect(body.usage.cost).toBeCloseTo(total, 12)
    expect(body.usage.cost).toBeGreaterThanOrEqual(costs["anthro/mid"])
    const why = summaries(body, "fusion")
    expect(why).toContain("analysis by anthro/cheap done")
    expect(why).toContain("analysis by acme/gpt done")
    expect(why).toContain("anthro/mid synthesizes 2 analyses")
  })

  it("streams the synthesis with the summed usage and cost", async () => {
    const response = await post(full, {
      model: "anthro/cheap",
      max_tokens: 100,
      stream: true,
      messages: user("Which is better, tea or coffee?"),
      plugins: [{ id: "fusion", analysis_models: ["anthro/cheap", "acme/gpt"], model: "anthro/mid" }]
    })
    expect(response.status).toBe(200)
    const events = (await response.text()).split("\n\n").filter((f) => f.includes("data: ")).map((f) =>
      JSON.parse(/^data: (.*)$/m.exec(f)![1])
    )
    const start = events.find((e) => e.type === "message_start").message
    const delta = events.filter((e) => e.type === "message_delta").at(-1)
    expect(start.model).toBe("anthro/mid")
    expect(events.at(-1).type).toBe("message_stop")
    expect(anthropic.requests.length + openai.requests.length).toBe(3)
    expect(start.usage.input_tokens).toBe(300)
    expect(delta.usage.output_tokens).toBe(30)
    expect(delta.usage.cost).toBeCloseTo(costs["anthro/cheap"] + costs["acme/gpt"] + costs["anthro/mid"], 12)
  })

  it("maps a preset to the configured panel", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/mid",
      messages: user("Which is better, tea or coffee?"),
      plugins: [{ id: "fusion", preset: "general-budget", model: "anthro/mid" }]
    })
    expect(status).toBe(200)
    expect(body.model).toBe("anthro/mid")
    expect(upstreamModels().sort()).toEqual(["claude-cheap", "claude-mid", "gpt-fake-1"])
    expect(body.usage.cost).toBeCloseTo(costs["anthro/cheap"] + costs["acme/gpt"] + costs["anthro/mid"], 12)
  })

  it("lets explicit analysis_models win over the preset", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/mid",
      messages: user("Which is better, tea or coffee?"),
      plugins: [{ id: "fusion", preset: "general-budget", analysis_models: ["anthro/premium"], model: "anthro/mid" }]
    })
    expect(status).toBe(200)
    expect(openai.requests).toHaveLength(0)
    expect(upstreamModels().sort()).toEqual(["claude-mid", "claude-premium"])
    expect(body.usage.cost).toBeCloseTo(costs["anthro/premium"] + costs["anthro/mid"], 12)
  })

  it("uses the configured default panel, else the built-in one: the catalogue's first three text models", async () => {
    const withPanel = await ask(full, {
      model: "anthro/cheap",
      messages: user("Which is better, tea or coffee?"),
      plugins: [{ id: "fusion" }]
    })
    expect(withPanel.status).toBe(200)
    // the synthesis model defaults to the first panel model (spec 2.1.3), not the request's model
    expect(withPanel.body.model).toBe("anthro/premium")
    expect(upstreamModels().sort()).toEqual(["claude-premium", "claude-premium"])
    anthropic.reset()
    openai.reset()
    const builtIn = await ask(bare, {
      model: "anthro/mid",
      messages: user("Which is better, tea or coffee?"),
      plugins: [{ id: "fusion", preset: "general-budget" }]
    })
    expect(builtIn.status).toBe(200)
    expect(builtIn.body.model).toBe("anthro/cheap")
    // the panel (anthro/cheap, acme/gpt, anthro/mid), then the synthesis by the first of them
    expect(upstreamModels().sort()).toEqual(["claude-cheap", "claude-cheap", "claude-mid", "gpt-fake-1"])
  })
})

describe("fusion: requests that can never succeed, and the analysts' tools", () => {
  beforeEach(() => {
    anthropic.setReply((b) => ({ text: `analysis from ${b.model}`, usage: { input: 100, output: 10 } }))
    openai.setReply((b) => ({ text: `analysis from ${b.model}`, usage: { input: 100, output: 10 } }))
  })

  it.each([["nope/x"], ["auto"]])("an unknown analysis model (%s) is a 404 before any upstream", async (id) => {
    const { body, status } = await ask(full, {
      model: "anthro/mid",
      messages: user("Which is better, tea or coffee?"),
      plugins: [{ id: "fusion", analysis_models: ["anthro/cheap", id], tools: [] }]
    })
    expect(status).toBe(404)
    expect(body.error.type).toBe("not_found_error")
    expect(body.error.message).toContain(`'${id}' (plugins[0].analysis_models[1])`)
    expect(upstreamModels()).toEqual([])
  })

  it("analysts no endpoint can serve are a 400 naming why, never a 503", async () => {
    const { body, status } = await ask(full, {
      model: "acme/gpt",
      provider: { only: ["acme"] },
      messages: user("Which is better, tea or coffee?"),
      plugins: [{ id: "fusion", analysis_models: ["anthro/cheap"], model: "acme/gpt", tools: [] }]
    })
    expect(status).toBe(400)
    expect(body.error.type).toBe("invalid_request_error")
    expect(body.error.message).toContain("no analysis model can serve this request: anthro/cheap: No endpoints found")
    expect(body.error.message).toContain("provider.only")
    expect(upstreamModels()).toEqual([])
  })

  it("analysts that failed for a reason that may pass are a 503 overloaded_error", async () => {
    anthropic.setDefault({ kind: "status", status: 529 })
    const { body, status } = await ask(full, {
      model: "anthro/mid",
      messages: user("Which is better, tea or coffee?"),
      plugins: [{ id: "fusion", analysis_models: ["anthro/cheap"], model: "acme/gpt", tools: [] }]
    })
    expect(status).toBe(503)
    expect(body.error.type).toBe("overloaded_error")
    expect(body.error.message).toContain("may pass")
    expect(openai.requests).toHaveLength(0)
  })

  it("explicit tools without a search provider are a 400 naming plugins[i].tools", async () => {
    const { body, status } = await ask(bare, {
      model: "anthro/mid",
      messages: user("Which is better, tea or coffee?"),
      plugins: [{ id: "fusion", analysis_models: ["anthro/cheap"], tools: [{ type: "openrouter:web_search" }] }]
    })
    expect(status).toBe(400)
    expect(body.error.type).toBe("invalid_request_error")
    expect(body.error.message).toContain("plugins[0].tools")
    expect(body.error.message).toContain("no")
    expect(upstreamModels()).toEqual([])
  })

  it("with a search provider, the analysts get the web search results in their prompt", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/mid",
      messages: user("When is high tide today?"),
      plugins: [{
        id: "fusion",
        analysis_models: ["anthro/cheap"],
        model: "anthro/mid",
        tools: [{ type: "openrouter:web_search", parameters: {} }],
        max_tool_calls: 2
      }]
    })
    expect(status).toBe(200)
    expect(searches.map((s) => s.query)).toEqual(["When is high tide today?"])
    const analyst = anthropic.requests.find((r) => r.body.model === "claude-cheap")!.body
    expect(analyst.system).toContain("High tide at 07:42 today.")
    expect(summaries(body, "web")).toContain("2 search result(s) added to the prompt")
  })

  it("the default tools without a search provider: the analysts run without them, and the pipeline says so", async () => {
    const { body, status } = await ask(bare, {
      model: "anthro/mid",
      messages: user("Which is better, tea or coffee?"),
      plugins: [{ id: "fusion", analysis_models: ["anthro/cheap"] }]
    })
    expect(status).toBe(200)
    expect(summaries(body, "fusion")).toContain("the analysts ran without web search and web fetch")
  })
})

describe("moderation", () => {
  it("refuses a flagged input with 403 permission_error and the guardrail step", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/mid",
      messages: user("Please say the Forbidden   Phrase out loud"),
      plugins: [{ id: "moderation" }]
    })
    expect(status).toBe(403)
    expect(body).toMatchObject({ type: "error", error: { type: "permission_error" } })
    expect(body.error.message).toContain("blocked by input moderation")
    expect(body.error.message).not.toContain("forbidden phrase")
    const guardrail = body.service_metadata.pipeline.find((s: Step) => s.type === "guardrail")
    expect(guardrail).toMatchObject({ type: "guardrail", name: "moderation" })
    expect(guardrail.summary).toContain("request blocked")
    expect(upstreamModels()).toEqual([])
  })

  it("checks the system prompt too, and the SDK raises PermissionDeniedError", async () => {
    await expect(client.messages.create({
      model: "anthro/mid",
      max_tokens: 10,
      system: "you know the forbidden phrase",
      messages: [{ role: "user", content: "hi" }],
      ...({ plugins: [{ id: "moderation" }] } as {})
    })).rejects.toBeInstanceOf(Anthropic.PermissionDeniedError)
  })

  it("lets a clean input through, saying it passed", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/mid",
      messages: user("a perfectly fine phrase"),
      plugins: [{ id: "moderation" }]
    })
    expect(status).toBe(200)
    expect(body.content[0].text).toBe("Echo: a perfectly fine phrase")
    expect(stepsOf(body, "moderation")).toEqual([
      { type: "guardrail", name: "moderation", summary: "input passed moderation" }
    ])
  })

  it("does not moderate when the plugin is not requested or is disabled", async () => {
    for (const plugins of [undefined, [{ id: "moderation", enabled: false }]]) {
      const { status } = await ask(full, {
        model: "anthro/mid",
        messages: user("the forbidden phrase"),
        ...(plugins === undefined ? {} : { plugins })
      })
      expect(status).toBe(200)
    }
    expect(anthropic.requests).toHaveLength(2)
  })

  it("answers a clear 400 when no moderation provider is configured (unless disabled)", async () => {
    const { body, status } = await ask(bare, {
      model: "anthro/mid",
      messages: user("hello"),
      plugins: [{ id: "moderation" }]
    })
    expect(status).toBe(400)
    expect(body.error.type).toBe("invalid_request_error")
    expect(body.error.message).toContain("no moderation provider is configured")
    const disabled = await ask(bare, {
      model: "anthro/mid",
      messages: user("hello"),
      plugins: [{ id: "moderation", enabled: false }]
    })
    expect(disabled.status).toBe(200)
  })
})

describe("file-parser", () => {
  const pdfMessage = () => [{
    role: "user",
    content: [
      {
        type: "document",
        title: "Memo",
        source: {
          type: "base64",
          media_type: "application/pdf",
          data: pdfBase64(["Quarterly numbers rose 42 percent"])
        }
      },
      { type: "text", text: "Summarize the memo" }
    ]
  }]

  it("turns a PDF into text for an endpoint that takes no files", async () => {
    const { body, status } = await ask(full, {
      model: "acme/gpt",
      messages: pdfMessage(),
      plugins: [{ id: "file-parser" }]
    })
    expect(status).toBe(200)
    expect(body.model).toBe("acme/gpt")
    expect(openai.requests).toHaveLength(1)
    const sent = JSON.stringify(openai.requests[0].body.messages)
    expect(sent).toContain("Memo:\\nQuarterly numbers rose 42 percent")
    expect(sent).not.toContain("JVBERi0") // the base64 of "%PDF-"
    expect(summaries(body, "file-parser")).toContain("PDF documents converted to text")
  })

  it("leaves documents alone for an endpoint that takes files", async () => {
    const { status } = await ask(full, {
      model: "anthro/mid",
      messages: pdfMessage(),
      plugins: [{ id: "file-parser" }]
    })
    expect(status).toBe(200)
    expect(anthropic.requests[0].body.messages[0].content[0].type).toBe("document")
  })

  it("without the plugin, the document is refused naming documents", async () => {
    const { body, status } = await ask(full, { model: "acme/gpt", messages: pdfMessage() })
    expect(status).toBe(400)
    expect(body.error.type).toBe("invalid_request_error")
    expect(body.error.message).toContain("documents removed acme/gpt via acme (does not accept documents)")
    expect(openai.requests).toHaveLength(0)
  })

  it("rejects an unknown pdf.engine with a 400 naming the field", async () => {
    const { body, status } = await ask(full, {
      model: "acme/gpt",
      messages: pdfMessage(),
      plugins: [{ id: "file-parser", pdf: { engine: "bogus-engine" } }]
    })
    expect(status).toBe(400)
    expect(body.error.type).toBe("invalid_request_error")
    expect(body.error.message).toContain("plugins[0].pdf.engine")
    expect(openai.requests).toHaveLength(0)
  })

  it("pdf.engine native sends the PDF only to endpoints that take files", async () => {
    const { body, status } = await ask(full, {
      model: "acme/gpt",
      messages: pdfMessage(),
      plugins: [{ id: "file-parser", pdf: { engine: "native" } }]
    })
    expect(status).toBe(400)
    expect(body.error.message).toContain("documents removed acme/gpt via acme")
    expect(openai.requests).toHaveLength(0)
  })

  it("says what is wrong with a document that is not a PDF", async () => {
    const messages = pdfMessage()
    ;(messages[0].content[0] as any).source.data = Buffer.from("not a pdf at all").toString("base64")
    const { body, status } = await ask(full, { model: "acme/gpt", messages, plugins: [{ id: "file-parser" }] })
    expect(status).toBe(400)
    expect(body.error.type).toBe("invalid_request_error")
    expect(body.error.message).toContain("file-parser: the document data is not a PDF")
    expect(openai.requests).toHaveLength(0)
  })
})

describe("web and web-fetch", () => {
  it.each(["web", "web-fetch"])("%s without a search provider is a 400 saying so", async (id) => {
    const { body, status } = await ask(bare, { model: "anthro/mid", messages: user("tides?"), plugins: [{ id }] })
    expect(status).toBe(400)
    expect(body.error.type).toBe("invalid_request_error")
    expect(body.error.message).toContain(`'${id}'`)
    expect(body.error.message).toContain("no search provider is configured")
    expect(upstreamModels()).toEqual([])
  })

  it("web puts the search results in the system prompt", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/mid",
      system: "Be brief.",
      messages: user("When is high tide today?"),
      plugins: [{ id: "web" }]
    })
    expect(status).toBe(200)
    expect(searches).toEqual([{ query: "When is high tide today?", options: { maxResults: 5 } }])
    const system: string = anthropic.requests[0].body.system
    expect(system.startsWith("Be brief.\n\n")).toBe(true)
    expect(system).toContain("Web search results for \"When is high tide today?\"")
    expect(system).toContain("[1] Tide tables (https://example.com/tides)\nHigh tide at 07:42 today.")
    expect(system).toContain("[2] Moon phases (https://example.org/moon)")
    expect(summaries(body, "web")).toContain("2 search result(s) added to the prompt")
  })

  it("web reaches an OpenAI-compatible upstream as a system message", async () => {
    const { status } = await ask(full, {
      model: "acme/gpt",
      messages: user("When is high tide today?"),
      plugins: [{ id: "web" }]
    })
    expect(status).toBe(200)
    const system = openai.requests[0].body.messages.find((m: any) => m.role === "system" || m.role === "developer")
    expect(JSON.stringify(system)).toContain("High tide at 07:42 today.")
  })

  it("web-fetch fetches the URLs of the latest user message into the prompt", async () => {
    const { body, status } = await ask(full, {
      model: "anthro/mid",
      messages: user("Summarise https://example.com/report please"),
      plugins: [{ id: "web-fetch" }]
    })
    expect(status).toBe(200)
    const system: string = anthropic.requests[0].body.system
    expect(system).toContain("Content of https://example.com/report (Fetched):\nfetched page text")
    expect(summaries(body, "web-fetch")).toContain("fetched https://example.com/report into the prompt")
  })

  it("web-fetch is accepted with a provider, and disabled plugins need none", async () => {
    const fetched = await ask(full, { model: "anthro/mid", messages: user("hi"), plugins: [{ id: "web-fetch" }] })
    expect(fetched.status).toBe(200)
    const disabled = await ask(bare, {
      model: "anthro/mid",
      messages: user("hi"),
      plugins: [{ id: "web", enabled: false }, { id: "web-fetch", enabled: false }]
    })
    expect(disabled.status).toBe(200)
    expect(anthropic.requests.every((r) => r.body.system === undefined)).toBe(true)
  })
})
