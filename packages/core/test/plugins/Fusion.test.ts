import { describe, expect, it } from "@effect/vitest"
import * as GatewayError from "../../src/errors/GatewayError.js"
import type { Catalogue } from "../../src/index.js"
import { builtInPanel, panelOf } from "../../src/plugins/Fusion.js"
import { panelFailure } from "../../src/plugins/FusionPanelChecks.js"

const model = (id: string, outputModalities?: ReadonlyArray<string>): Catalogue.Model => ({
  id,
  name: id,
  endpoints: [],
  outputModalities
})

const catalogue = (...models: ReadonlyArray<Catalogue.Model>) => new Map(models.map((m) => [m.id, m] as const))

describe("the fusion panel", () => {
  it("built in: the catalogue's first three models that answer in text, in configuration order", () => {
    const models = catalogue(
      model("tts", ["audio"]),
      model("a"),
      model("b", ["text"]),
      model("both", ["text", "audio"]),
      model("d")
    )
    expect(builtInPanel(models)).toEqual(["a", "b", "both"])
    expect(builtInPanel(catalogue(model("a"), model("tts", ["audio"])))).toEqual(["a"])
    expect(builtInPanel(catalogue(model("tts", ["audio"])))).toEqual([])
  })

  it("the request's analysis_models win, then its preset's, then the configured panel, then the built-in one", () => {
    const models = catalogue(model("a"), model("b"), model("c"), model("d"))
    const options = { fusion: { panel: ["c"], presets: { "general-fast": ["b"] } } }
    expect(panelOf({ id: "fusion", analysis_models: ["d"], preset: "general-fast" }, options, models)).toEqual(["d"])
    expect(panelOf({ id: "fusion", preset: "general-fast" }, options, models)).toEqual(["b"])
    expect(panelOf({ id: "fusion", preset: "general-high" }, options, models)).toEqual(["c"])
    expect(panelOf({ id: "fusion" }, {}, models)).toEqual(["a", "b", "c"])
  })
})

describe("the status of a panel none of whose analysts answered", () => {
  const param = "plugins[0].analysis_models"
  const overloaded = { model: "a", error: new GatewayError.Overloaded({ message: "overloaded" }) }
  const refused = {
    model: "b",
    error: new GatewayError.UpstreamRejected({ message: "bad", status: 400, errorType: "invalid_request_error" })
  }
  const unroutable = { model: "c", error: new GatewayError.InvalidRequest({ message: "No endpoints found" }) }
  const credentials = {
    model: "d",
    error: new GatewayError.UpstreamRejected({ message: "credentials", status: 502, errorType: "api_error" })
  }
  const statusOf = (failures: Parameters<typeof panelFailure>[0]) =>
    GatewayError.describe(panelFailure(failures, param))

  it("is 503 when one failure may pass, whatever the others", () => {
    expect(statusOf([overloaded])).toEqual({ status: 503, type: "overloaded_error" })
    expect(statusOf([refused, unroutable, overloaded])).toEqual({ status: 503, type: "overloaded_error" })
    expect(statusOf([{ model: "e", error: new GatewayError.RateLimited({ message: "slow down" }) }]).status).toBe(503)
  })

  it("is 400 naming the field when every failure was the request's, 502 when one was the gateway's", () => {
    const error = panelFailure([refused, unroutable], param)
    expect(GatewayError.describe(error).status).toBe(400)
    expect(error.message).toBe(
      `${param}: fusion: no analysis model can answer this request: b: bad; c: No endpoints found`
    )
    expect(statusOf([refused, credentials]).status).toBe(502)
  })
})
