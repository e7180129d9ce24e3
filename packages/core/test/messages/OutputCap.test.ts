/**
 * The output cap of a Messages body: the cap given to a request that sets none where its upstream requires one (as
 * much as the endpoint allows, or 4096), and a thinking budget kept below any cap set. The
 * body keeps the client's bytes as its source, so that a large one is still spliced.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Endpoint } from "../../src/catalogue/Catalogue.js"
import * as Quotas from "../../src/limits/Quotas.js"
import * as JsonSource from "../../src/messages/JsonSource.js"
import * as OutputCap from "../../src/messages/OutputCap.js"
import type { JsonObject } from "../../src/messages/Wire.js"
import type { Attempt } from "../../src/routing/RoutePlanner.js"

const pricing = { prompt: "0.000001", completion: "0.000001", request: "0", image: "0" }
const endpoint = (maxCompletionTokens?: number): Endpoint => ({
  id: "m@p",
  modelId: "m",
  provider: "p",
  upstreamModel: "up",
  pricing,
  maxCompletionTokens,
  zdr: false,
  dataCollection: "allow",
  supportsVoiceCloning: false,
  supportsMultipleAudioReferences: false,
  supportsImageReference: false
})

/** A body parsed from its text, as the HTTP edge parses a large one: its bytes recorded as its source. */
const parsed = (text: string): JsonObject => {
  const bytes = new TextEncoder().encode(text)
  const body = JSON.parse(text) as JsonObject
  JsonSource.record(body, bytes)
  return body
}

describe("OutputCap", () => {
  it("is as much as the endpoint allows, or 4096 where its limit is not known", () => {
    expect(OutputCap.defaultFor(endpoint())).toBe(4096)
    expect(OutputCap.defaultFor(endpoint(1000))).toBe(1000)
    expect(OutputCap.defaultFor(endpoint(64000))).toBe(64000)
  })

  it("is more than the limits reserve for a request without a cap, at most 4096 (they settle on what it used)", () => {
    const reserved = (limit: number | undefined) =>
      Quotas.demandOf([{ endpoint: endpoint(limit) } as unknown as Attempt], 10, undefined).outputTokens
    expect([reserved(undefined), reserved(1000), reserved(64000)]).toEqual([4096, 1000, 4096])
  })

  it("gives a body without max_tokens the endpoint's default, and leaves one with it as it is", () => {
    const body = { model: "up", messages: [{ role: "user", content: "hi" }] }
    expect(OutputCap.withDefault(body, endpoint())).toEqual({ ...body, max_tokens: 4096 })
    expect(OutputCap.withDefault(body, endpoint(1000))).toEqual({ ...body, max_tokens: 1000 })
    const capped = { ...body, max_tokens: 7 }
    expect(OutputCap.withDefault(capped, endpoint(1000))).toBe(capped)
    expect(body).not.toHaveProperty("max_tokens")
  })

  it("keeps the client's bytes as the source of a large body, so that it is still spliced", () => {
    const text = `{"model": "up", "temperature": 1.0, "messages": [{"role":"user","content":"${"x".repeat(5000)}"}]}`
    const body = parsed(text)
    const out = OutputCap.withDefault(body, endpoint())
    expect(out.max_tokens).toBe(4096)
    expect(JsonSource.of(out)?.parsed).toBe(body)
    expect(out.messages).toBe(body.messages)
  })

  it("keeps a thinking budget below the default, and turns thinking off when under its minimum would remain", () => {
    const thinking = (budget: number) => ({ model: "up", thinking: { type: "enabled", budget_tokens: budget } })
    expect(OutputCap.withDefault(thinking(8000), endpoint())).toMatchObject({
      max_tokens: 4096,
      thinking: { type: "enabled", budget_tokens: 4095 }
    })
    expect(OutputCap.withDefault(thinking(2000), endpoint())).toMatchObject({
      max_tokens: 4096,
      thinking: { type: "enabled", budget_tokens: 2000 }
    })
    expect(OutputCap.withDefault(thinking(2000), endpoint(1000))).toMatchObject({
      max_tokens: 1000,
      thinking: { type: "disabled" }
    })
  })
})
