import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { ask, endpoint, failure, gateway, message, model } from "./Fakes.js"

const cheap = { prompt: "0.000001", completion: "0.000002", request: "0", image: "0" }
const dear = { prompt: "0.00001", completion: "0.00002", request: "0", image: "0" }
const models = [
  model("a", endpoint("a", "p1", { pricing: cheap })),
  model("b", endpoint("b", "p2", { pricing: dear }))
]
const withFallback = { model: "a", fallbacks: [{ model: "b" }], max_tokens: 16, messages: ask("hello") }

describe("JSON attempts", () => {
  it.effect("fall back to the next model after a retryable failure; only the answering attempt is billed", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, {
        json: { "a@p1": failure("overloaded", 529), "b@p2": message("msg_b", "from b", 10, 5) }
      })
      const outcome = yield* g.create(withFallback)
      assert.strictEqual(outcome._tag, "Json")
      const body = (outcome as { body: any }).body
      assert.strictEqual(body.model, "b")
      assert.strictEqual(body.provider, "p2")
      assert.deepStrictEqual(body.content, [{ type: "text", text: "from b", citations: [] }])
      // 10 × 0.00001 + 5 × 0.00002, at b's prices; a's failed attempt costs nothing
      assert.strictEqual(body.usage.cost, 0.0002)
      assert.strictEqual(body.usage.input_tokens, 10)
      assert.strictEqual(body.usage.output_tokens, 5)
      assert.deepStrictEqual(g.upstream.calls.map((c) => [c.endpoint.id, c.body.model]), [
        ["a@p1", "p1-a"],
        ["b@p2", "p2-b"]
      ])
      assert.isFalse("fallbacks" in g.upstream.calls[1].body)
      assert.deepStrictEqual(g.stores.attempts.map((a) => [a.endpointId, a.outcome, a.outputTokens]), [
        ["a@p1", "overloaded", 0],
        ["b@p2", "ok", 5]
      ])
      assert.strictEqual(g.stores.usage.length, 1)
      const record = g.stores.usage[0]
      assert.deepInclude(record, {
        model: "b",
        provider: "p2",
        endpointId: "b@p2",
        status: 200,
        errorType: null,
        inputTokens: 10,
        outputTokens: 5,
        cost: "0.0002",
        attempts: 2,
        stream: false,
        route: "POST /v1/messages",
        keyId: "key_1"
      })
    }))

  it.effect("an answer whose upstream told no usage is billed an estimate, shown to the client as billed", () =>
    Effect.gen(function*() {
      const answer = {
        ...message("msg_a", "forty characters of text, no usage told", 0, 0),
        content: [
          { type: "thinking", thinking: "eight ch" },
          { type: "text", text: "forty characters of text, no usage told" },
          { type: "tool_use", id: "t1", name: "get", input: { a: 1 } }
        ]
      }
      const g = yield* gateway(models, { json: { "a@p1": answer } })
      const outcome = yield* g.create({ ...withFallback, fallbacks: [] }, { bodyBytes: 400 })
      // 100 tokens of prompt from 400 bytes; 8 + 39 + 3 + 7 characters of content: 15 tokens.
      assert.deepInclude(g.stores.usage[0], { inputTokens: 100, outputTokens: 15, cost: "0.00013" })
      assert.deepInclude((outcome as { body: any }).body.usage, { input_tokens: 100, output_tokens: 15, cost: 0.00013 })
    }))

  it.effect("a 400-class failure is not retried: the client gets it, the next model is never called", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, {
        json: { "a@p1": failure("invalid_request", 400), "b@p2": message("msg_b", "from b", 10, 5) }
      })
      const result = yield* Effect.either(g.create(withFallback))
      assert.isTrue(Either.isLeft(result))
      const error = (result as Either.Left<any, any>).left
      assert.strictEqual(error._tag, "UpstreamRejected")
      assert.strictEqual(error.status, 400)
      assert.deepStrictEqual(g.upstream.calls.map((c) => c.endpoint.id), ["a@p1"])
      assert.deepStrictEqual(g.stores.attempts, [])
      assert.strictEqual(g.stores.usage.length, 1)
      assert.deepInclude(g.stores.usage[0], {
        model: "a",
        provider: null,
        status: 400,
        errorType: "invalid_request_error",
        cost: "0",
        attempts: 1
      })
    }))

  it.effect("every attempt failing: the last failure, recorded once with every attempt counted", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, {
        json: { "a@p1": failure("overloaded", 529), "b@p2": failure("rate_limited", 429) }
      })
      const error = yield* Effect.flip(g.create(withFallback))
      assert.strictEqual(error._tag, "RateLimited")
      assert.strictEqual(g.upstream.calls.length, 2)
      assert.strictEqual(g.stores.usage.length, 1)
      assert.deepInclude(g.stores.usage[0], { status: 429, errorType: "rate_limit_error", attempts: 2 })
    }))

  it.effect("every attempt failing, the last refusing to express the request: the earlier failure is told", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, {
        json: { "a@p1": failure("overloaded", 529), "b@p2": failure("unsupported") }
      })
      const error = yield* Effect.flip(g.create(withFallback))
      // an overload that may pass, not a 400 that would make the client stop
      assert.strictEqual(error._tag, "Overloaded")
      assert.strictEqual(g.upstream.calls.length, 2)
    }))

  it.effect("a session sticks to the endpoint that answered", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, {
        json: { "a@p1": failure("overloaded", 529), "b@p2": message("msg_b", "from b", 1, 1) }
      })
      yield* g.create({ ...withFallback, session_id: "s1" })
      assert.deepStrictEqual([...g.stores.sessions.values()], ["b@p2"])
      assert.strictEqual(g.stores.usage[0].sessionId, "s1")
    }))
})

describe("max_tokens over every endpoint's limit (prefer, then clamp)", () => {
  const limited = [
    model("c", endpoint("c", "p3", { maxCompletionTokens: 8192 })),
    model("tiny", endpoint("tiny", "p4", { maxCompletionTokens: 1000 }))
  ]
  const script = { json: { "c@p3": message("msg_c", "ok", 3, 2), "tiny@p4": message("msg_t", "ok", 3, 2) } }

  it.effect("sends the endpoint's own limit, the thinking budget kept below it, and says so in the pipeline", () =>
    Effect.gen(function*() {
      const g = yield* gateway(limited, script)
      const outcome = yield* g.create(
        {
          model: "c",
          max_tokens: 32000,
          thinking: { type: "enabled", budget_tokens: 16000 },
          messages: ask("hello")
        },
        { metadata: true }
      )
      const body = (outcome as { body: any }).body
      assert.strictEqual(g.upstream.calls[0].body.max_tokens, 8192)
      // The budget keeps its share of the cap asked for (half), and so the answer its half.
      assert.deepStrictEqual(g.upstream.calls[0].body.thinking, { type: "enabled", budget_tokens: 4096 })
      assert.deepInclude(body.service_metadata.pipeline, {
        type: "routing",
        name: "clamp",
        summary: "c via p3: max_tokens 32000 lowered to its limit of 8192"
      })
    }))

  it.effect("turns thinking off when less than its minimum budget would remain; a smaller budget is kept", () =>
    Effect.gen(function*() {
      const g = yield* gateway(limited, script)
      yield* g.create({
        model: "tiny",
        max_tokens: 4000,
        thinking: { type: "enabled", budget_tokens: 2000 },
        messages: ask("hello")
      })
      assert.strictEqual(g.upstream.calls[0].body.max_tokens, 1000)
      assert.deepStrictEqual(g.upstream.calls[0].body.thinking, { type: "disabled" })
      yield* g.create({
        model: "c",
        max_tokens: 9000,
        thinking: { type: "enabled", budget_tokens: 2000 },
        messages: ask("x")
      })
      assert.deepStrictEqual(g.upstream.calls[1].body.thinking, { type: "enabled", budget_tokens: 2000 })
      assert.strictEqual(g.upstream.calls[1].body.max_tokens, 8192)
    }))
})

describe("a model's refusal falls back to the next model, never to the same model", () => {
  const twoEndpoints = [
    model("a", endpoint("a", "p1", { pricing: cheap }), endpoint("a", "p3", { pricing: dear })),
    model("b", endpoint("b", "p2", { pricing: dear }))
  ]
  const ask = { model: "a", fallbacks: [{ model: "b" }], max_tokens: 16, messages: [{ role: "user", content: "x" }] }
  /** One call, to one of a's endpoints: the first is a price-weighted draw (p1 mostly, p3 now and then). */
  const onlyOneOfA = (called: ReadonlyArray<string>) => {
    assert.strictEqual(called.length, 1)
    assert.include(["a@p1", "a@p3"], called[0])
  }

  it.effect.each(["context_length", "content_filter"] as const)(
    "%s: a's other endpoint is skipped, b answers",
    (kind) =>
      Effect.gen(function*() {
        const g = yield* gateway(twoEndpoints, {
          json: { "a@p1": failure(kind, 400), "a@p3": failure(kind, 400), "b@p2": message("msg_b", "from b", 1, 1) }
        })
        const outcome = yield* g.create(ask)
        assert.strictEqual((outcome as { body: any }).body.model, "b")
        // a's first endpoint is a price-weighted draw (p1 mostly, p3 now and then): one of a's, then b's, never both of a's
        const called = g.upstream.calls.map((c) => c.endpoint.id)
        assert.strictEqual(called.length, 2)
        assert.include(["a@p1", "a@p3"], called[0])
        assert.strictEqual(called[1], "b@p2")
        assert.strictEqual(g.stores.usage[0].attempts, 2)
      })
  )

  it.effect("a plain invalid request does not fall back at all", () =>
    Effect.gen(function*() {
      const g = yield* gateway(twoEndpoints, {
        json: {
          "a@p1": failure("invalid_request", 400),
          "a@p3": failure("invalid_request", 400),
          "b@p2": message("msg_b", "from b", 1, 1)
        }
      })
      const error = yield* Effect.flip(g.create(ask))
      assert.strictEqual(error._tag, "UpstreamRejected")
      onlyOneOfA(g.upstream.calls.map((c) => c.endpoint.id))
    }))

  it.effect("without another model, the refusal is the client's 400", () =>
    Effect.gen(function*() {
      const g = yield* gateway(twoEndpoints, {
        json: { "a@p1": failure("context_length", 400), "a@p3": failure("context_length", 400) }
      })
      const { fallbacks: _, ...alone } = ask
      const error = yield* Effect.flip(g.create(alone))
      assert.strictEqual(error._tag, "UpstreamRejected")
      onlyOneOfA(g.upstream.calls.map((c) => c.endpoint.id))
    }))
})
