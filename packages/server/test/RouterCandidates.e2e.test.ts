/**
 * The router plugins choose among the models that can serve the request, end to end: with `model: "auto"` (or the
 * `auto-router` plugin) on `/v1/chat/completions`, `/v1/responses` and `/v1/messages`, a catalogue whose cheapest
 * models are an embeddings-only one (its endpoint lists `apis: ["embeddings"]`) and a speech-only one gets the
 * cheapest model that can answer, not a 400 "No endpoints found" for a model the route planner then refuses. When no
 * model can serve the request, the answer is the planner's own 400, as for that model asked by name.
 */
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { call, FAST_WORKER, submit, waitFor } from "./BatchesHarness.js"
import type { Harness } from "./harness.js"
import { KEY, startHarness } from "./harness.js"

let h: Harness
let openai: OpenAI

beforeAll(async () => {
  h = await startHarness({
    batches: FAST_WORKER,
    models: {
      // The two cheapest models answer no text request: one only embeds, one only speaks.
      "acme/embed": {
        endpoints: [{
          provider: "acme",
          upstreamModel: "embed-fake-1",
          pricing: { prompt: "0.0000001", completion: "0" },
          apis: ["embeddings"]
        }]
      },
      "acme/voice": {
        outputModalities: ["audio"],
        voices: ["alloy"],
        endpoints: [{ provider: "acme", upstreamModel: "tts-fake", pricing: { prompt: "0", completion: "0" } }]
      },
      // The cheapest that answers in text, without tools; `acme/gpt` (the harness's) is dearer and has them.
      "acme/plain": {
        endpoints: [{
          provider: "acme",
          upstreamModel: "plain-fake-1",
          pricing: { prompt: "0.0000005", completion: "0.0000005" },
          supportedParameters: ["max_tokens", "temperature"]
        }]
      }
    }
  })
  openai = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: KEY, maxRetries: 0 })
})
afterAll(() => h.close())
beforeEach(() => h.reset())

const messages = [{ role: "user" as const, content: "hello there" }]

const weather = {
  type: "function" as const,
  function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }
}

/** The status and error message of a live request the gateway refuses. */
const refusal = async (path: string, body: Record<string, unknown>) => {
  const response = await call(h, "POST", path, body)
  return { status: response.status, message: (await response.json() as any).error.message as string }
}

describe("the auto-router's slug chooses a model that can serve the API", () => {
  it("on /v1/chat/completions", async () => {
    const completion = await openai.chat.completions.create({ model: "auto", max_tokens: 20, messages })
    expect(completion.model).toBe("acme/plain")
    expect(completion.choices[0].message.content).toBe("Echo: hello there")
  })

  it("on /v1/chat/completions with the auto-router plugin and the cheapest cost tier", async () => {
    const completion = await openai.chat.completions.create({
      model: "acme/gpt",
      max_tokens: 20,
      messages,
      ...({ plugins: [{ id: "auto-router", cost_tier: "low" }] } as {})
    })
    expect(completion.model).toBe("acme/plain")
  })

  it("on /v1/responses", async () => {
    const response = await openai.responses.create({ model: "auto", max_output_tokens: 20, input: "hello there" })
    expect(response.model).toBe("acme/plain")
    expect(response.output_text).toBe("Echo: hello there")
  })

  it("on /v1/messages", async () => {
    const anthropic = new Anthropic({ baseURL: h.url, apiKey: KEY, maxRetries: 0 })
    const message = await anthropic.messages.create({ model: "auto", max_tokens: 20, messages })
    expect(message.model).toBe("acme/plain")
  })

  it("with tools, only among the models whose endpoints take them", async () => {
    const completion = await openai.chat.completions.create({
      model: "auto",
      max_tokens: 20,
      messages,
      tools: [weather]
    })
    expect(completion.model).toBe("acme/gpt")
  })

  it("on /v1/embeddings, the model that embeds", async () => {
    const embeddings = await openai.embeddings.create({ model: "auto", input: "hello" })
    expect(embeddings.model).toBe("acme/embed")
  })
})

describe("when no model can serve the request", () => {
  it("is the route planner's 400, as for the model asked by name", async () => {
    const named = await refusal("/chat/completions", { model: "acme/embed", max_tokens: 20, messages })
    expect(named).toEqual({
      status: 400,
      message: "No endpoints found that can serve this request (api): api removed acme/embed via acme " +
        "(does not serve the chat API)"
    })
    const routed = await refusal("/chat/completions", {
      model: "auto",
      max_tokens: 20,
      messages,
      plugins: [{ id: "auto-router", allowed_models: ["acme/embed", "acme/voice"] }]
    })
    expect(routed).toEqual(named)
  })
})

describe("a batch of the auto-router's slug", () => {
  it("runs each request on the model the live route chooses", async () => {
    const created = await submit(h, {
      endpoint: "/v1/chat/completions",
      model: "auto",
      requests: [{ custom_id: "a", body: { messages, max_tokens: 8 } }]
    })
    expect(created.status).toBe(202)
    const done = await waitFor(h, created.json.id, ["completed", "failed", "expired", "cancelled"])
    expect(done.request_counts).toEqual({ total: 1, completed: 1, failed: 0 })
    expect(done.results[0].response.body.model).toBe("acme/plain")
  })
})
