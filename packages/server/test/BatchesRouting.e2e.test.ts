/**
 * A batch whose requests can never run is refused at submission, as their live route refuses them (the same status and
 * message, under the request's index and `custom_id`), never accepted with a 202 to fail request by request: an API no
 * endpoint of the model serves (embeddings or responses on an Anthropic-protocol provider), a model that does not answer
 * in text (a speech model), a request's own `provider.only` that leaves no endpoint, a model without endpoints, a plugin
 * served on `/v1/messages` only. Each case asks the live route first and compares.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, chatRequests, FAST_WORKER, submit, waitFor } from "./BatchesHarness.js"
import type { Harness } from "./harness.js"
import { startHarness } from "./harness.js"

let h: Harness

const pricing = { prompt: "0.000001", completion: "0.000002" }

beforeAll(async () => {
  h = await startHarness({
    batches: FAST_WORKER,
    models: {
      "acme/voice": {
        outputModalities: ["audio"],
        voices: ["alloy"],
        endpoints: [{ provider: "acme", upstreamModel: "tts-fake", pricing }]
      },
      "acme/nowhere": { endpoints: [] },
      // An Anthropic-protocol endpoint beside an OpenAI-compatible one: embeddings have somewhere to go.
      "mixed/both": {
        endpoints: [
          { provider: "anthro", upstreamModel: "claude-fake-1", pricing },
          { provider: "acme", upstreamModel: "gpt-fake-1", pricing }
        ]
      }
    }
  })
})
afterAll(() => h.close())

const say = { messages: [{ role: "user", content: "Hi" }], max_tokens: 8 }

/** A live request to `endpoint` of `model` with `body`, and a batch of two requests, the second being the same. */
const compare = async (endpoint: string, model: string, body: Record<string, unknown>) => {
  const response = await call(h, "POST", endpoint.replace(/^\/v1/, ""), { ...body, model })
  const live = { status: response.status, message: (await response.json() as any).error.message as string }
  const batch = await submit(h, {
    endpoint,
    model,
    requests: [{ custom_id: "first", body }, { custom_id: "second", body }]
  })
  return { live, batch }
}

describe("a batch request that its live route would refuse before any upstream", () => {
  const cases: Array<[string, string, string, Record<string, unknown>, number, string]> = [
    [
      "embeddings to a model with only Anthropic-protocol endpoints",
      "/v1/embeddings",
      "anthro/claude",
      { input: "x" },
      400,
      "requests[0].body"
    ],
    [
      "responses to a model with only Anthropic-protocol endpoints",
      "/v1/responses",
      "anthro/claude",
      { input: "x" },
      400,
      "requests[0].body"
    ],
    [
      "chat completions to a speech-only model",
      "/v1/chat/completions",
      "acme/voice",
      say,
      400,
      "requests[0].body.model"
    ],
    ["messages to a speech-only model", "/v1/messages", "acme/voice", say, 400, "requests[0].body.model"],
    [
      "a request whose own provider.only excludes every endpoint",
      "/v1/chat/completions",
      "acme/gpt",
      { ...say, provider: { only: ["anthro"] } },
      400,
      "requests[0].body"
    ],
    ["a model without endpoints", "/v1/chat/completions", "acme/nowhere", say, 404, "requests[0].body"],
    [
      "a plugin served on /v1/messages only",
      "/v1/chat/completions",
      "acme/gpt",
      { ...say, plugins: [{ id: "context-compression" }] },
      400,
      "requests[0].body.plugins"
    ]
  ]
  for (const [what, endpoint, model, body, status, at] of cases) {
    it(`${what}: ${status}, as live`, async () => {
      const { batch, live } = await compare(endpoint, model, body)
      expect(live.status).toBe(status)
      expect(batch.status).toBe(status)
      expect(batch.json.error.code).toBe(status)
      expect(batch.json.error.message).toBe(`${at}: ${live.message} (custom_id "first")`)
    })
  }

  it("names the first request that cannot run, after others that can", async () => {
    const created = await submit(h, {
      endpoint: "/v1/chat/completions",
      model: "acme/gpt",
      requests: [...chatRequests(3), { custom_id: "narrow", body: { ...say, provider: { only: ["nobody"] } } }]
    })
    expect(created.status).toBe(400)
    expect(created.json.error.message).toMatch(/^requests\[3\]\.body: No endpoints found .*\(custom_id "narrow"\)$/)
  })
})

describe("a batch request that its live route would serve", () => {
  it("embeddings to a model with an OpenAI-compatible endpoint beside an Anthropic-protocol one run", async () => {
    const created = await submit(h, {
      endpoint: "/v1/embeddings",
      model: "mixed/both",
      requests: [{ custom_id: "a", body: { input: "x" } }]
    })
    expect(created.status).toBe(202)
    const done = await waitFor(h, created.json.id, ["completed", "failed", "expired", "cancelled"])
    expect(done.request_counts).toEqual({ total: 1, completed: 1, failed: 0 })
    expect(done.results[0].response.body.object).toBe("list")
  })

  it("a router plugin's request is planned when it runs (its model is chosen then)", async () => {
    const created = await submit(h, {
      endpoint: "/v1/chat/completions",
      model: "acme/gpt",
      requests: [{ custom_id: "a", body: { ...say, plugins: [{ id: "auto-router" }] } }]
    })
    expect(created.status).toBe(202)
    const done = await waitFor(h, created.json.id, ["completed", "failed", "expired", "cancelled"])
    expect(done.request_counts).toEqual({ total: 1, completed: 1, failed: 0 })
  })

  it("a batch of the auto-router's slug runs, each request on the model the router chooses, as live", async () => {
    const live = await call(h, "POST", "/chat/completions", { ...say, model: "auto" })
    expect(live.status).toBe(200)
    const chosen = (await live.json() as { model: string }).model
    const created = await submit(h, {
      endpoint: "/v1/chat/completions",
      model: "auto",
      requests: [{ custom_id: "a", body: say }]
    })
    expect(created.status).toBe(202)
    const done = await waitFor(h, created.json.id, ["completed", "failed", "expired", "cancelled"])
    expect(done.request_counts).toEqual({ total: 1, completed: 1, failed: 0 })
    expect(done.results[0].response.body.model).toBe(chosen)
  })
})
