/**
 * The endpoint catalogue end to end with `@openrouter/sdk` (its zod validation of every record included):
 * `GET /v1/endpoints/zdr` for management keys only, and `GET /v1/models/{author}/{slug}/endpoints`, both with live
 * latency, throughput and uptime once requests have gone through.
 */
import { OpenRouter } from "@openrouter/sdk"
import { ForbiddenResponseError, NotFoundResponseError } from "@openrouter/sdk/models/errors"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { InternsHarness } from "./InternsHarness.js"
import { ADMIN_KEY, call, MEMBER_KEY, startInternsHarness } from "./InternsHarness.js"

let h: InternsHarness
let admin: OpenRouter

beforeAll(async () => {
  h = await startInternsHarness()
  admin = new OpenRouter({ serverURL: `${h.url}/v1`, apiKey: ADMIN_KEY, retryConfig: { strategy: "none" } })
})
afterAll(() => h.close())

const v1 = (path: string) => `${h.url}/v1${path}`

const message = (model: string) =>
  call(v1("/messages"), {
    method: "POST",
    key: ADMIN_KEY,
    body: { model, max_tokens: 64, messages: [{ role: "user", content: "Count to five, please." }] }
  })

describe("GET /v1/endpoints/zdr", () => {
  it("lists every zero-data-retention endpoint with every key, nullable ones as null, until there is traffic", async () => {
    const raw = await call(v1("/endpoints/zdr"), { key: ADMIN_KEY })
    expect(raw.status).toBe(200)
    expect(raw.body.data).toEqual([
      {
        name: "anthro | claude-fake-1",
        model_id: "anthro/claude",
        model_name: "Fake Claude",
        provider_name: "anthro",
        tag: "anthro/bf16",
        context_length: 200000,
        max_completion_tokens: 8192,
        max_prompt_tokens: null,
        pricing: {
          prompt: "0.000003",
          completion: "0.000015",
          image: "0",
          request: "0",
          input_cache_read: "0.0000003"
        },
        quantization: "bf16",
        status: 0,
        supported_parameters: ["tools", "tool_choice", "temperature"],
        supports_tool_choice: { auto: true, function: true, none: true, required: true },
        supports_implicit_caching: false,
        supports_image_reference: false,
        supports_multiple_audio_references: false,
        supports_voice_cloning: false,
        latency_last_30m: null,
        throughput_last_30m: null,
        uptime_last_5m: null,
        uptime_last_30m: null,
        uptime_last_1d: null
      },
      expect.objectContaining({
        model_id: "acme/gpt",
        tag: "acme/unknown",
        quantization: "unknown",
        context_length: 0,
        max_completion_tokens: null,
        pricing: { prompt: "0.000001", completion: "0.000002", image: "0.001", request: "0.0001" },
        supports_tool_choice: { auto: true, function: false, none: false, required: false },
        supports_voice_cloning: true
      })
    ])
  })

  it("passes the SDK's validation, with live figures once requests went through", async () => {
    for (let i = 0; i < 3; i++) expect((await message("anthro/claude")).status).toBe(200)
    const listed = await admin.endpoints.listZdrEndpoints()
    expect(listed.data.map((e) => `${e.modelId}@${e.providerName}`)).toEqual(["anthro/claude@anthro", "acme/gpt@acme"])
    const claude = listed.data[0]
    expect(claude.latencyLast30m).toEqual({
      p50: expect.any(Number),
      p75: expect.any(Number),
      p90: expect.any(Number),
      p99: expect.any(Number)
    })
    expect(claude.latencyLast30m!.p50).toBeGreaterThan(0)
    expect(claude.throughputLast30m!.p50).toBeGreaterThan(0)
    expect([claude.uptimeLast5m, claude.uptimeLast30m, claude.uptimeLast1d]).toEqual([100, 100, 100])
    expect(claude.status).toBe(0)
    expect(claude.supportsToolChoice).toEqual({ auto: true, function: true, none: true, required: true })
    // No traffic to the other one yet.
    expect(listed.data[1].latencyLast30m).toBeNull()
    expect(listed.data[1].uptimeLast1d).toBeNull()
  })

  it("is for management keys only: 403 for others", async () => {
    const member = new OpenRouter({ serverURL: `${h.url}/v1`, apiKey: MEMBER_KEY, retryConfig: { strategy: "none" } })
    const refused = await member.endpoints.listZdrEndpoints().catch((e) => e)
    expect(refused).toBeInstanceOf(ForbiddenResponseError)
    expect(refused.error).toEqual({ code: 403, message: "Only management keys can perform this operation" })
    expect((await call(v1("/endpoints/zdr"))).status).toBe(401)
  })
})

describe("GET /v1/models/{author}/{slug}/endpoints", () => {
  it("gives one model and its endpoints as endpoints.list validates them", async () => {
    const listed = await admin.endpoints.list({ author: "anthro", slug: "claude" })
    expect(listed.data).toMatchObject({
      id: "anthro/claude",
      name: "Fake Claude",
      architecture: { inputModalities: ["text", "image"], outputModalities: ["text"], modality: "text+image->text" }
    })
    expect(typeof listed.data.created).toBe("number")
    expect(listed.data.description).toContain("Fake Claude")
    expect(listed.data.endpoints.map((e) => [e.providerName, e.tag, e.quantization])).toEqual([
      ["anthro", "anthro/bf16", "bf16"],
      ["acme", "acme", null]
    ])
    // The id percent-encoded, as clients send it in one segment.
    const encoded = await call(v1("/models/anthro%2Fclaude/endpoints"), { key: MEMBER_KEY })
    expect(encoded.body.data.endpoints).toHaveLength(2)
  })

  it("404 for an unknown model", async () => {
    const missing = await admin.endpoints.list({ author: "nobody", slug: "nothing" }).catch((e) => e)
    expect(missing).toBeInstanceOf(NotFoundResponseError)
    expect(missing.error).toMatchObject({
      code: 404,
      message: "Model 'nobody/nothing' is not available on this gateway"
    })
  })
})
