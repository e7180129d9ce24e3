import { afterAll, assert, beforeAll, beforeEach, describe, it } from "@effect/vitest"
import type { Catalogue, Upstream } from "@model-gateway/core"
import { SpeechReferences } from "@model-gateway/core"
import { Effect, Either, Exit, Scope } from "effect"
import * as OpenAiSpeech from "../../src/speech/OpenAiSpeech.js"
import type { FakeUpstream } from "../fakes/index.js"
import {
  FAKE_SECONDS_PER_CHAR,
  freePortThatRefuses,
  mp3Seconds,
  rms,
  samplesOf,
  startFakeOpenAi
} from "../fakes/index.js"

const endpoint: Catalogue.Endpoint = {
  id: "tts/one@acme",
  modelId: "tts/one",
  provider: "acme",
  upstreamModel: "tts-fake-1",
  pricing: { prompt: "0.000015", completion: "0", request: "0", image: "0" },
  zdr: false,
  dataCollection: "allow",
  supportsVoiceCloning: false,
  supportsMultipleAudioReferences: false,
  supportsImageReference: false
}

const INPUT = "Hello from the fake speech server."

const call = (fields: Partial<Upstream.SpeechCall> = {}): Upstream.SpeechCall => ({
  endpoint,
  input: INPUT,
  voice: "alloy",
  format: "mp3",
  speed: undefined,
  references: SpeechReferences.NONE,
  options: undefined,
  ...fields
})

/** No control character nor replacement character (an undecodable byte). */
const printable = (text: string): boolean => [...text].every((c) => c >= " " && c !== "\ufffd")

let fake: FakeUpstream
let scope: Scope.CloseableScope
let speech: (c: Upstream.SpeechCall) => Effect.Effect<Upstream.SpeechAudio, Upstream.UpstreamError, Scope.Scope>
// Short enough for the time-out tests, long enough that a loaded machine (the full suite on two cores) answers in time.
const timeouts = { firstByteMs: 3000, idleMs: 3000, requestMs: 6000 }

beforeAll(async () => {
  fake = await startFakeOpenAi({ apiKey: "sk-speech" })
  scope = Effect.runSync(Scope.make())
  speech = await Effect.runPromise(
    Scope.extend(OpenAiSpeech.make({ baseUrl: fake.url, apiKey: "sk-speech", timeouts }), scope)
  )
})
afterAll(async () => {
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await fake.close()
})
beforeEach(() => fake.reset())

/** Reads the whole audio, with the time each pull came back (ms since the call). */
const read = (c: Upstream.SpeechCall) =>
  Effect.scoped(Effect.gen(function*() {
    const start = Date.now()
    const audio = yield* speech(c)
    const chunks: Array<Uint8Array> = []
    const times: Array<number> = []
    for (;;) {
      const bytes = yield* audio.pull
      if (bytes === undefined) break
      chunks.push(bytes)
      times.push(Date.now() - start)
    }
    const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0))
    let offset = 0
    for (const c of chunks) {
      all.set(c, offset)
      offset += c.length
    }
    return { contentType: audio.contentType, bytes: all, times, total: Date.now() - start }
  }))

const failureOf = async (c: Upstream.SpeechCall) => {
  const result = await Effect.runPromise(Effect.either(read(c)))
  if (Either.isRight(result)) assert.fail("expected the call to fail")
  return result.left
}

describe("OpenAiSpeech", () => {
  it("mp3: POST {baseUrl}/audio/speech with the fields and this provider's options; MP3 frames back", async () => {
    const result = await Effect.runPromise(read(call({ speed: 1.5, options: { instructions: "calm", model: "x" } })))
    assert.strictEqual(result.contentType, "audio/mpeg")
    const [request] = fake.requests
    assert.strictEqual(request.path, "/v1/audio/speech")
    assert.strictEqual(request.headers.authorization, "Bearer sk-speech")
    assert.deepStrictEqual(request.body, {
      instructions: "calm",
      model: "tts-fake-1",
      input: INPUT,
      voice: "alloy",
      response_format: "mp3",
      speed: 1.5
    })
    const expected = (INPUT.length * FAKE_SECONDS_PER_CHAR) / 1.5
    assert.approximately(mp3Seconds(result.bytes), expected, 0.15)
  })

  it("pcm: 24 kHz 16-bit samples of the right length, not silence", async () => {
    const result = await Effect.runPromise(read(call({ format: "pcm" })))
    assert.strictEqual(result.contentType, "audio/pcm;rate=24000;channels=1")
    const samples = samplesOf(result.bytes)
    assert.approximately(samples.length / 24000, INPUT.length * FAKE_SECONDS_PER_CHAR, 0.01)
    assert.isAbove(rms(samples), 1000)
  })

  it("the bytes are handed on as they arrive, not when the upstream has finished", async () => {
    fake.script({ kind: "ok", chunkDelayMs: 100 })
    const result = await Effect.runPromise(read(call({ format: "pcm" })))
    assert.isAtLeast(result.times.length, 4)
    assert.isBelow(result.times[0], result.total - 500, `first bytes at ${result.times[0]} ms of ${result.total}`)
  })

  it("sends the references as input_references", async () => {
    const references = SpeechReferences.check([
      { type: "input_audio", input_audio: { data: "data:audio/wav;base64,UklGRg==", format: "wav" } },
      { type: "text", text: "the transcript" }
    ])
    await Effect.runPromise(read(call({ references: Either.getOrThrow(references) })))
    assert.deepStrictEqual(fake.requests[0].body.input_references, [
      { type: "input_audio", input_audio: { data: "data:audio/wav;base64,UklGRg==", format: "wav" } },
      { type: "text", text: "the transcript" }
    ])
  })

  it("error statuses are classified when opening, with Retry-After", async () => {
    const cases = [
      [429, "rate_limited"],
      [500, "server_error"],
      [503, "overloaded"],
      [529, "overloaded"],
      [400, "invalid_request"],
      [401, "auth"],
      [404, "not_found"]
    ] as const
    for (const [status, kind] of cases) {
      fake.script({ kind: "status", status })
      const error = await failureOf(call())
      assert.strictEqual(error.kind, kind, `status ${status}`)
      assert.strictEqual(error.status, status)
      if (status === 429) assert.strictEqual(error.retryAfterMs, 1000)
    }
    fake.reset()
    const missing = await failureOf(call({ voice: undefined }))
    assert.isFalse("voice" in fake.requests[0].body, "no voice is sent when the request names none")
    assert.strictEqual(missing.kind, "invalid_request")
    assert.include(missing.message, "voice")
  })

  it("a JSON body with a 200 is a failure, not audio", async () => {
    fake.script({ kind: "malformed", afterEvents: 0 })
    const error = await failureOf(call())
    assert.strictEqual(error.kind, "server_error")
    assert.include(error.message, "instead of audio")
  })

  it("audio of another format than asked for is a failure, not audio labelled as asked", async () => {
    const answering = (contentType: string, body = "\u0001\u0002binary\u0000audio\ufffd") =>
      fake.script({ kind: "status", status: 200, body, headers: { "content-type": contentType } })
    for (
      const [format, type] of [
        ["mp3", "audio/pcm;rate=24000"],
        ["mp3", "audio/wav"],
        ["pcm", "audio/mpeg"],
        ["pcm", "Audio/MP3"]
      ] as const
    ) {
      answering(type)
      const error = await failureOf(call({ format }))
      assert.strictEqual(error.kind, "server_error", `${type} for ${format}`)
      assert.include(error.message, `where ${format} was asked for`)
      // the body quoted briefly and printably
      assert.isTrue(printable(error.message), error.message)
    }
    // a generic or matching type is the format asked for
    for (
      const [format, type] of [["mp3", "application/octet-stream"], ["pcm", "audio/pcm"], [
        "mp3",
        "audio/mpeg"
      ]] as const
    ) {
      answering(type, "abc")
      const audio = await Effect.runPromise(Effect.scoped(Effect.map(speech(call({ format })), (a) => a.contentType)))
      assert.match(audio, format === "mp3" ? /^audio\/mpeg$/ : /^audio\/pcm;rate=24000/)
    }
  })

  it("a body that is not audio is quoted briefly and printably", async () => {
    fake.script({
      kind: "status",
      status: 200,
      body: `<html>\n<body>${"\u0000\ufffd".repeat(50)}${"Bad gateway ".repeat(200)}</body></html>`,
      headers: { "content-type": "text/html" }
    })
    const error = await failureOf(call())
    assert.include(error.message, "instead of audio")
    assert.isTrue(printable(error.message), error.message)
    assert.isBelow(error.message.length, 400)
  })

  it("a connection cut mid-audio fails the pull after the bytes that came", async () => {
    fake.script({ kind: "cut", afterEvents: 3, chunkDelayMs: 20 })
    const outcome = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const audio = yield* speech(call())
      let bytes = 0
      for (;;) {
        const pulled = yield* Effect.either(audio.pull)
        if (Either.isLeft(pulled)) return { bytes, error: pulled.left }
        if (pulled.right === undefined) return { bytes, error: undefined }
        bytes += pulled.right.length
      }
    })))
    assert.isAbove(outcome.bytes, 0)
    assert.strictEqual(outcome.error?.kind, "transport")
  })

  it("time-outs: no head (hang) and a stall after some audio", async () => {
    fake.script({ kind: "hang" })
    assert.strictEqual((await failureOf(call())).kind, "timeout")
    fake.script({ kind: "stall", afterEvents: 2 })
    assert.strictEqual((await failureOf(call())).kind, "timeout")
  })

  it("a refused connection is a transport failure", async () => {
    const refused = await freePortThatRefuses()
    const s = Effect.runSync(Scope.make())
    const dead = await Effect.runPromise(Scope.extend(OpenAiSpeech.make({ baseUrl: refused, timeouts }), s))
    const result = await Effect.runPromise(Effect.either(Effect.scoped(dead(call()))))
    await Effect.runPromise(Scope.close(s, Exit.void))
    assert.isTrue(Either.isLeft(result))
    if (Either.isLeft(result)) assert.strictEqual(result.left.kind, "transport")
  })

  it("closing the scope mid-audio aborts the upstream request", async () => {
    fake.script({ kind: "ok", chunkDelayMs: 200 })
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const audio = yield* speech(call())
      yield* audio.pull
    })))
    const until = Date.now() + 2000
    while (fake.aborted() === 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10))
    assert.strictEqual(fake.aborted(), 1)
  })

  it("contentTypeOf: pcm takes the upstream's rate when it names one", () => {
    assert.strictEqual(OpenAiSpeech.contentTypeOf("pcm", "audio/pcm; rate=16000"), "audio/pcm;rate=16000;channels=1")
    assert.strictEqual(OpenAiSpeech.contentTypeOf("pcm", undefined), "audio/pcm;rate=24000;channels=1")
    assert.strictEqual(OpenAiSpeech.contentTypeOf("mp3", "audio/mp3"), "audio/mpeg")
  })
})
