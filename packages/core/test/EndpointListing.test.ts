import { assert, describe, it } from "@effect/vitest"
import type { EndpointStats } from "@model-gateway/core"
import { Catalogue, EndpointListing } from "@model-gateway/core"
import { Either } from "effect"

const endpoint = (overrides: Partial<Catalogue.Endpoint> = {}): Catalogue.Endpoint => ({
  id: "m/one@p",
  modelId: "m/one",
  provider: "p",
  upstreamModel: "one",
  pricing: { prompt: "0.000001", completion: "0.000002", request: "0", image: "0" },
  zdr: true,
  dataCollection: "deny",
  supportsVoiceCloning: false,
  supportsMultipleAudioReferences: true,
  supportsImageReference: true,
  ...overrides
})

const healthy: EndpointStats.EndpointHealth = {
  latency30m: { p50: 100, p75: 150, p90: 200, p99: 400 },
  throughput30m: { p50: 50, p75: 60, p90: 70, p99: 80 },
  uptime5m: 100,
  uptime30m: 99.5,
  uptime1d: 98,
  recentOutage: false,
  coolingDownUntil: null,
  halfOpen: false
}

describe("EndpointListing", () => {
  it("says how routing sees an endpoint in its status integer", () => {
    assert.strictEqual(EndpointListing.statusOf(undefined), 0)
    assert.strictEqual(EndpointListing.statusOf(healthy), 0)
    assert.strictEqual(EndpointListing.statusOf({ ...healthy, uptime30m: 94.9 }), -1)
    assert.strictEqual(EndpointListing.statusOf({ ...healthy, uptime30m: 50, recentOutage: true }), -2)
    assert.strictEqual(EndpointListing.statusOf({ ...healthy, recentOutage: true, coolingDownUntil: 5 }), -3)
    assert.strictEqual(EndpointListing.statusOf({ ...healthy, halfOpen: true }), -3)
  })

  it("gives the live figures of the health snapshot, and null without data", () => {
    const model = { id: "m/one", name: "One", endpoints: [endpoint()] }
    const record = EndpointListing.endpointRecord(model, endpoint(), healthy)
    assert.deepStrictEqual(
      [record.latency_last_30m, record.throughput_last_30m, record.uptime_last_5m, record.uptime_last_30m],
      [healthy.latency30m, healthy.throughput30m, 100, 99.5]
    )
    const unknown = EndpointListing.endpointRecord(model, endpoint(), undefined)
    assert.deepStrictEqual(
      [unknown.latency_last_30m, unknown.throughput_last_30m, unknown.uptime_last_1d, unknown.status],
      [null, null, null, 0]
    )
    assert.deepStrictEqual(
      [unknown.supports_image_reference, unknown.supports_multiple_audio_references, unknown.quantization],
      [true, true, null]
    )
  })

  it("shows a quantization clients do not know as unknown, and tool choice as the parameters allow", () => {
    const model = { id: "m/one", name: "One", endpoints: [] }
    const q = (quantization: string) =>
      EndpointListing.endpointRecord(model, endpoint({ quantization }), undefined).quantization
    assert.deepStrictEqual([q("fp8"), q("FP16"), q("q4_k_m")], ["fp8", "fp16", "unknown"])
    const choice = (supportedParameters: ReadonlyArray<string>) =>
      EndpointListing.endpointRecord(model, endpoint({ supportedParameters }), undefined).supports_tool_choice
    assert.deepStrictEqual(choice([]), { auto: false, function: false, none: false, required: false })
    assert.deepStrictEqual(choice(["tools"]), { auto: true, function: false, none: false, required: false })
    assert.deepStrictEqual(choice(["tools", "tool_choice"]), { auto: true, function: true, none: true, required: true })
  })

  it("lists only zero-data-retention endpoints; one model's endpoints, or NotFound", () => {
    const snapshot = Catalogue.makeSnapshot([
      { id: "m/one", name: "One", endpoints: [endpoint(), endpoint({ id: "m/one@q", provider: "q", zdr: false })] },
      { id: "m/two", name: "Two", endpoints: [endpoint({ id: "m/two@p", modelId: "m/two" })] }
    ])
    const health: EndpointStats.HealthSnapshot = { get: (id) => (id === "m/two@p" ? healthy : undefined) }
    const zdr = EndpointListing.zdr(snapshot, health).data as Array<any>
    assert.deepStrictEqual(zdr.map((r) => [r.model_id, r.provider_name, r.status]), [["m/one", "p", 0], [
      "m/two",
      "p",
      0
    ]])
    assert.deepStrictEqual(zdr[1].latency_last_30m, healthy.latency30m)
    const one = EndpointListing.modelEndpoints(snapshot, health, "m/one", "/v1")
    assert.deepStrictEqual(Either.map(one, (body: any) => body.data.endpoints.length), Either.right(2))
    assert.isTrue(Either.isLeft(EndpointListing.modelEndpoints(snapshot, health, "m/none", "/v1")))
  })
})
