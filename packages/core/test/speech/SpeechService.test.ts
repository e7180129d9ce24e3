import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Option, Tracer } from "effect"
import * as Catalogue from "../../src/catalogue/Catalogue.js"
import type { GatewayError } from "../../src/errors/GatewayError.js"
import * as SpeechService from "../../src/speech/SpeechService.js"
import type { BytePull, SpeechCall } from "../../src/upstream/Upstream.js"
import { Upstream, UpstreamError } from "../../src/upstream/Upstream.js"
import { endpoint, failure, requestContext, stores } from "../messages/Fakes.js"

// -----------------------------------------------------------------------------
// fakes
// -----------------------------------------------------------------------------

const speechModel = (id: string, ...endpoints: ReadonlyArray<Catalogue.Endpoint>): Catalogue.Model => ({
  id,
  name: id,
  endpoints,
  outputModalities: ["audio"],
  voices: ["alloy"]
})

const textModel = (id: string, ...endpoints: ReadonlyArray<Catalogue.Endpoint>): Catalogue.Model => ({
  id,
  name: id,
  endpoints
})

/** One pull of scripted audio: bytes, or the failure it fails with. */
type Pull = Uint8Array | UpstreamError

const bytes = (...values: Array<number>) => new Uint8Array(values)

const pullOf = (pulls: ReadonlyArray<Pull>): BytePull => {
  let next = 0
  return Effect.suspend(() => {
    if (next >= pulls.length) return Effect.succeed(undefined)
    const pull = pulls[next++]
    return pull instanceof UpstreamError ? Effect.fail(pull) : Effect.succeed(pull)
  })
}

const fakeSpeech = (
  script: Record<string, ReadonlyArray<Pull> | UpstreamError>,
  options: { noSpeech?: boolean } = {}
) => {
  const calls: Array<SpeechCall> = []
  const released: Array<string> = []
  const unused = () => Effect.die("not a messages test")
  const context = Context.make(Upstream, {
    createMessage: unused,
    streamMessage: unused,
    speech: options.noSpeech ? undefined : (call) =>
      Effect.suspend(() => {
        calls.push(call)
        const answer = script[call.endpoint.id] ?? failure("not_found", 404)
        if (answer instanceof UpstreamError) return Effect.fail(answer)
        return Effect.acquireRelease(
          Effect.succeed({ contentType: "audio/mpeg", pull: pullOf(answer) }),
          () => Effect.sync(() => released.push(call.endpoint.id))
        )
      })
  })
  return { context, calls, released }
}

const setup = (
  models: ReadonlyArray<Catalogue.Model>,
  script: Record<string, ReadonlyArray<Pull> | UpstreamError>,
  options: { noSpeech?: boolean } = {}
) => {
  const upstream = fakeSpeech(script, options)
  const s = stores()
  const snapshot: Catalogue.CatalogueSnapshot = { models: new Map(models.map((m) => [m.id, m])) }
  const context = Context.merge(upstream.context, s.context).pipe(
    Context.add(Catalogue.Catalogue, Catalogue.fromSnapshot(snapshot))
  )
  const service = Effect.runSync(Effect.provide(SpeechService.make, context))
  const synthesize = (body: unknown, ctx: Parameters<typeof requestContext>[0] = {}) =>
    service.synthesize(requestContext({ route: "POST /v1/audio/speech", ...ctx }), body)
  return { upstream, stores: s, synthesize }
}

/** Runs a request and reads all of its audio. */
const readAll = (outcome: SpeechService.SpeechOutcome) =>
  Effect.scoped(Effect.flatMap(outcome.open, (pull) => {
    const chunks: Array<Uint8Array> = []
    const loop: Effect.Effect<Array<Uint8Array>, GatewayError> = Effect.flatMap(
      pull,
      (b) => b === undefined ? Effect.succeed(chunks) : Effect.suspend(() => (chunks.push(b), loop))
    )
    return loop
  }))

const body = (fields: Record<string, unknown> = {}) => ({
  input: "Hello world",
  model: "tts/one",
  voice: "alloy",
  response_format: "mp3",
  ...fields
})

const clip = { type: "input_audio", input_audio: { data: "data:audio/wav;base64,UklGRg==" } }

const failed = (effect: Effect.Effect<unknown, GatewayError>): GatewayError => {
  const exit = Effect.runSyncExit(effect)
  if (Exit.isSuccess(exit)) assert.fail("expected a failure")
  const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
  if (error === undefined) assert.fail(`expected a typed failure, got ${exit.cause._tag}`)
  return error
}

// -----------------------------------------------------------------------------
// tests
// -----------------------------------------------------------------------------

describe("SpeechService", () => {
  it.effect("streams the audio of the endpoint, with its content type, and records usage at its prompt price", () =>
    Effect.gen(function*() {
      const tts = speechModel(
        "tts/one",
        endpoint("tts/one", "acme", {
          pricing: {
            prompt: "0.000015",
            completion: "0",
            request: "0",
            image: "0"
          }
        })
      )
      const g = setup([tts], { "tts/one@acme": [bytes(1, 2), bytes(), bytes(3)] })
      const outcome = yield* g.synthesize(body())
      assert.strictEqual(outcome.contentType, "audio/mpeg")
      assert.strictEqual(outcome.model, "tts/one")
      assert.strictEqual(outcome.provider, "acme")
      assert.strictEqual(outcome.generationId, "gen-1")
      const chunks = yield* readAll(outcome)
      assert.deepStrictEqual(chunks.map((c) => [...c]), [[1, 2], [], [3]])
      assert.deepStrictEqual(g.upstream.released, ["tts/one@acme"])
      const call = g.upstream.calls[0]
      assert.strictEqual(call.input, "Hello world")
      assert.strictEqual(call.voice, "alloy")
      assert.strictEqual(call.format, "mp3")
      const [record] = g.stores.usage
      assert.strictEqual(record.route, "POST /v1/audio/speech")
      assert.strictEqual(record.status, 200)
      assert.strictEqual(record.model, "tts/one")
      assert.strictEqual(record.provider, "acme")
      assert.strictEqual(record.inputTokens, 11)
      assert.strictEqual(record.cost, "0.000165")
      assert.strictEqual(record.stream, true)
      assert.strictEqual(record.errorType, null)
      assert.strictEqual(g.stores.attempts[0].outcome, "ok")
    }))

  it.effect("the usage record is written when the audio's scope closes, not before", () =>
    Effect.gen(function*() {
      const g = setup([speechModel("tts/one", endpoint("tts/one", "acme"))], { "tts/one@acme": [bytes(1)] })
      const outcome = yield* g.synthesize(body())
      assert.strictEqual(g.stores.usage.length, 0)
      yield* readAll(outcome)
      assert.strictEqual(g.stores.usage.length, 1)
    }))

  it.effect("falls back to the next endpoint after a retryable failure before the first byte", () =>
    Effect.gen(function*() {
      const tts = speechModel(
        "tts/one",
        endpoint("tts/one", "cheap", { pricing: { prompt: "0.000001", completion: "0", request: "0", image: "0" } }),
        endpoint("tts/one", "dear", { pricing: { prompt: "0.000009", completion: "0", request: "0", image: "0" } })
      )
      const g = setup([tts], {
        "tts/one@cheap": [failure("server_error", 500)],
        "tts/one@dear": [bytes(9)]
      })
      const outcome = yield* g.synthesize(body({ provider: { sort: "price" } }))
      assert.strictEqual(outcome.provider, "dear")
      assert.deepStrictEqual((yield* readAll(outcome)).map((c) => [...c]), [[9]])
      assert.deepStrictEqual(g.upstream.calls.map((c) => c.endpoint.provider), ["cheap", "dear"])
      assert.deepStrictEqual(g.upstream.released, ["tts/one@cheap", "tts/one@dear"])
      assert.deepStrictEqual(g.stores.attempts.map((a) => a.outcome), ["error", "ok"])
      assert.strictEqual(g.stores.usage[0].attempts, 2)
    }))

  it.effect("an empty audio (ended before any byte) falls back too", () =>
    Effect.gen(function*() {
      const g = setup([speechModel("tts/one", endpoint("tts/one", "a"), endpoint("tts/one", "b"))], {
        "tts/one@a": [],
        "tts/one@b": [bytes(1)]
      })
      const outcome = yield* g.synthesize(body({ provider: { order: ["a", "b"] } }))
      assert.strictEqual(outcome.provider, "b")
    }))

  it("a 400 from the upstream is not retried", () => {
    const g = setup([speechModel("tts/one", endpoint("tts/one", "a"), endpoint("tts/one", "b"))], {
      "tts/one@a": failure("invalid_request", 400),
      "tts/one@b": [bytes(1)]
    })
    const error = failed(g.synthesize(body({ provider: { order: ["a", "b"] } })))
    assert.strictEqual(error._tag, "UpstreamRejected")
    assert.deepStrictEqual(g.upstream.calls.map((c) => c.endpoint.provider), ["a"])
    assert.strictEqual(g.stores.usage[0].status, 400)
  })

  it("the last failure's status: 524 for a time-out, 502 for a provider error, 529, 429, 503", () => {
    const cases = [
      [failure("timeout"), "UpstreamRejected", 524],
      [failure("server_error", 500), "ProviderFailed", 502],
      [failure("server_error", 200), "UpstreamRejected", 502],
      [failure("overloaded", 529), "Overloaded", 529],
      [failure("rate_limited", 429), "RateLimited", 429],
      [failure("transport"), "Unavailable", 503]
    ] as const
    for (const [error, tag, status] of cases) {
      const g = setup([speechModel("tts/one", endpoint("tts/one", "a"))], { "tts/one@a": error })
      const e = failed(g.synthesize(body()))
      assert.strictEqual(e._tag, tag)
      assert.strictEqual(g.stores.usage[0].status, status)
    }
  })

  it("unknown model: 404; a model that does not speak: 400", () => {
    const g = setup([textModel("chat/one", endpoint("chat/one", "a"))], {})
    assert.strictEqual(failed(g.synthesize(body({ model: "nope" })))._tag, "NotFound")
    const error = failed(g.synthesize(body({ model: "chat/one" })))
    assert.strictEqual(error._tag, "InvalidRequest")
    assert.include(error.message, "does not synthesize speech")
    assert.deepStrictEqual(g.stores.usage.map((r) => r.status), [404, 400])
    assert.strictEqual(g.stores.usage[1].model, "chat/one")
  })

  it("an invalid body: 400 with a usage record", () => {
    const g = setup([speechModel("tts/one", endpoint("tts/one", "a"))], {})
    const error = failed(g.synthesize(body({ voice: "" })))
    assert.strictEqual(error._tag, "InvalidRequest")
    assert.strictEqual(g.stores.usage[0].status, 400)
    assert.strictEqual(g.stores.usage[0].model, "tts/one")
    assert.strictEqual(g.stores.usage[0].attempts, 0)
  })

  describe("references route only to capable endpoints", () => {
    const models = [
      speechModel(
        "tts/one",
        endpoint("tts/one", "plain"),
        endpoint("tts/one", "cloner", { supportsVoiceCloning: true }),
        endpoint("tts/one", "multi", { supportsVoiceCloning: true, supportsMultipleAudioReferences: true }),
        endpoint("tts/one", "painter", { supportsImageReference: true })
      )
    ]
    const script = {
      "tts/one@plain": [bytes(1)],
      "tts/one@cloner": [bytes(2)],
      "tts/one@multi": [bytes(3)],
      "tts/one@painter": [bytes(4)]
    }

    it.effect("one clip: voice cloning endpoints", () =>
      Effect.gen(function*() {
        for (let i = 0; i < 10; i++) {
          const g = setup(models, script)
          const outcome = yield* g.synthesize(body({ input_references: [clip, { type: "text", text: "hi" }] }))
          assert.include(["cloner", "multi"], outcome.provider)
          const call = g.upstream.calls[0]
          assert.strictEqual(call.references.mode, "audio")
        }
      }))

    it.effect("two clips: multiple audio references", () =>
      Effect.gen(function*() {
        const g = setup(models, script)
        const outcome = yield* g.synthesize(body({ input_references: [clip, clip] }))
        assert.strictEqual(outcome.provider, "multi")
      }))

    it.effect("an image: image reference endpoints", () =>
      Effect.gen(function*() {
        const g = setup(models, script)
        const outcome = yield* g.synthesize(
          body({ input_references: [{ type: "image_url", image_url: { url: "https://x.test/a.png" } }] })
        )
        assert.strictEqual(outcome.provider, "painter")
      }))

    it("no capable endpoint: a 400 naming the capability, never a 503", () => {
      const g = setup([speechModel("tts/one", endpoint("tts/one", "plain"))], { "tts/one@plain": [bytes(1)] })
      const error = failed(g.synthesize(body({ input_references: [clip] })))
      assert.strictEqual(error._tag, "InvalidRequest")
      assert.include(error.message, "voice cloning")
      assert.strictEqual(g.upstream.calls.length, 0)
      const image = failed(
        g.synthesize(body({ input_references: [{ type: "image_url", image_url: { url: "https://x.test/a.png" } }] }))
      )
      assert.include(image.message, "image references")
      const several = setup([speechModel("tts/one", endpoint("tts/one", "c", { supportsVoiceCloning: true }))], {})
      assert.include(failed(several.synthesize(body({ input_references: [clip, clip] }))).message, "multiple audio")
    })

    it.effect("a fallback model with a capable endpoint is used when the requested one has none", () =>
      Effect.gen(function*() {
        const g = setup([
          speechModel("tts/one", endpoint("tts/one", "plain")),
          speechModel("tts/two", endpoint("tts/two", "cloner", { supportsVoiceCloning: true }))
        ], { "tts/two@cloner": [bytes(5)] })
        const outcome = yield* g.synthesize(body({ input_references: [clip], fallbacks: [{ model: "tts/two" }] }))
        assert.strictEqual(outcome.model, "tts/two")
        assert.isTrue(outcome.steps.some((s) => s.summary.includes("does not support voice cloning")))
      }))
  })

  it.effect("an endpoint whose adapter has no speech is skipped as unsupported", () =>
    Effect.gen(function*() {
      const g = setup([speechModel("tts/one", endpoint("tts/one", "a"))], {}, { noSpeech: true })
      const exit = yield* Effect.exit(g.synthesize(body()))
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(g.stores.usage[0].status, 400)
    }))

  it.effect("provider options reach only their provider", () =>
    Effect.gen(function*() {
      const g = setup([speechModel("tts/one", endpoint("tts/one", "acme"))], { "tts/one@acme": [bytes(1)] })
      yield* readAll(
        yield* g.synthesize(body({ provider: { options: { ACME: { instructions: "calm" }, other: { x: 1 } } } }))
      )
      assert.deepStrictEqual(g.upstream.calls[0].options, { instructions: "calm" })
    }))

  it.effect("a session sticks to the endpoint that served it; the body's session_id wins over the header", () =>
    Effect.gen(function*() {
      const tts = speechModel("tts/one", endpoint("tts/one", "a"), endpoint("tts/one", "b"))
      const g = setup([tts], { "tts/one@a": [bytes(1)], "tts/one@b": [bytes(2)] })
      const first = yield* g.synthesize(body({ session_id: "body-session" }), { sessionId: "header-session" })
      yield* readAll(first)
      assert.strictEqual(g.stores.usage[0].sessionId, "body-session")
      const [key, endpointId] = [...g.stores.sessions][0]
      assert.include(key, "body-session")
      assert.strictEqual(endpointId, `tts/one@${first.provider}`)
      for (let i = 0; i < 5; i++) {
        const again = yield* g.synthesize(body({ session_id: "body-session" }))
        assert.strictEqual(again.provider, first.provider)
        yield* readAll(again)
      }
    }))

  it.effect("a failure after the first byte ends the audio with an error, recorded with the 200", () =>
    Effect.gen(function*() {
      const g = setup([speechModel("tts/one", endpoint("tts/one", "a"))], {
        "tts/one@a": [bytes(1), failure("transport")]
      })
      const outcome = yield* g.synthesize(body())
      const exit = yield* Effect.exit(readAll(outcome))
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(g.stores.usage[0].status, 200)
      assert.strictEqual(g.stores.usage[0].errorType, "overloaded_error")
      assert.strictEqual(g.stores.attempts[0].outcome, "error")
    }))

  it.effect("the trace object shapes the request's span; other keys are custom metadata", () =>
    Effect.gen(function*() {
      const spans: Array<Tracer.Span> = []
      const tracer = yield* Effect.tracer
      const recording = Tracer.make({
        span: (...args) => {
          const span = tracer.span(...args)
          spans.push(span)
          return span
        },
        context: tracer.context
      })
      const g = setup([speechModel("tts/one", endpoint("tts/one", "a"))], { "tts/one@a": [bytes(1)] })
      const outcome = yield* Effect.withTracer(
        g.synthesize(body({
          user: "end-user",
          trace: {
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736",
            parent_span_id: "00f067aa0ba902b7",
            span_name: "tts-span",
            generation_name: "greeting",
            customer: "acme"
          }
        })),
        recording
      )
      yield* readAll(outcome)
      const span = spans.find((s) => s.name === "tts-span")
      assert.isDefined(span)
      assert.strictEqual(span!.attributes.get("trace.metadata.customer"), "acme")
      assert.strictEqual(span!.attributes.get("trace.generation_name"), "greeting")
      assert.strictEqual(span!.attributes.get("user.id"), "end-user")
      assert.strictEqual(span!.attributes.get("gateway.provider"), "a")
      assert.strictEqual(span!.traceId, "4bf92f3577b34da6a3ce929d0e0e4736")
      assert.strictEqual(Option.getOrThrow(span!.parent).spanId, "00f067aa0ba902b7")
      assert.strictEqual(span!.status._tag, "Ended")
    }))
})
