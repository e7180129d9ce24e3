/**
 * `previous_response_id` on `POST /v1/responses` end to end with the official `openai` SDK: a model on two
 * OpenAI-compatible providers, each a fake that keeps its own answers and refuses an id it did not store (OpenAI's 400
 * `previous_response_not_found`). Every follow-up must reach the endpoint that stored the response it continues,
 * JSON and streamed; when that endpoint fails, the client is told its failure, not another provider's 400.
 */
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeOpenAi } from "../../../packages/provider-adapters/test/fakes/index.js"
import { decode } from "../src/Config.js"
import type { RunningServer } from "../src/Gateway.js"
import { startServer } from "../src/Gateway.js"
import { OffsetClock } from "./OffsetClock.js"

const KEY = "mg-responses-key"
const MODEL = "even/model"
const FOLLOW_UPS = 8

let up1: FakeUpstream
let up2: FakeUpstream
let gateway: RunningServer
let client: OpenAI
const clock = new OffsetClock()

beforeAll(async () => {
  up1 = await startFakeOpenAi({ storesResponses: "up1" })
  up2 = await startFakeOpenAi({ storesResponses: "up2" })
  const timeouts = { firstByteMs: 1500, idleMs: 1500, requestMs: 1500 }
  const pricing = { prompt: "0.000002", completion: "0.000002" }
  const { config } = decode({
    storage: "memory:",
    providers: {
      up1: { kind: "openai", baseUrl: up1.url, apiKey: "sk-1", timeouts },
      up2: { kind: "openai", baseUrl: up2.url, apiKey: "sk-2", timeouts }
    },
    models: {
      [MODEL]: {
        endpoints: [
          { provider: "up1", upstreamModel: "even-1", pricing },
          { provider: "up2", upstreamModel: "even-2", pricing }
        ]
      }
    },
    keys: [{ key: KEY, management: true }]
  })
  gateway = await startServer(config, { host: "127.0.0.1", port: 0, clock, requestLog: false })
  client = new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: KEY, maxRetries: 0 })
})
afterAll(async () => {
  await gateway.close(1000)
  await Promise.all([up1.close(), up2.close()])
})
beforeEach(() => {
  up1.reset()
  up2.reset()
  // An hour later: no endpoint is held by what an earlier test did.
  clock.offset += 60 * 60_000
})

/** The fake that answered `id`, and the other one. */
const holderOf = (id: string): { readonly holder: FakeUpstream; readonly other: FakeUpstream } => {
  expect(id).toMatch(/^resp_up[12]_/)
  return id.startsWith("resp_up1_") ? { holder: up1, other: up2 } : { holder: up2, other: up1 }
}

const responsesTo = (fake: FakeUpstream) => fake.requests.filter((r) => r.path === "/v1/responses")

const streamed = async (body: OpenAI.Responses.ResponseCreateParamsStreaming) => {
  const events: Array<string> = []
  let response: OpenAI.Responses.Response | undefined
  for await (const event of await client.responses.create(body)) {
    events.push(event.type)
    if (event.type === "response.completed") response = event.response
  }
  expect(events[0]).toBe("response.created")
  return response!
}

describe("previous_response_id goes to the endpoint that stored the response", () => {
  it("JSON: forks of one response and a chain of follow-ups all reach its endpoint", async () => {
    const first = await client.responses.create({ model: MODEL, input: "hello" })
    const { holder, other } = holderOf(first.id)
    for (let i = 0; i < FOLLOW_UPS / 2; i++) {
      const next = await client.responses.create({ model: MODEL, input: `fork ${i}`, previous_response_id: first.id })
      expect(next.output_text).toBe(`Echo: fork ${i}`)
      expect(holderOf(next.id).holder).toBe(holder)
    }
    let last = first
    for (let i = 0; i < FOLLOW_UPS / 2; i++) {
      last = await client.responses.create({ model: MODEL, input: `turn ${i}`, previous_response_id: last.id })
      expect(holderOf(last.id).holder).toBe(holder)
    }
    expect(responsesTo(holder)).toHaveLength(1 + FOLLOW_UPS)
    expect(responsesTo(other)).toHaveLength(0)
    // Forwarded as sent.
    expect(responsesTo(holder).at(-1)?.body.previous_response_id).toMatch(/^resp_up[12]_/)
  })

  it("streamed: the id of a stream's response.created is kept, and streamed follow-ups reach its endpoint", async () => {
    const first = await streamed({ model: MODEL, input: "hello", stream: true })
    const { holder, other } = holderOf(first.id)
    let last = first
    for (let i = 0; i < FOLLOW_UPS; i++) {
      const previous = i % 2 === 0 ? first.id : last.id
      last = await streamed({ model: MODEL, input: `turn ${i}`, stream: true, previous_response_id: previous })
      expect(last.output_text ?? last.output.length).toBeTruthy()
      expect(holderOf(last.id).holder).toBe(holder)
    }
    // A JSON follow-up of a streamed answer, and the other way round.
    const json = await client.responses.create({ model: MODEL, input: "json", previous_response_id: last.id })
    expect(holderOf(json.id).holder).toBe(holder)
    expect(responsesTo(holder)).toHaveLength(2 + FOLLOW_UPS)
    expect(responsesTo(other)).toHaveLength(0)
  })

  it("when that endpoint fails, the client gets its failure, and no other provider is asked", async () => {
    const first = await client.responses.create({ model: MODEL, input: "hello" })
    const { holder, other } = holderOf(first.id)
    holder.script({ kind: "status", status: 503 })
    const failed = await client.responses.create({ model: MODEL, input: "again", previous_response_id: first.id })
      .then(() => undefined, (error: unknown) => error)
    expect(failed).toBeInstanceOf(OpenAI.APIError)
    expect((failed as InstanceType<typeof OpenAI.APIError>).status).toBeGreaterThanOrEqual(500)
    expect(responsesTo(other)).toHaveLength(0)
    // Once it answers again, the conversation goes on where it is stored.
    const next = await client.responses.create({ model: MODEL, input: "again", previous_response_id: first.id })
    expect(holderOf(next.id).holder).toBe(holder)
    expect(responsesTo(other)).toHaveLength(0)
  })

  it("a response asked with store: false is not remembered; an unknown id routes as before", async () => {
    const unstored = await client.responses.create({ model: MODEL, input: "hello", store: false })
    holderOf(unstored.id)
    const metadata = { headers: { "x-service-metadata": "enabled" } }
    const fresh = await client.responses.create({ model: MODEL, input: "fresh" })
    const follow = await client.responses.create(
      { model: MODEL, input: "next", previous_response_id: fresh.id },
      metadata
    )
    const steps = (follow as unknown as { service_metadata: { pipeline: Array<{ name: string }> } }).service_metadata
      .pipeline
    expect(steps.map((s) => s.name)).toContain("response")
    for (const previous of [unstored.id, "resp_never_seen"]) {
      const error = await client.responses.create({ model: MODEL, input: "next", previous_response_id: previous })
        .then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>)
      // Routed as without the field: whichever provider is drawn does not hold it (the fakes never store these).
      expect(error?.status).toBe(400)
      expect(error?.message).toContain("not found")
    }
  })
})
