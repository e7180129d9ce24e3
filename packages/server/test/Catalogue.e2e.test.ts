/**
 * The routes clients call besides /v1/messages, with their own SDKs against the real server: the model list and a
 * model (Anthropic, OpenRouter and openai SDKs, each validating the answer its own way) and count_tokens.
 */
import Anthropic from "@anthropic-ai/sdk"
import { OpenRouter } from "@openrouter/sdk"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { Harness } from "./harness.js"
import { json, KEY, startHarness } from "./harness.js"

let h: Harness
let anthropic: Anthropic
let openrouter: OpenRouter
let openai: OpenAI

beforeAll(async () => {
  h = await startHarness()
  anthropic = new Anthropic({ baseURL: h.url, apiKey: KEY, maxRetries: 0 })
  openrouter = new OpenRouter({ serverURL: `${h.url}/v1`, apiKey: KEY, retryConfig: { strategy: "none" } })
  openai = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: KEY, maxRetries: 0 })
})
afterAll(() => h.close())
beforeEach(() => h.reset())

const catalogueIds = ["anthro/claude", "anthro/backup", "acme/gpt", "dead/model"]

describe("GET /v1/models", () => {
  it("pages through the catalogue with the Anthropic SDK (models.list auto-pagination, models.retrieve)", async () => {
    const ids: Array<string> = []
    for await (const model of anthropic.models.list({ limit: 3 })) {
      expect(model.type).toBe("model")
      expect(typeof model.display_name).toBe("string")
      expect(new Date(model.created_at).toString()).not.toBe("Invalid Date")
      ids.push(model.id)
    }
    expect(ids).toEqual(catalogueIds)
    const first = await anthropic.models.list({ limit: 2 })
    expect(first.has_more).toBe(true)
    expect([first.first_id, first.last_id]).toEqual(["anthro/claude", "anthro/backup"])
    const model = await anthropic.models.retrieve("anthro/claude")
    expect(model).toMatchObject({ id: "anthro/claude", type: "model", display_name: "Fake Claude" })
    await expect(anthropic.models.retrieve("nobody/nothing")).rejects.toBeInstanceOf(Anthropic.NotFoundError)
  })

  it("passes @openrouter/sdk's validation of the list and of one model", async () => {
    const pages = await openrouter.models.list()
    const data = pages.result.data
    expect(data.map((m) => m.id)).toEqual(catalogueIds)
    const gpt = data.find((m) => m.id === "acme/gpt")!
    expect(gpt).toMatchObject({
      name: "Fake GPT",
      contextLength: null,
      pricing: { prompt: "0.000001", completion: "0.000002" },
      architecture: { inputModalities: ["text", "image"], outputModalities: ["text"] },
      topProvider: { isModerated: false }
    })
    expect(gpt.supportedParameters).toContain("tools")
    const one = await openrouter.models.get({ author: "anthro", slug: "claude" })
    expect(one.data.id).toBe("anthro/claude")
  })

  it("lists with the openai SDK", async () => {
    const ids: Array<string> = []
    const now = Math.floor(Date.now() / 1000)
    for await (const model of openai.models.list()) {
      expect(model.object).toBe("model")
      expect(model.owned_by).toBe(model.id.split("/")[0])
      // When the gateway started offering it (it loaded its catalogue at start): not 0, 1970.
      expect(model.created).toBeGreaterThan(now - 600)
      expect(model.created).toBeLessThanOrEqual(now)
      ids.push(model.id)
    }
    expect(ids).toEqual(catalogueIds)
    expect((await openai.models.retrieve("acme/gpt")).id).toBe("acme/gpt")
  })

  it("refuses bad paging parameters with a 400, and needs a key", async () => {
    const bad = await fetch(`${h.url}/v1/models?limit=0`, { headers: { authorization: `Bearer ${KEY}` } })
    expect(bad.status).toBe(400)
    expect((await json(bad)).error).toMatchObject({ code: 400, message: "limit: must be an integer from 1 to 1000" })
    expect((await fetch(`${h.url}/v1/models`)).status).toBe(401)
  })
})

describe("POST /v1/messages/count_tokens", () => {
  const conversation = {
    system: "You are terse.",
    messages: [{ role: "user" as const, content: "How many tokens is this sentence, more or less?" }]
  }

  it("asks an Anthropic endpoint of the model, as the SDK's messages.countTokens does", async () => {
    const counted = await anthropic.messages.countTokens({ model: "anthro/claude", ...conversation })
    expect(counted.input_tokens).toBeGreaterThan(5)
    const request = h.anthropic.requests.find((r) => r.path === "/v1/messages/count_tokens")
    expect(request?.body).toEqual({ model: "claude-fake-1", ...conversation })
  })

  it("counts locally for a model with no Anthropic endpoint, and says how in the metadata", async () => {
    const response = await fetch(`${h.url}/v1/messages/count_tokens`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}`, "x-service-metadata": "enabled" },
      body: JSON.stringify({ model: "acme/gpt", max_tokens: 10, ...conversation })
    })
    expect(response.status).toBe(200)
    const body = await json(response)
    // "You are terse." and the question: 4 + 11 tokens in cl100k_base, and 4 for the message.
    expect(body.input_tokens).toBe(19)
    expect(body.service_metadata.pipeline.at(-1).summary).toMatch(/^counted locally \(cl100k_base/)
    expect(h.openai.requests).toHaveLength(0)
  })

  it("answers 404 for an unknown model and 400 for an invalid body", async () => {
    await expect(anthropic.messages.countTokens({ model: "nobody/nothing", ...conversation })).rejects
      .toBeInstanceOf(Anthropic.NotFoundError)
    await expect(anthropic.messages.countTokens({ model: "anthro/claude", messages: "nope" as never })).rejects
      .toBeInstanceOf(Anthropic.BadRequestError)
  })
})
