/** The catalogue a configuration describes (`catalogueModels`). */
import { Catalogue } from "@model-gateway/core"
import { describe, expect, it } from "vitest"
import { catalogueModels, decode } from "../src/Config.js"

const pricing = { prompt: "0", completion: "0" }
const config = (models: ReadonlyArray<string>) =>
  decode({
    providers: { p: { kind: "anthropic", baseUrl: "https://x" } },
    models: Object.fromEntries(models.map((id) => [id, { endpoints: [{ provider: "p", upstreamModel: id, pricing }] }]))
  }).config

describe("catalogueModels", () => {
  it("dates each model from when the gateway started offering it: a model a reload keeps keeps its date", () => {
    const first = catalogueModels(config(["p/a", "p/b"]), 1_000)
    expect(first.map((m) => [m.id, m.created])).toEqual([["p/a", 1_000], ["p/b", 1_000]])
    const reloaded = catalogueModels(config(["p/b", "p/c"]), 2_000, Catalogue.makeSnapshot(first))
    expect(reloaded.map((m) => [m.id, m.created])).toEqual([["p/b", 1_000], ["p/c", 2_000]])
  })
})
