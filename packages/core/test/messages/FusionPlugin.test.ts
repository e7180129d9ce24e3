/**
 * The fusion plugin through the messages use case: what it checks before running anything (unknown models, analysts
 * no endpoint can serve, tools it cannot honour), the status of a panel that failed, the synthesis model's default
 * and the analysts' web tools.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect } from "effect"
import { describe as describeError } from "../../src/errors/GatewayError.js"
import * as WebSearch from "../../src/plugins/WebSearch.js"
import { ask, endpoint, failure, gateway, message, model } from "./Fakes.js"

const noTools = { supportedParameters: ["temperature"] }
const models = [
  model("a", endpoint("a", "p1")),
  model("b", endpoint("b", "p2")),
  model("c", endpoint("c", "p3")),
  model("plain", endpoint("plain", "p4", noTools)),
  model("empty")
]
const answers = {
  "a@p1": message("msg_a", "analysis a", 10, 10),
  "b@p2": message("msg_b", "analysis b", 10, 10),
  "c@p3": message("msg_c", "final", 10, 10),
  "plain@p4": message("msg_p", "analysis plain", 10, 10)
}

/** A fusion request (plugin index 1); the analysts get no tools unless the plugin says otherwise (`tools: undefined`). */
const request = (plugin: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  JSON.parse(JSON.stringify({
    model: "c",
    max_tokens: 16,
    messages: ask("What is new at https://example.com/news today?"),
    plugins: [{ id: "web", enabled: false }, { id: "fusion", tools: [], ...plugin }],
    ...extra
  }))

const tool = { type: "custom", name: "lookup", input_schema: { type: "object" } }

const searches: Array<string> = []
const fetches: Array<string> = []
const search = Context.make(WebSearch.WebSearch, {
  search: (query) =>
    Effect.sync(() => {
      searches.push(query)
      return [{ url: "https://example.com/a", title: "A", snippet: "the search snippet" }]
    }),
  fetch: (url) =>
    Effect.sync(() => {
      fetches.push(url)
      return { url, title: "News", text: "the fetched page" }
    })
})

const statusOf = (error: Parameters<typeof describeError>[0]) => describeError(error).status

describe("fusion: checked before anything runs", () => {
  for (
    const [name, panel, fragment] of [
      ["an unknown analysis model", ["a", "nope/x"], "'nope/x' (plugins[1].analysis_models[1])"],
      ["a catalogue model without endpoints", ["empty"], "'empty' (plugins[1].analysis_models[0])"],
      ["the auto-router slug", ["auto"], "'auto' is the auto-router's slug"]
    ] as const
  ) {
    it.effect(`${name} is a 404, and no upstream is called`, () =>
      Effect.gen(function*() {
        const g = yield* gateway(models, { json: answers })
        const error = yield* Effect.flip(g.create(request({ analysis_models: panel })))
        assert.strictEqual(error._tag, "NotFound")
        assert.include(error.message, fragment)
        assert.deepStrictEqual(g.upstream.calls, [])
        assert.strictEqual(g.stores.usage.length, 1)
      }))
  }

  it.effect("an unknown synthesis model is a 404 before the analysts run", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, { json: answers })
      const error = yield* Effect.flip(g.create(request({ analysis_models: ["a"], model: "nope/y" })))
      assert.strictEqual(error._tag, "NotFound")
      assert.include(error.message, "synthesis model 'nope/y' (plugins[1].model)")
      assert.deepStrictEqual(g.upstream.calls, [])
    }))

  it.effect("analysts no endpoint can serve are a 400 naming why, before any upstream", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, { json: answers })
      const error = yield* Effect.flip(
        g.create(request({ analysis_models: ["plain"], model: "a" }, { tools: [tool] }))
      )
      assert.strictEqual(error._tag, "InvalidRequest")
      assert.strictEqual(statusOf(error), 400)
      assert.strictEqual((error as { param?: string }).param, "plugins[1].analysis_models")
      assert.include(error.message, "no analysis model can serve this request: plain: No endpoints found")
      assert.include(error.message, "tools")
      assert.deepStrictEqual(g.upstream.calls, [])
    }))

  it.effect("a synthesis model no endpoint can serve is a 400 before the analysts run", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, { json: answers })
      const error = yield* Effect.flip(g.create(request({ analysis_models: ["a"], model: "plain" }, { tools: [tool] })))
      assert.strictEqual(error._tag, "InvalidRequest")
      assert.strictEqual((error as { param?: string }).param, "plugins[1].model")
      assert.deepStrictEqual(g.upstream.calls, [])
    }))

  it.effect("in a mixed panel the analysts that can be served run; the others are skipped in the pipeline", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, { json: answers })
      const outcome = yield* g.create(
        request({ analysis_models: ["plain", "a"], model: "c" }, { tools: [tool] }),
        { metadata: true }
      )
      const body = (outcome as { body: any }).body
      assert.strictEqual(body.model, "c")
      assert.deepStrictEqual(g.upstream.calls.map((c) => c.endpoint.id), ["a@p1", "c@p3"])
      const summaries = body.service_metadata.pipeline.map((s: { summary: string }) => s.summary).join("\n")
      assert.include(summaries, "analysis by plain failed: No endpoints found")
      assert.include(summaries, "c synthesizes 1 analyses")
    }))
})

describe("fusion: a panel none of whose analysts answered", () => {
  it.effect("is a 503 when an analyst failed for a reason that may pass, even if another cannot", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, {
        json: { ...answers, "a@p1": failure("overloaded", 529), "b@p2": failure("invalid_request", 400) }
      })
      const error = yield* Effect.flip(g.create(request({ analysis_models: ["a", "b"] })))
      assert.strictEqual(error._tag, "Unavailable")
      assert.include(error.message, "a: upstream overloaded; b: upstream invalid_request")
    }))

  it.effect("is a 400 when every analyst was refused for the request itself", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, {
        json: { ...answers, "a@p1": failure("invalid_request", 400), "b@p2": failure("context_length", 400) }
      })
      const error = yield* Effect.flip(g.create(request({ analysis_models: ["a", "b"] })))
      assert.strictEqual(error._tag, "InvalidRequest")
      assert.strictEqual((error as { param?: string }).param, "plugins[1].analysis_models")
      assert.notInclude(g.upstream.calls.map((c) => c.endpoint.id), "c@p3")
    }))

  it.effect("is a 502 when the gateway's own provider configuration failed them", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, { json: { ...answers, "a@p1": failure("auth", 401) } })
      const error = yield* Effect.flip(g.create(request({ analysis_models: ["a"] })))
      assert.strictEqual(statusOf(error), 502)
    }))
})

describe("fusion: the synthesis model", () => {
  it.effect("defaults to the first panel model, not the request's model", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, { json: answers })
      const outcome = yield* g.create(request({ analysis_models: ["b", "a"] }))
      assert.strictEqual((outcome as { body: any }).body.model, "b")
      assert.deepStrictEqual(g.upstream.calls.map((c) => c.endpoint.id).sort(), ["a@p1", "b@p2", "b@p2"])
    }))

  it.effect("is not chosen by a router: with the router slug as the model, no router runs (nor refuses)", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, { json: answers })
      // The auto-router alone would refuse this request: no catalogue model matches its allowed_models.
      const body = request({ analysis_models: ["b", "a"] }, { model: "auto" })
      body.plugins.unshift({ id: "auto-router", allowed_models: ["nothing/*"] })
      const outcome = yield* g.create(body, { metadata: true })
      const answer = (outcome as { body: any }).body
      assert.strictEqual(answer.model, "b")
      const steps = answer.service_metadata.pipeline.map((s: { name: string }) => s.name)
      assert.notInclude(steps, "auto-router")
      assert.deepStrictEqual(g.upstream.calls.map((c) => c.endpoint.id).sort(), ["a@p1", "b@p2", "b@p2"])
    }))
})

describe("fusion: the analysts' tools", () => {
  it.effect("explicit web tools without a search provider are a 400 naming plugins[i].tools", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, { json: answers })
      const error = yield* Effect.flip(
        g.create(request({ analysis_models: ["a"], tools: [{ type: "openrouter:web_search" }], max_tool_calls: 2 }))
      )
      assert.strictEqual(error._tag, "InvalidRequest")
      assert.strictEqual((error as { param?: string }).param, "plugins[1].tools")
      assert.include(error.message, "none is configured")
      assert.deepStrictEqual(g.upstream.calls, [])
    }))

  it.effect("a tool type the gateway cannot run is a 400 naming it, with or without a provider", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, { json: answers }, { plugins: search })
      const error = yield* Effect.flip(
        g.create(request({ analysis_models: ["a"], tools: [{ type: "web_search_20250305" }, { type: "code_exec" }] }))
      )
      assert.strictEqual((error as { param?: string }).param, "plugins[1].tools[1].type")
      assert.include(error.message, "'code_exec' is not supported")
    }))

  it.effect("with a search provider, the web tools' results go into the analysts' prompt, not the synthesis'", () =>
    Effect.gen(function*() {
      searches.length = 0
      fetches.length = 0
      const g = yield* gateway(models, { json: answers }, { plugins: search })
      yield* g.create(request({ analysis_models: ["a", "b"], model: "c", tools: undefined }))
      assert.strictEqual(searches.length, 1)
      assert.deepStrictEqual(fetches, ["https://example.com/news"])
      const system = (id: string) => String(g.upstream.calls.find((c) => c.endpoint.id === id)!.body.system)
      for (const id of ["a@p1", "b@p2"]) {
        assert.include(system(id), "the search snippet")
        assert.include(system(id), "the fetched page")
      }
      assert.notInclude(system("c@p3"), "the search snippet")
    }))

  it.effect("max_tool_calls caps the searches and fetches", () =>
    Effect.gen(function*() {
      searches.length = 0
      fetches.length = 0
      const g = yield* gateway(models, { json: answers }, { plugins: search })
      yield* g.create(request({ analysis_models: ["a"], tools: undefined, max_tool_calls: 1 }))
      assert.strictEqual(searches.length, 1)
      assert.deepStrictEqual(fetches, [])
    }))

  it.effect("the default tools without a provider: the analysts run without them, and the pipeline says so", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, { json: answers })
      const outcome = yield* g.create(request({ analysis_models: ["a"], tools: undefined }), { metadata: true })
      const pipeline = (outcome as { body: any }).body.service_metadata.pipeline
      assert.isTrue(pipeline.some((s: { summary: string }) => s.summary.includes("ran without web search")))
    }))

  it.effect("tools: [] runs no search even with a provider", () =>
    Effect.gen(function*() {
      searches.length = 0
      const g = yield* gateway(models, { json: answers }, { plugins: search })
      yield* g.create(request({ analysis_models: ["a"] }))
      assert.strictEqual(searches.length, 0)
    }))
})
