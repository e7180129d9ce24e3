import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import * as Catalogue from "../../src/catalogue/Catalogue.js"
import * as RoutePlanner from "../../src/routing/RoutePlanner.js"
import * as SpeechReferences from "../../src/speech/SpeechReferences.js"
import * as SpeechRequest from "../../src/speech/SpeechRequest.js"
import * as SpeechRouting from "../../src/speech/SpeechRouting.js"
import { endpoint } from "../messages/Fakes.js"

const speech = (id: string, ...endpoints: ReadonlyArray<Catalogue.Endpoint>): Catalogue.Model => ({
  id,
  name: id,
  endpoints,
  outputModalities: ["audio"]
})

const snapshot = Catalogue.makeSnapshot([
  speech(
    "tts/a",
    endpoint("tts/a", "one"),
    endpoint("tts/a", "two", { supportsVoiceCloning: true }),
    endpoint("tts/a", "three", { supportsVoiceCloning: true, supportsMultipleAudioReferences: true })
  ),
  speech("tts/b", endpoint("tts/b", "four", { supportsImageReference: true })),
  { id: "chat/c", name: "chat", endpoints: [endpoint("chat/c", "five")] }
])

const clip = { type: "input_audio", input_audio: { data: "data:audio/wav;base64,UklGRg==" } }

const plan = (body: Record<string, unknown>) => {
  const request = Either.getOrThrow(SpeechRequest.validate({ input: "hi", model: "tts/a", ...body }))
  return SpeechRouting.plan(request, SpeechReferences.needs(request.references), snapshot, {
    random: RoutePlanner.seededRandom(7)
  })
}

const providers = (body: Record<string, unknown>) =>
  Either.getOrThrow(plan(body)).attempts.map((a) => a.endpoint.provider)

describe("SpeechRouting.plan", () => {
  it("every endpoint of the model without references; provider preferences apply", () => {
    assert.sameMembers(providers({}), ["one", "two", "three"])
    assert.deepStrictEqual(providers({ provider: { only: ["two"] } }), ["two"])
    assert.deepStrictEqual(providers({ provider: { order: ["three", "one"], allow_fallbacks: false } }), [
      "three",
      "one"
    ])
    assert.notInclude(providers({ provider: { ignore: ["one"] } }), "one")
  })

  it("references keep only capable endpoints, with a filter step for each other", () => {
    assert.sameMembers(providers({ input_references: [clip] }), ["two", "three"])
    assert.deepStrictEqual(providers({ input_references: [clip, clip] }), ["three"])
    const steps = Either.getOrThrow(plan({ input_references: [clip, clip] })).steps
    assert.isTrue(steps.some((s) => s.name === "filter" && s.summary.includes("tts/a via one")))
  })

  it("fallback models, speech models only, in order", () => {
    const attempts = Either.getOrThrow(
      plan({
        fallbacks: [{ model: "chat/c" }, { model: "tts/b" }],
        provider: { allow_fallbacks: false }
      })
    )
    assert.deepStrictEqual(attempts.attempts.map((a) => a.model.id), ["tts/a", "tts/b"])
    assert.isTrue(attempts.steps.some((s) => s.summary.includes("'chat/c' does not synthesize speech")))
    const image = Either.getOrThrow(
      plan({ input_references: [{ type: "image_url", image_url: { url: "https://x.test/i.png" } }], models: ["tts/b"] })
    )
    assert.deepStrictEqual(image.attempts.map((a) => a.endpoint.provider), ["four"])
  })

  it("404 for an unknown model, 400 for one that does not speak or has no capable endpoint", () => {
    const unknown = plan({ model: "nope" })
    assert.isTrue(Either.isLeft(unknown) && unknown.left._tag === "NotFound")
    const chat = plan({ model: "chat/c" })
    assert.isTrue(Either.isLeft(chat) && chat.left._tag === "InvalidRequest")
    const image = plan({ input_references: [{ type: "image_url", image_url: { url: "https://x.test/i.png" } }] })
    assert.isTrue(Either.isLeft(image) && image.left._tag === "InvalidRequest" && image.left.message.includes("image"))
    const excluded = plan({ provider: { only: ["nobody"] } })
    assert.isTrue(Either.isLeft(excluded) && excluded.left._tag === "InvalidRequest")
  })
})
