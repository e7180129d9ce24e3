import { assert, describe, it } from "@effect/vitest"
import { Context, Effect } from "effect"
import * as Moderation from "../../src/plugins/Moderation.js"
import { ask, endpoint, gateway, message, model } from "./Fakes.js"

const models = [model("a", endpoint("a", "p1", { maxCompletionTokens: 1000, inputModalities: ["text"] }))]
const script = { json: { "a@p1": message("msg_a", "ok", 1, 1) } }

/** The one usage record of a request refused before any upstream: zero tokens and cost, no attempt. */
const refusal = (status: number, errorType: string, model: string | null) => ({
  requestId: "req_1",
  route: "POST /v1/messages",
  keyId: "key_1",
  workspace: "ws",
  model,
  provider: null,
  endpointId: null,
  status,
  errorType,
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  cost: "0",
  ttfbMs: null,
  attempts: 0
})

const refused = (
  body: unknown,
  options: Parameters<typeof gateway>[2] = {}
) =>
  Effect.gen(function*() {
    const g = yield* gateway(models, script, options)
    const error = yield* Effect.flip(g.create(body))
    assert.deepStrictEqual(g.upstream.calls, [])
    assert.strictEqual(g.stores.usage.length, 1, "exactly one usage record")
    return { error, record: g.stores.usage[0] }
  })

describe("usage records of requests refused before any upstream", () => {
  it.effect("a body that fails validation (400), with the model it names", () =>
    Effect.gen(function*() {
      const { error, record } = yield* refused({ model: "a", max_tokens: "many", messages: ask("x"), stream: true })
      assert.strictEqual(error._tag, "InvalidRequest")
      assert.deepInclude(record, { ...refusal(400, "invalid_request_error", "a"), stream: true })
    }))

  it.effect("a body that is not an object (400), without a model", () =>
    Effect.gen(function*() {
      const { record } = yield* refused([1, 2])
      assert.deepInclude(record, { ...refusal(400, "invalid_request_error", null), stream: false })
    }))

  it.effect("a model id too long to be any catalogue's is left out of the record", () =>
    Effect.gen(function*() {
      const { record } = yield* refused({ model: "m".repeat(257), max_tokens: 16, messages: ask("x") })
      assert.deepInclude(record, refusal(404, "not_found_error", null))
    }))

  it.effect("an unknown model (404)", () =>
    Effect.gen(function*() {
      const { error, record } = yield* refused({ model: "nope", max_tokens: 16, messages: ask("x") })
      assert.strictEqual(error._tag, "NotFound")
      assert.deepInclude(record, refusal(404, "not_found_error", "nope"))
    }))

  it.effect("a plan that finds no endpoint (400: the request rules every endpoint out)", () =>
    Effect.gen(function*() {
      const image = { type: "image", source: { type: "url", url: "https://example.com/a.png" } }
      const { error, record } = yield* refused({
        model: "a",
        max_tokens: 50,
        messages: [{ role: "user", content: [image, { type: "text", text: "what is it?" }] }]
      })
      assert.strictEqual(error._tag, "InvalidRequest")
      assert.deepInclude(record, refusal(400, "invalid_request_error", "a"))
    }))

  it.effect("a moderation refusal (403)", () =>
    Effect.gen(function*() {
      const { record } = yield* refused(
        { model: "a", max_tokens: 16, messages: ask("forbidden"), plugins: [{ id: "moderation" }], session_id: "s" },
        { plugins: Context.make(Moderation.Moderation, Moderation.blocklist(["forbidden"])) }
      )
      assert.deepInclude(record, { ...refusal(403, "permission_error", "a"), sessionId: "s" })
    }))

  it.effect("a plugin that cannot run (400): moderation without a provider, web without a search port", () =>
    Effect.gen(function*() {
      for (const id of ["moderation", "web"]) {
        const { record } = yield* refused({ model: "a", max_tokens: 16, messages: ask("x"), plugins: [{ id }] })
        assert.deepInclude(record, refusal(400, "invalid_request_error", "a"))
      }
    }))

  it.effect("an answered request: one record, with its attempt", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, script)
      yield* g.create({ model: "a", max_tokens: 16, messages: ask("x"), user: "u1" })
      assert.strictEqual(g.stores.usage.length, 1)
      assert.deepInclude(g.stores.usage[0], {
        model: "a",
        provider: "p1",
        endpointId: "a@p1",
        status: 200,
        attempts: 1,
        user: "u1",
        cost: "0.000003"
      })
    }))
})
