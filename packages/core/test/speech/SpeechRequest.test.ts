import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import type { SpeechRequest } from "../../src/speech/SpeechRequest.js"
import { validate } from "../../src/speech/SpeechRequest.js"

// The sample request of the specification: input, model, voice, response_format and speed.
const base = {
  input: "Hello there.",
  model: "openai/gpt-4o-mini-tts",
  voice: "alloy",
  response_format: "mp3",
  speed: 1
}

const body = (fields: Record<string, unknown>) => ({ ...base, ...fields })

const accepts = (input: unknown): SpeechRequest => {
  const result = validate(input)
  if (Either.isLeft(result)) assert.fail(`expected the body to be accepted, got: ${result.left.message}`)
  return result.right
}

/** Asserts an `InvalidRequest` whose `param` is `param` and whose message starts with it (and contains `fragment`). */
const rejects = (input: unknown, param: string | undefined, fragment?: string) => {
  const result = validate(input)
  if (Either.isRight(result)) assert.fail(`expected an InvalidRequest for ${param}, but the body was accepted`)
  const error = result.left
  assert.strictEqual(error._tag, "InvalidRequest")
  assert.strictEqual(error.param, param, error.message)
  assert.isTrue(error.message.startsWith(`${param ?? "request body"}: `), error.message)
  if (fragment !== undefined) assert.include(error.message, fragment)
  return error
}

describe("SpeechRequest.validate", () => {
  it("accepts the sample request", () => {
    const request = accepts(base)
    assert.strictEqual(request.input, "Hello there.")
    assert.strictEqual(request.model, "openai/gpt-4o-mini-tts")
    assert.strictEqual(request.voice, "alloy")
    assert.strictEqual(request.responseFormat, "mp3")
    assert.strictEqual(request.speed, 1)
    assert.deepStrictEqual(request.references, { mode: "none" })
    assert.isUndefined(request.preferences)
    assert.strictEqual(request.providerOptions.size, 0)
  })

  it("needs only input and model; response_format defaults to pcm (what the OpenRouter SDK sends)", () => {
    const request = accepts({ input: "Hi", model: "local/espeak-ng" })
    assert.strictEqual(request.responseFormat, "pcm")
    assert.isUndefined(request.voice)
    assert.isUndefined(request.speed)
  })

  it("null means absent for every optional field", () => {
    const request = accepts(body({
      voice: null,
      response_format: null,
      speed: null,
      session_id: null,
      user: null,
      input_references: null,
      provider: null,
      models: null,
      fallbacks: null,
      trace: null
    }))
    assert.strictEqual(request.responseFormat, "pcm")
    assert.isUndefined(request.voice)
  })

  it("ignores unknown fields", () => {
    accepts(body({ instructions: "cheerful", stream_format: "audio" }))
  })

  it("the body must be an object", () => {
    rejects([], undefined, "JSON object")
    rejects("text", undefined)
    rejects(null, undefined)
  })

  it("input: required, a non-empty string", () => {
    rejects({ model: "m" }, "input", "missing")
    rejects(body({ input: "" }), "input", "must not be empty")
    rejects(body({ input: 5 }), "input", "Expected string")
  })

  it("model: required string", () => {
    rejects({ input: "x" }, "model")
    rejects(body({ model: 3 }), "model", "Expected string")
    rejects(body({ model: "" }), "model", "must not be empty")
  })

  it("voice: minimum length 1", () => {
    rejects(body({ voice: "" }), "voice", "must not be empty")
    rejects(body({ voice: 1 }), "voice")
    assert.strictEqual(accepts(body({ voice: "v" })).voice, "v")
  })

  it("response_format: mp3 or pcm", () => {
    assert.strictEqual(accepts(body({ response_format: "pcm" })).responseFormat, "pcm")
    rejects(body({ response_format: "wav" }), "response_format", "\"mp3\" | \"pcm\"")
    rejects(body({ response_format: "MP3" }), "response_format")
  })

  it("speed: a number greater than 0", () => {
    assert.strictEqual(accepts(body({ speed: 0.25 })).speed, 0.25)
    assert.strictEqual(accepts(body({ speed: 4 })).speed, 4)
    rejects(body({ speed: 0 }), "speed", "greater than 0")
    rejects(body({ speed: -1 }), "speed", "greater than 0")
    rejects(body({ speed: "fast" }), "speed")
  })

  it("session_id and user: at most 256 characters (code points)", () => {
    for (const key of ["session_id", "user"]) {
      accepts(body({ [key]: "x".repeat(256) }))
      accepts(body({ [key]: "😀".repeat(256) }))
      rejects(body({ [key]: "x".repeat(257) }), key, "at most 256 characters, got 257")
      rejects(body({ [key]: "😀".repeat(257) }), key, "got 257")
      rejects(body({ [key]: 7 }), key)
    }
    const request = accepts(body({ session_id: "s-1", user: "u-1" }))
    assert.strictEqual(request.sessionId, "s-1")
    assert.strictEqual(request.user, "u-1")
  })

  describe("input_references", () => {
    it("an empty array is no reference (rule 6)", () => {
      assert.deepStrictEqual(accepts(body({ input_references: [] })).references, { mode: "none" })
    })
    it("audio and image modes", () => {
      const audio = accepts(body({
        input_references: [
          { type: "input_audio", input_audio: { data: "data:audio/wav;base64,UklGRg==" } },
          { type: "text", text: "hello" }
        ]
      })).references
      assert.strictEqual(audio.mode, "audio")
      const image = accepts(body({
        input_references: [{ type: "image_url", image_url: { url: "https://example.com/a.png" } }]
      })).references
      assert.deepStrictEqual(image, { mode: "image", url: "https://example.com/a.png" })
    })
    it("a broken rule is a 400 naming the rule and the part", () => {
      const clip = { type: "input_audio", input_audio: { data: "data:audio/wav;base64,UklGRg==" } }
      rejects(body({ input_references: [clip, clip, clip, clip] }), "input_references[3]", "rule 1")
      rejects(
        body({ input_references: [clip, { type: "text", text: "a" }, { type: "text", text: "b" }] }),
        "input_references[2]",
        "rule 2"
      )
      rejects(
        body({ input_references: [clip, { type: "image_url", image_url: { url: "https://x/y.png" } }] }),
        "input_references[1]",
        "rule 5"
      )
    })
    it("malformed parts", () => {
      rejects(body({ input_references: "x" }), "input_references")
      rejects(body({ input_references: [5] }), "input_references[0]", "reference part")
      rejects(body({ input_references: [{ type: "video" }] }), "input_references[0].type", "\"input_audio\" | \"text\"")
      rejects(body({ input_references: [{ text: "x" }] }), "input_references[0].type")
      rejects(body({ input_references: [{ type: "input_audio" }] }), "input_references[0].input_audio")
      rejects(
        body({ input_references: [{ type: "input_audio", input_audio: { data: 1 } }] }),
        "input_references[0].input_audio.data"
      )
      rejects(body({ input_references: [{ type: "text", text: 2 }] }), "input_references[0].text")
      rejects(
        body({ input_references: [{ type: "image_url", image_url: "https://x" }] }),
        "input_references[0].image_url"
      )
      rejects(
        body({ input_references: [{ type: "input_audio", input_audio: { data: "data:audio/wav;base64,%%" } }] }),
        "input_references[0]",
        "base64"
      )
    })
  })

  describe("provider", () => {
    it("options by provider name, lower-cased, beside routing preferences", () => {
      const request = accepts(body({
        provider: { options: { OpenAI: { instructions: "whisper" }, other: null }, only: ["openai"], sort: "price" }
      }))
      assert.deepStrictEqual(request.providerOptions.get("openai"), { instructions: "whisper" })
      assert.isFalse(request.providerOptions.has("other"))
      assert.deepStrictEqual(request.preferences, { only: ["openai"], sort: "price" })
    })
    it("options alone set no preferences", () => {
      assert.isUndefined(accepts(body({ provider: { options: { a: {} } } })).preferences)
    })
    it("malformed options and preferences", () => {
      rejects(body({ provider: 3 }), "provider", "Expected an object")
      rejects(body({ provider: { options: [] } }), "provider.options", "keyed by provider name")
      rejects(body({ provider: { options: { a: "x" } } }), "provider.options.a", "Expected an object")
      rejects(body({ provider: { sort: "cheap" } }), "provider.sort")
      rejects(body({ provider: { bogus: true } }), "provider.bogus")
    })
  })

  describe("models and fallbacks", () => {
    it("accepted, at most 3 fallbacks, not both", () => {
      assert.deepStrictEqual(accepts(body({ models: ["a", "b"] })).models, ["a", "b"])
      assert.deepStrictEqual(accepts(body({ fallbacks: [{ model: "a" }] })).fallbacks, [{ model: "a" }])
      rejects(
        body({ fallbacks: [{ model: "a" }, { model: "b" }, { model: "c" }, { model: "d" }] }),
        "fallbacks",
        "at most 3"
      )
      rejects(body({ fallbacks: [{}] }), "fallbacks[0].model")
      rejects(body({ models: ["a"], fallbacks: [{ model: "b" }] }), "fallbacks", "cannot be combined")
    })
  })

  describe("trace", () => {
    it("the special keys, and the others as custom metadata", () => {
      const request = accepts(body({
        trace: {
          trace_id: "t-1",
          trace_name: "tn",
          span_name: "sn",
          generation_name: "gn",
          parent_span_id: "p-1",
          customer: "acme",
          tags: ["a"]
        }
      }))
      assert.deepStrictEqual(request.trace, {
        traceId: "t-1",
        traceName: "tn",
        spanName: "sn",
        generationName: "gn",
        parentSpanId: "p-1",
        custom: { customer: "acme", tags: ["a"] }
      })
    })
    it("the special keys are strings", () => {
      rejects(body({ trace: { trace_id: 5 } }), "trace.trace_id", "Expected string")
      rejects(body({ trace: "t" }), "trace", "Expected an object")
    })
  })
})
