import { assert, describe, it } from "@effect/vitest"
import { Context, Effect } from "effect"
import * as Moderation from "../../src/plugins/Moderation.js"
import * as ResponseHealer from "../../src/plugins/ResponseHealer.js"
import { ask, endpoint, gateway, message, model } from "./Fakes.js"

const models = [model("a", endpoint("a", "p1")), model("b", endpoint("b", "p2")), model("c", endpoint("c", "p3"))]

/** Takes the JSON out of a fenced code block. */
const fencedHealer = Context.make(ResponseHealer.ResponseHealer, {
  heal: (text) =>
    Effect.sync(() => {
      const inner = text.replace(/^```(?:json)?\s*/, "").replace(/\s*```$/, "")
      return { value: JSON.parse(inner), repaired: inner !== text }
    })
})

describe("plugins around the execution", () => {
  it.effect("moderation: a blocked term is refused with 403 and the guardrail pipeline, before any upstream", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, { json: { "a@p1": message("msg_a", "ok", 1, 1) } }, {
        plugins: Context.make(Moderation.Moderation, Moderation.blocklist(["forbidden"]))
      })
      const error = yield* Effect.flip(g.create({
        model: "a",
        max_tokens: 16,
        messages: ask("say the forbidden word"),
        plugins: [{ id: "moderation" }]
      }))
      assert.strictEqual(error._tag, "PermissionDenied")
      const pipeline = (error as { pipeline?: ReadonlyArray<{ name: string }> }).pipeline ?? []
      assert.deepStrictEqual(pipeline.map((s) => s.name), ["moderation"])
      assert.deepStrictEqual(g.upstream.calls, [])
    }))

  it.effect("moderation: clean input goes on to the upstream, the guardrail step in the metadata", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, { json: { "a@p1": message("msg_a", "ok", 1, 1) } }, {
        plugins: Context.make(Moderation.Moderation, Moderation.blocklist(["forbidden"]))
      })
      const outcome = yield* g.create({
        model: "a",
        max_tokens: 16,
        messages: ask("hello"),
        plugins: [{ id: "moderation" }]
      }, { metadata: true })
      const body = (outcome as { body: any }).body
      assert.strictEqual(body.service_metadata.pipeline[0].name, "moderation")
      assert.strictEqual(g.upstream.calls.length, 1)
    }))

  it.effect("response-healing: the healer's JSON replaces the text blocks, thinking stays first", () =>
    Effect.gen(function*() {
      const answer = message("msg_a", "", 4, 4)
      answer.content = [
        { type: "thinking", thinking: "hmm", signature: "sig" },
        { type: "text", text: "```json\n{\"a\":" },
        { type: "text", text: "1}\n```" }
      ]
      const g = yield* gateway(models, { json: { "a@p1": answer } }, { plugins: fencedHealer })
      const outcome = yield* g.create({
        model: "a",
        max_tokens: 16,
        messages: ask("json please"),
        output_config: { format: { type: "json_schema", schema: { type: "object" } } },
        plugins: [{ id: "response-healing" }]
      }, { metadata: true })
      const body = (outcome as { body: any }).body
      assert.deepStrictEqual(body.content, [
        { type: "thinking", thinking: "hmm", signature: "sig" },
        { type: "text", text: "{\"a\":1}", citations: [] }
      ])
      assert.deepInclude(body.service_metadata.pipeline.at(-1), {
        name: "response-healing",
        summary: "repaired the JSON answer; it matches the schema"
      })
    }))

  it.effect("fusion: the panel's analyses are not recorded; one record with the final answer, billed for all", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, {
        json: {
          "a@p1": message("msg_a", "analysis a", 10, 10),
          "b@p2": message("msg_b", "analysis b", 10, 10),
          "c@p3": message("msg_c", "final", 100, 20)
        }
      }, { messages: { fusion: { panel: ["a", "b"] } } })
      const outcome = yield* g.create({
        model: "c",
        max_tokens: 16,
        messages: ask("hard question"),
        plugins: [{ id: "fusion", model: "c" }]
      })
      const body = (outcome as { body: any }).body
      assert.strictEqual(body.model, "c")
      assert.deepStrictEqual(body.content, [{ type: "text", text: "final", citations: [] }])
      const synthesis = g.upstream.calls.find((c) => c.endpoint.id === "c@p3")!
      assert.include(String(synthesis.body.system), "Analysis by a:\nanalysis a")
      assert.strictEqual(g.stores.usage.length, 1)
      // 120 input and 40 output tokens in all, at 0.000001 and 0.000002
      assert.deepInclude(g.stores.usage[0], { model: "c", inputTokens: 120, outputTokens: 40, cost: "0.0002" })
      assert.strictEqual(body.usage.cost, 0.0002)
    }))
})
