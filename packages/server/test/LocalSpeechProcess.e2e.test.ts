/**
 * Local speech through the real server process, started the way the README's speech section tells a user to: `node
 * packages/server/dist/bundle/model-gateway.js` with no configuration file at all (the built-in catalogue always serves
 * `local/espeak-ng`), on a free port (`PORT=0`), with its SQLite storage in a temporary directory, and the management
 * key it generates and prints. `POST /v1/audio/speech` in OpenAI's shape (`model`, `input`, `voice`,
 * `response_format`), for each format the gateway has (mp3 and pcm; wav is a 400): the audio is decoded (MP3 frame
 * headers and side information, pcm samples), must not be silent, and must last as long as its text takes to say;
 * bad requests get the generic 400 body; the audio is streamed as it is made; SIGTERM stops the process cleanly.
 *
 * `espeak-ng` is an optional dependency. Without it, as with PostgreSQL and Redis: with CI=true this suite runs and
 * fails (saying why), otherwise it is skipped with a printed reason.
 */
import { LocalSpeech } from "@model-gateway/provider-adapters"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { request } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Mp3Frame } from "../../../packages/provider-adapters/test/fakes/index.js"
import { mp3Frames, rms, samplesOf } from "../../../packages/provider-adapters/test/fakes/index.js"
import { listening, MAIN, printed, type Proc, run } from "./processes.js"

const installed = LocalSpeech.installed()
const skip = process.env.CI !== "true" && !installed
if (skip) {
  console.warn(
    "the optional package espeak-ng is not installed: skipping local speech through the server process " +
      "(CI is not \"true\")"
  )
}

const MODEL = "local/espeak-ng"
/** How long a start may take on a loaded machine. */
const START_MS = 60_000

let proc: Proc | undefined
let dir: string
let url: string
let key: string

// -----------------------------------------------------------------------------
// requests
// -----------------------------------------------------------------------------

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly bytes: Uint8Array
  /** How many reads the body took: more than one when it came in pieces. */
  readonly reads: number
  /** Milliseconds from the request to the first body bytes, and to the end of the body. */
  readonly firstAt: number
  readonly total: number
}

const post = (body: unknown, bearer: string = key) =>
  fetch(`${url}/v1/audio/speech`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${bearer}` },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

/** Posts a speech request and reads the whole answer, timing its pieces. */
const speak = async (body: unknown, bearer?: string): Promise<Answer> => {
  const started = performance.now()
  const response = await post(body, bearer)
  const parts: Array<Uint8Array> = []
  let firstAt = -1
  const reader = response.body!.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    if (value.byteLength === 0) continue
    if (firstAt < 0) firstAt = performance.now() - started
    parts.push(value)
  }
  const total = performance.now() - started
  const bytes = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0))
  let offset = 0
  for (const part of parts) {
    bytes.set(part, offset)
    offset += part.byteLength
  }
  return { status: response.status, headers: response.headers, bytes, reads: parts.length, firstAt, total }
}

/**
 * Posts a speech request, reads the first piece of its answer, then goes away, closing the connection (as a player
 * stopped mid-way does); the size of that piece. Not with fetch: Node's fetch opens a new connection to the server
 * when a body is cancelled, and a connection that never sends a request holds up the gateway's graceful shutdown
 * for its whole grace period (30 s), which the last test would wait through.
 */
const abandon = (body: unknown) =>
  new Promise<number>((resolve, reject) => {
    const payload = JSON.stringify(body)
    let settled = false
    const req = request(`${url}/v1/audio/speech`, {
      method: "POST",
      agent: false,
      headers: {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(payload),
        authorization: `Bearer ${key}`
      }
    }, (res) => {
      res.once("data", (chunk: Buffer) => {
        settled = true
        req.destroy()
        if (res.statusCode === 200) resolve(chunk.byteLength)
        else reject(new Error(`status ${res.statusCode}: ${chunk.toString()}`))
      })
    })
    req.on("error", (error) => {
      if (!settled) reject(error)
    })
    req.end(payload)
  })

const expectAudio = (answer: Answer, contentType: string) => {
  const text = answer.status === 200 ? "" : new TextDecoder().decode(answer.bytes)
  expect(answer.status, text).toBe(200)
  expect(answer.headers.get("content-type")).toBe(contentType)
  expect(answer.headers.get("cache-control")).toBe("no-store")
  expect(answer.headers.get("request-id")).toMatch(/^req_[0-9a-f]{32}$/)
  // Streamed as it is made: no length known in advance.
  expect(answer.headers.get("content-length")).toBeNull()
  expect(answer.headers.get("transfer-encoding")).toBe("chunked")
}

// -----------------------------------------------------------------------------
// decoding
// -----------------------------------------------------------------------------

const MP3 = "audio/mpeg"
const PCM = "audio/pcm;rate=24000;channels=1"
const PCM_RATE = 24_000

interface DecodedFrame extends Mp3Frame {
  readonly mono: boolean
  /** The first granule's `part2_3_length`: its bits of scale factors and Huffman-coded spectrum; 0 in silence. */
  readonly codedBits: number
}

/** Reads `count` bits of `bytes` from bit `at` (most significant first). */
const bitsAt = (bytes: Uint8Array, at: number, count: number): number => {
  let value = 0
  for (let i = at; i < at + count; i++) value = (value << 1) | ((bytes[i >> 3] >> (7 - (i & 7))) & 1)
  return value
}

/**
 * The MP3's frames (every one where the previous ended, each with a valid layer III sync and header: `mp3Frames`
 * throws otherwise), with their channel mode and, from the side information of mono frames, how much coded audio
 * each carries.
 */
const mp3Of = (bytes: Uint8Array): Array<DecodedFrame> =>
  mp3Frames(bytes).map((frame) => {
    const b1 = bytes[frame.offset + 1]
    const mpeg1 = ((b1 >> 3) & 0x03) === 3
    const crc = (b1 & 0x01) === 0
    const mono = bytes[frame.offset + 3] >> 6 === 3
    // Mono side information: main_data_begin (9 bits in MPEG-1, 8 in MPEG-2 and 2.5), private bits (5 / 1), MPEG-1's
    // scfsi (4), then the first granule's part2_3_length (12).
    const sideInfo = (frame.offset + 4 + (crc ? 2 : 0)) * 8
    const codedBits = mono ? bitsAt(bytes, sideInfo + (mpeg1 ? 9 + 5 + 4 : 8 + 1), 12) : -1
    return { ...frame, mono, codedBits }
  })

const mp3Seconds = (frames: ReadonlyArray<Mp3Frame>) => frames.reduce((s, f) => s + f.samples / f.sampleRate, 0)

/** 20 ms windows' RMS: speech has loud windows (words) and quiet ones (gaps, the end). */
const envelope = (samples: Int16Array) => {
  const size = PCM_RATE / 50
  const windows: Array<number> = []
  for (let i = 0; i + size <= samples.length; i += size) windows.push(rms(samples.subarray(i, i + size)))
  return windows
}

/** The pcm's samples, checked: whole 16-bit samples, speech-like loudness. */
const pcmOf = (bytes: Uint8Array) => {
  expect(bytes.byteLength % 2).toBe(0)
  const samples = samplesOf(bytes)
  expect(rms(samples), "the audio is silent").toBeGreaterThan(500)
  const windows = envelope(samples)
  expect(windows.filter((r) => r > 300).length / windows.length, "too few loud windows").toBeGreaterThan(0.4)
  expect(windows.filter((r) => r < 100).length, "no gap anywhere").toBeGreaterThan(0)
  return samples
}

// -----------------------------------------------------------------------------
// texts and their durations
// -----------------------------------------------------------------------------

const SHORT = "Hello there, this is a test of local speech."
const PANGRAM = "The quick brown fox jumps over the lazy dog."
const LONG = Array(4).fill(PANGRAM).join(" ")
const wordsOf = (text: string) => text.split(/\s+/).length

/** A duration a text takes at eSpeak's 175 words a minute (at `speed`), with room for pauses and slow words. */
const plausible = (seconds: number, text: string, speed = 1) => {
  expect(seconds).toBeGreaterThan(0.5)
  const expected = (wordsOf(text) / (175 * speed)) * 60
  expect(seconds).toBeGreaterThan(expected * 0.6)
  expect(seconds).toBeLessThan(expected * 1.8)
}

// -----------------------------------------------------------------------------
// the process
// -----------------------------------------------------------------------------

describe.skipIf(skip)("local speech through the server process (zero configuration)", { timeout: 60_000 }, () => {
  beforeAll(async () => {
    if (!installed) {
      throw new Error(
        "the optional package espeak-ng is not installed (npm ci installs it unless --omit=optional): " +
          "local speech cannot be tested, and CI=true does not skip it"
      )
    }
    if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\` (npm test does) first`)
    dir = mkdtempSync(join(tmpdir(), "mg-local-speech-"))
    // The environment has no provider keys and no GATEWAY_CONFIG, and the directory no gateway.config.json.
    proc = run({ PORT: "0" }, dir)
    url = await listening(proc, START_MS)
    key = await printed(proc, /generated a management key.*\n\s+(mg-\S+)\s/, "the generated key", START_MS)
  }, START_MS + 30_000)

  afterAll(async () => {
    const child = proc?.child
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM")
      const stopped = await Promise.race([
        proc!.exited.then(() => true),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 20_000))
      ])
      if (!stopped) child.kill("SIGKILL")
    }
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  }, 30_000)

  it("starts with no configuration, serving local/espeak-ng from the built-in catalogue, on SQLite in ./data", async () => {
    expect(proc!.output).toContain("no configuration file")
    expect(proc!.output).toMatch(/\d+ model\(s\): [^\n]*local\/espeak-ng/)
    expect(existsSync(join(dir, "data", "gateway.db"))).toBe(true)
    const models = await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })
    expect(models.status).toBe(200)
    const list = (await models.json()) as { data: Array<{ id: string; architecture: any }> }
    const model = list.data.find((m) => m.id === MODEL)
    expect(model?.architecture.output_modalities).toEqual(["audio"])
  })

  it("mp3: audio/mpeg, contiguous layer III frames at 22.05 kHz mono 64 kbit/s carrying sound, as long as the text", async () => {
    const answer = await speak({ model: MODEL, input: SHORT, voice: "en-us", response_format: "mp3" })
    expectAudio(answer, MP3)
    const frames = mp3Of(answer.bytes)
    expect(frames.length).toBeGreaterThan(20)
    for (const frame of frames) {
      expect(frame).toMatchObject({ sampleRate: 22050, bitrate: 64, samples: 576, mono: true })
    }
    // Silence codes to 0 bits; speech to hundreds a frame.
    const sounding = frames.filter((f) => f.codedBits > 100)
    expect(sounding.length / frames.length, "the MP3 is (mostly) silent").toBeGreaterThan(0.5)
    const seconds = mp3Seconds(frames)
    expect(seconds).toBeLessThan(10)
    plausible(seconds, SHORT)
  })

  it("pcm: 24 kHz 16-bit mono samples of speech, as long as the text, and as long as the mp3 of it", async () => {
    const answer = await speak({ model: MODEL, input: SHORT, voice: "en-us", response_format: "pcm" })
    expectAudio(answer, PCM)
    const seconds = pcmOf(answer.bytes).length / PCM_RATE
    expect(seconds).toBeLessThan(10)
    plausible(seconds, SHORT)
    const mp3 = await speak({ model: MODEL, input: SHORT, voice: "en-us", response_format: "mp3" })
    // The encoder's delay and padding: a frame or a few (26 ms each).
    expect(Math.abs(mp3Seconds(mp3Of(mp3.bytes)) - seconds)).toBeLessThan(0.2)
  })

  it("without voice and response_format: pcm in en-us, the same audio as asked for explicitly", async () => {
    const implicit = await speak({ model: MODEL, input: SHORT })
    expectAudio(implicit, PCM)
    const explicit = await speak({ model: MODEL, input: SHORT, voice: "en-us", response_format: "pcm" })
    expect(Buffer.from(implicit.bytes).equals(Buffer.from(explicit.bytes))).toBe(true)
  })

  it("longer text gives longer audio, speed 2 shorter, in both formats", async () => {
    const short = pcmOf((await speak({ model: MODEL, input: SHORT, response_format: "pcm" })).bytes).length
    const long = await speak({ model: MODEL, input: LONG, response_format: "pcm" })
    expectAudio(long, PCM)
    const longSeconds = pcmOf(long.bytes).length / PCM_RATE
    plausible(longSeconds, LONG)
    expect(longSeconds).toBeGreaterThan((2.5 * short) / PCM_RATE)
    const fast = await speak({ model: MODEL, input: LONG, response_format: "pcm", speed: 2 })
    expectAudio(fast, PCM)
    const fastSeconds = pcmOf(fast.bytes).length / PCM_RATE
    plausible(fastSeconds, LONG, 2)
    expect(fastSeconds / longSeconds).toBeGreaterThan(0.3)
    expect(fastSeconds / longSeconds).toBeLessThan(0.75)
    const longMp3 = await speak({ model: MODEL, input: LONG, response_format: "mp3" })
    expectAudio(longMp3, MP3)
    expect(Math.abs(mp3Seconds(mp3Of(longMp3.bytes)) - longSeconds)).toBeLessThan(0.2)
  })

  it("other voices and variants speak too, each its own way", async () => {
    const base = await speak({ model: MODEL, input: SHORT, voice: "en-us" })
    for (const [voice, input] of [["en-gb", SHORT], ["en-us+f3", SHORT], ["fr-fr", "Bonjour, ceci est un essai."]]) {
      const answer = await speak({ model: MODEL, input, voice, response_format: "pcm" })
      expectAudio(answer, PCM)
      plausible(pcmOf(answer.bytes).length / PCM_RATE, input)
      expect(Buffer.from(answer.bytes).equals(Buffer.from(base.bytes)), voice).toBe(false)
    }
  })

  it("bad requests are 400s with the generic body naming the field, never a 5xx; a wrong key is a 401", async () => {
    const cases: Array<[string, unknown, RegExp]> = [
      ["an unknown voice", { model: MODEL, input: "Hello.", voice: "klingon" }, /^voice: .*'klingon'/],
      ["an empty voice", { model: MODEL, input: "Hello.", voice: "" }, /^voice: must not be empty/],
      ["an empty input", { model: MODEL, input: "", voice: "en-us" }, /^input: must not be empty/],
      ["no input", { model: MODEL, voice: "en-us" }, /^input: is missing/],
      [
        "an input over the engine's 20,000 characters",
        { model: MODEL, input: "word ".repeat(4001), voice: "en-us", response_format: "mp3" },
        /^input: the local speech engine takes at most 20000 characters, got 20005$/
      ],
      [
        "wav (not a format the gateway has)",
        { model: MODEL, input: "Hello.", response_format: "wav" },
        /^response_format: /
      ],
      ["speed 0", { model: MODEL, input: "Hello.", speed: 0 }, /^speed: must be a number greater than 0/],
      ["a body that is not JSON", "{\"model\": ", /./]
    ]
    for (const [what, body, message] of cases) {
      const response = await post(body)
      expect(response.status, what).toBe(400)
      expect(response.headers.get("content-type"), what).toBe("application/json")
      const json = (await response.json()) as { error: Record<string, unknown> }
      expect(Object.keys(json), what).toEqual(["error"])
      expect(json.error.code, what).toBe(400)
      expect(json.error.message, what).toMatch(message)
      for (const field of Object.keys(json.error)) expect(["code", "message", "metadata"], what).toContain(field)
    }
    const unauthorized = await post({ model: MODEL, input: "Hello." }, "mg-not-a-key")
    expect(unauthorized.status).toBe(401)
    expect(((await unauthorized.json()) as any).error.code).toBe(401)
    const unknown = await post({ model: "local/nothing", input: "Hello." })
    expect(unknown.status).toBe(404)
    expect(((await unknown.json()) as any).error.code).toBe(404)
    // And the engine still speaks.
    expectAudio(await speak({ model: MODEL, input: "Still here." }), PCM)
  })

  it("streams: the first audio arrives long before a long MP3 is finished; a client that goes away frees the engine", async () => {
    const input = Array(40).fill(PANGRAM).join(" ")
    const answer = await speak({ model: MODEL, input, voice: "en-us", response_format: "mp3" })
    expectAudio(answer, MP3)
    expect(answer.reads).toBeGreaterThan(5)
    // MP3 encoding is the slow part (some 2 s of CPU here): the first chunk leaves as soon as it is made.
    expect(answer.firstAt).toBeLessThan(answer.total / 2)
    plausible(mp3Seconds(mp3Of(answer.bytes)), input)

    // Read one piece of three such requests (more than the engine's two workers), then go away: every job must be
    // cancelled. A job left running with no reader would hold its worker for good (it waits for the reader past
    // 256 KiB unread), and the next request would wait for a worker until it timed out.
    const abandoned = await Promise.all(
      [0, 1, 2].map(() => abandon({ model: MODEL, input, voice: "en-us", response_format: "mp3" }))
    )
    for (const bytes of abandoned) expect(bytes).toBeGreaterThan(0)
    const next = await speak({ model: MODEL, input: SHORT, response_format: "mp3" })
    expectAudio(next, MP3)
    plausible(mp3Seconds(mp3Of(next.bytes)), SHORT)
  })

  it("logged every request, none with a 5xx; stops on SIGTERM with exit code 0", async () => {
    const output = proc!.output
    expect(output).toMatch(/POST \/v1\/audio\/speech 200 local\/espeak-ng via local /)
    expect(output).toMatch(/POST \/v1\/audio\/speech 400 invalid_request_error /)
    expect(output).not.toMatch(/POST \/v1\/audio\/speech 5\d\d /)
    // The generated key is printed once, at the start, and never logged.
    expect(output.split(key).length - 1).toBe(1)
    const started = performance.now()
    proc!.child.kill("SIGTERM")
    expect(await proc!.exited).toBe(0)
    expect(proc!.output).toContain("stopped")
    // Nothing is in flight and keep-alive connections are idle: no waiting out the 30 s grace period.
    expect(performance.now() - started).toBeLessThan(15_000)
  })
})
