import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { Catalogue, Upstream } from "@model-gateway/core"
import { SpeechReferences } from "@model-gateway/core"
import { Effect, Either, Exit, Scope } from "effect"
import { execFile } from "node:child_process"
import * as EspeakVoices from "../../src/speech/EspeakVoices.js"
import * as LocalSpeech from "../../src/speech/LocalSpeech.js"
import { mp3Frames, mp3Seconds, rms, samplesOf } from "../fakes/index.js"

const endpoint: Catalogue.Endpoint = {
  id: "local/espeak-ng@local",
  modelId: "local/espeak-ng",
  provider: "local",
  upstreamModel: "espeak-ng",
  pricing: { prompt: "0", completion: "0", request: "0", image: "0" },
  zdr: true,
  dataCollection: "deny",
  supportsVoiceCloning: false,
  supportsMultipleAudioReferences: false,
  supportsImageReference: false
}

const SENTENCE = "The quick brown fox jumps over the lazy dog, and then it runs far away into the forest."
const WORDS = SENTENCE.split(/\s+/).length

const call = (fields: Partial<Upstream.SpeechCall> = {}): Upstream.SpeechCall => ({
  endpoint,
  input: SENTENCE,
  voice: "en-us",
  format: "pcm",
  speed: undefined,
  references: SpeechReferences.NONE,
  options: undefined,
  ...fields
})

let scope: Scope.CloseableScope
let engine: Upstream.UpstreamService

beforeAll(async () => {
  scope = Effect.runSync(Scope.make())
  engine = await Effect.runPromise(Scope.extend(LocalSpeech.make({ workers: 2, maxInputChars: 5000 }), scope))
})
afterAll(() => Effect.runPromise(Scope.close(scope, Exit.void)))

const concat = (chunks: ReadonlyArray<Uint8Array>) => {
  const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0))
  let offset = 0
  for (const c of chunks) {
    all.set(c, offset)
    offset += c.length
  }
  return all
}

const synthesize = (c: Upstream.SpeechCall) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const audio = yield* engine.speech!(c)
    const chunks: Array<Uint8Array> = []
    for (;;) {
      const bytes = yield* audio.pull
      if (bytes === undefined) break
      chunks.push(bytes)
    }
    return { contentType: audio.contentType, bytes: concat(chunks), chunks: chunks.length }
  })))

const failureOf = async (c: Upstream.SpeechCall) => {
  const result = await Effect.runPromise(Effect.either(Effect.scoped(engine.speech!(c))))
  if (Either.isRight(result)) assert.fail("expected a failure")
  return result.left
}

/** Speech at eSpeak's default rate: 175 words a minute, some 0.34 s a word; allow for pauses and slow words. */
const plausible = (seconds: number, words: number, speed = 1) => {
  const expected = (words / (LocalSpeech.BASE_WORDS_PER_MINUTE * speed)) * 60
  assert.isAbove(seconds, expected * 0.6, `${seconds} s for ${words} words`)
  assert.isBelow(seconds, expected * 1.8, `${seconds} s for ${words} words`)
}

describe("LocalSpeech (eSpeak NG in worker threads)", () => {
  it("pcm: 24 kHz 16-bit samples, as long as the sentence takes to say, not silence", async () => {
    const result = await synthesize(call())
    assert.strictEqual(result.contentType, "audio/pcm;rate=24000;channels=1")
    assert.strictEqual(result.bytes.length % 2, 0)
    const samples = samplesOf(result.bytes)
    const seconds = samples.length / LocalSpeech.PCM_RATE
    plausible(seconds, WORDS)
    assert.isAbove(rms(samples), 500, "the audio is not silence")
    // Speech, not a constant: a good part of 20 ms windows are loud, and some are quiet (pauses between words).
    const window = LocalSpeech.PCM_RATE / 50
    const levels: Array<number> = []
    for (let i = 0; i + window <= samples.length; i += window) levels.push(rms(samples.subarray(i, i + window)))
    assert.isAbove(levels.filter((l) => l > 1000).length, levels.length * 0.3)
    assert.isAbove(levels.filter((l) => l < 200).length, 2)
  })

  it("mp3: a stream of valid MPEG layer III frames at eSpeak's 22.05 kHz, as long as the pcm", async () => {
    const pcm = await synthesize(call())
    const mp3 = await synthesize(call({ format: "mp3" }))
    assert.strictEqual(mp3.contentType, "audio/mpeg")
    assert.strictEqual(mp3.bytes[0], 0xff, "starts with a frame sync")
    assert.strictEqual(mp3.bytes[1] & 0xe0, 0xe0)
    const frames = mp3Frames(mp3.bytes)
    assert.isAbove(frames.length, 10)
    for (const frame of frames) {
      assert.strictEqual(frame.sampleRate, 22050)
      assert.strictEqual(frame.bitrate, LocalSpeech.MP3_BITRATE)
    }
    const pcmSeconds = pcm.bytes.length / 2 / LocalSpeech.PCM_RATE
    assert.approximately(mp3Seconds(mp3.bytes), pcmSeconds, 0.15)
  })

  it("speed multiplies the speaking rate", async () => {
    const normal = (await synthesize(call())).bytes.length
    const fast = (await synthesize(call({ speed: 2 }))).bytes.length
    assert.approximately(fast / normal, 0.5, 0.15)
    plausible(fast / 2 / LocalSpeech.PCM_RATE, WORDS, 2)
  })

  it("voices: languages and variants, ignoring case; an unknown voice is a 400", async () => {
    const french = await synthesize(call({ voice: "FR-fr+F3", input: "Bonjour tout le monde, comment allez-vous ?" }))
    assert.isAbove(rms(samplesOf(french.bytes)), 500)
    const error = await failureOf(call({ voice: "klingon" }))
    assert.strictEqual(error.kind, "invalid_request")
    assert.include(error.message, "no voice 'klingon'")
    assert.strictEqual(EspeakVoices.resolve(undefined), "en-us")
    assert.strictEqual(EspeakVoices.resolve("en-US+WHISPER"), "en-us+whisper")
    assert.isUndefined(EspeakVoices.resolve("en-us+nope"))
    for (const voice of EspeakVoices.CATALOGUE_VOICES) assert.isDefined(EspeakVoices.resolve(voice), voice)
  })

  it("options: pitch changes the voice; bad values, references and long inputs are refused", async () => {
    const low = await synthesize(call({ options: { pitch: 10 } }))
    const high = await synthesize(call({ options: { pitch: 90 } }))
    assert.notDeepEqual(low.bytes.slice(0, 4000), high.bytes.slice(0, 4000))
    assert.strictEqual((await failureOf(call({ options: { pitch: 200 } }))).kind, "invalid_request")
    const clip = SpeechReferences.check([{ type: "input_audio", input_audio: { data: "UklGRg==" } }])
    assert.strictEqual((await failureOf(call({ references: Either.getOrThrow(clip) }))).kind, "unsupported")
    const long = await failureOf(call({ input: "a ".repeat(3000) }))
    assert.strictEqual(long.kind, "invalid_request")
    assert.include(long.message, "at most 5000 characters")
  })

  it("a long input streams in many chunks without stalling the event loop", async () => {
    const paragraph = `${SENTENCE} `.repeat(30)
    // What this machine's own scheduling does to a 5 ms timer over a second, without any synthesis: on a loaded CI
    // machine timers fire late whatever the code does, and that lateness is not the engine's.
    const control = await new Promise<number>((resolve) => {
      let late = 0
      let previous = Date.now()
      const tick = setInterval(() => {
        const now = Date.now()
        late = Math.max(late, now - previous)
        previous = now
      }, 5)
      setTimeout(() => {
        clearInterval(tick)
        resolve(late)
      }, 1000)
    })
    let worst = 0
    let last = Date.now()
    const timer = setInterval(() => {
      const now = Date.now()
      worst = Math.max(worst, now - last)
      last = now
    }, 5)
    try {
      const started = Date.now()
      const result = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
        const audio = yield* engine.speech!(call({ input: paragraph, format: "mp3" }))
        const first = Date.now() - started
        const chunks: Array<Uint8Array> = []
        for (;;) {
          const bytes = yield* audio.pull
          if (bytes === undefined) break
          chunks.push(bytes)
        }
        return { first, total: Date.now() - started, chunks: chunks.length, bytes: concat(chunks) }
      })))
      plausible(mp3Seconds(result.bytes), WORDS * 30)
      assert.isAbove(result.chunks, 5)
      assert.isBelow(result.first, result.total, "the first audio came before the end")
      // Synthesis on the event loop would stall it for seconds (the whole paragraph) or a sentence's time at least.
      assert.isBelow(worst, 150 + control, `the event loop stalled for ${worst} ms (${control} ms without synthesis)`)
    } finally {
      clearInterval(timer)
    }
  })

  it("closing the scope cancels a job; the engine goes on serving", async () => {
    const paragraph = `${SENTENCE} `.repeat(40)
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const audio = yield* engine.speech!(call({ input: paragraph, format: "mp3" }))
      yield* audio.pull
    })))
    const started = Date.now()
    await Promise.all([synthesize(call()), synthesize(call()), synthesize(call({ format: "mp3" }))])
    assert.isBelow(Date.now() - started, 10_000)
  })

  it("runs its engine threads without the process's preloads (one that ends threads)", async () => {
    // The built package, in a process whose preload ends any thread it runs in: inherited, it ended every job.
    const built = new URL("../../dist/index.js", import.meta.url).href
    const preload =
      "data:text/javascript,import{isMainThread}from'node:worker_threads';if(!isMainThread)process.exit(2)"
    const script = `import { Effect } from "effect"
      import { SpeechReferences } from "@model-gateway/core"
      import { LocalSpeech } from ${JSON.stringify(built)}
      const call = ${JSON.stringify(call())}
      call.references = SpeechReferences.NONE
      const bytes = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
        const engine = yield* LocalSpeech.make({ workers: 1, maxInputChars: 5000 })
        const audio = yield* engine.speech(call)
        let total = 0
        for (;;) {
          const chunk = yield* audio.pull
          if (chunk === undefined) return total
          total += chunk.byteLength
        }
      })))
      console.log(bytes)`
    const result = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ["--import", preload, "--input-type=module", "-e", script],
        { cwd: new URL("../..", import.meta.url).pathname },
        (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr })
      )
    })
    assert.strictEqual(result.code, 0, result.stderr)
    // A second of 24 kHz 16-bit PCM at least: the sentence was spoken.
    assert.isAbove(Number(result.stdout.trim()), 48_000, result.stderr)
  })

  it("is speech only: messages are unsupported", async () => {
    const result = await Effect.runPromise(
      Effect.either(engine.createMessage({ endpoint, body: {}, headers: {} }))
    )
    assert.isTrue(Either.isLeft(result) && result.left.kind === "unsupported")
  })
})
