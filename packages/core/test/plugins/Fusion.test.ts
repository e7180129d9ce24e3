import { describe, expect, it } from "@effect/vitest"
import type { Catalogue } from "../../src/index.js"
import { builtInPanel, panelOf } from "../../src/plugins/Fusion.js"

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
