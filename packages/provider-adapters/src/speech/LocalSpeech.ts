/**
 * The local, offline speech engine (provider kind `local-speech`): eSpeak NG compiled to WebAssembly (the `espeak-ng`
 * package) synthesizes in worker threads (`EspeakWorker.mjs`), so a long input never stalls the gateway's event loop;
 * pcm leaves as 16-bit little-endian samples resampled to 24 kHz (OpenAI's pcm rate, so that a fallback between
 * endpoints keeps one format), MP3 is encoded in the worker with `@breezystack/lamejs` at eSpeak's own 22.05 kHz.
 * Audio is handed on chunk by chunk as the worker produces it; a reader that falls behind makes synthesis wait
 * (back-pressure through a shared counter), and a closed scope cancels the job.
 *
 * Workers start on the first request (compiling eSpeak's WebAssembly takes some 0.4 s per worker), one job each at a
 * time; more requests wait in a queue. A worker that dies fails its job and is replaced by the next request.
 *
 * `espeak-ng` is an optional dependency (it is GPL-3.0-or-later; `npm install --omit=optional` leaves it out): without
 * it the engine answers every request with an `unsupported` failure saying how to install it.
 */
import { Upstream } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { createRequire } from "node:module"
import { Worker } from "node:worker_threads"
import * as EspeakVoices from "./EspeakVoices.js"

export interface LocalSpeechOptions {
  /** Worker threads, each synthesizing one request at a time (default 2). */
  readonly workers?: number | undefined
  /** The longest input, in characters (default 20,000: some 25 minutes of speech). */
  readonly maxInputChars?: number | undefined
  /** How long a request may wait for its first audio bytes, queueing included (default 60 s). */
  readonly firstByteMs?: number | undefined
}

/** The rate of the pcm the engine answers with. */
export const PCM_RATE = 24_000
/** The MP3 bitrate, kbit/s. */
export const MP3_BITRATE = 64
/** eSpeak's default speaking rate, words per minute: `speed` multiplies it. */
export const BASE_WORDS_PER_MINUTE = 175

const DEFAULT_WORKERS = 2
const DEFAULT_MAX_INPUT_CHARS = 20_000
const DEFAULT_FIRST_BYTE_MS = 60_000

const WORKER_URL = new URL("./EspeakWorker.mjs", import.meta.url)

/** A job's messages to the gateway. */
type Message =
  | { readonly type: "chunk"; readonly id: number; readonly bytes: Uint8Array }
  | { readonly type: "end"; readonly id: number; readonly sampleRate: number }
  | { readonly type: "error"; readonly id: number; readonly message: string }

/** One synthesis: its worker message, and how its audio is read. */
class Job {
  private readonly queued: Array<Uint8Array> = []
  private queuedBytes = 0
  private ended = false
  private failure: Upstream.UpstreamError | undefined = undefined
  private waiter: ((effect: Upstream.BytePull) => void) | undefined = undefined
  private firstWaiter: ((effect: Effect.Effect<void, Upstream.UpstreamError>) => void) | undefined = undefined
  /** [0] bytes posted by the worker and not yet pulled; [1] 1 once cancelled. */
  readonly control = new Int32Array(new SharedArrayBuffer(8))
  cancelled = false
  /** The job has ended in its worker (successfully or not): the worker is free. */
  finished = false

  constructor(
    readonly id: number,
    readonly message: {
      readonly text: string
      readonly args: ReadonlyArray<string>
      readonly format: "mp3" | "pcm"
    }
  ) {}

  private take(): Upstream.BytePull | undefined {
    if (this.queued.length > 0) {
      const bytes = this.queued.length === 1 ? this.queued[0] : concat(this.queued, this.queuedBytes)
      this.queued.length = 0
      Atomics.sub(this.control, 0, this.queuedBytes)
      Atomics.notify(this.control, 0)
      this.queuedBytes = 0
      return Effect.succeed(bytes)
    }
    if (this.failure !== undefined) return Effect.fail(this.failure)
    if (this.ended) return Effect.succeed(undefined)
    return undefined
  }

  private deliver(): void {
    if (this.firstWaiter !== undefined && (this.queuedBytes > 0 || this.failure !== undefined || this.ended)) {
      const first = this.firstWaiter
      this.firstWaiter = undefined
      first(this.failure !== undefined && this.queuedBytes === 0 ? Effect.fail(this.failure) : Effect.void)
    }
    const waiter = this.waiter
    if (waiter === undefined) return
    const ready = this.take()
    if (ready === undefined) return
    this.waiter = undefined
    waiter(ready)
  }

  readonly pull: Upstream.BytePull = Effect.suspend(() => {
    const ready = this.take()
    return ready ?? Effect.async<Uint8Array | undefined, Upstream.UpstreamError>((resume) => {
      this.waiter = resume
    })
  })

  /** Waits until the job has its first bytes (or has failed, or ended without any). */
  readonly started: Effect.Effect<void, Upstream.UpstreamError> = Effect.async((resume) => {
    this.firstWaiter = resume
    this.deliver()
  })

  onMessage(message: Message): void {
    if (message.type === "chunk") {
      if (this.cancelled) {
        Atomics.sub(this.control, 0, message.bytes.byteLength)
        return
      }
      this.queued.push(message.bytes)
      this.queuedBytes += message.bytes.byteLength
    } else {
      this.finished = true
      if (message.type === "end") this.ended = true
      else this.fail(new Upstream.UpstreamError({ kind: "server_error", message: message.message }))
    }
    this.deliver()
  }

  fail(error: Upstream.UpstreamError): void {
    if (this.failure === undefined && !this.ended) this.failure = error
    this.deliver()
  }

  cancel(): void {
    this.cancelled = true
    this.waiter = undefined
    this.firstWaiter = undefined
    Atomics.store(this.control, 1, 1)
    Atomics.notify(this.control, 0)
  }
}

const concat = (parts: ReadonlyArray<Uint8Array>, size: number): Uint8Array => {
  const out = new Uint8Array(size)
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.byteLength
  }
  return out
}

interface Slot {
  readonly worker: Worker
  job: Job | undefined
}

/** The workers and the queue of jobs waiting for one. */
class Pool {
  private readonly slots: Array<Slot> = []
  private readonly waiting: Array<Job> = []
  private closed = false

  constructor(private readonly size: number) {}

  submit(job: Job): void {
    if (this.closed) {
      return job.fail(new Upstream.UpstreamError({ kind: "transport", message: "the local speech engine is closed" }))
    }
    this.waiting.push(job)
    this.dispatch()
  }

  /** A queued job that is cancelled before it starts is simply dropped. */
  withdraw(job: Job): void {
    const i = this.waiting.indexOf(job)
    if (i >= 0) this.waiting.splice(i, 1)
  }

  private dispatch(): void {
    while (this.waiting.length > 0) {
      let slot = this.slots.find((s) => s.job === undefined)
      if (slot === undefined) {
        if (this.slots.length >= this.size) return
        slot = this.spawn()
      }
      const job = this.waiting.shift()!
      slot.job = job
      slot.worker.postMessage({
        type: "job",
        id: job.id,
        text: job.message.text,
        args: job.message.args,
        format: job.message.format,
        rate: PCM_RATE,
        bitrate: MP3_BITRATE,
        control: job.control
      })
    }
  }

  private spawn(): Slot {
    // Not the process's command line: a preload meant for the server (an APM agent's, a benchmark's) has nothing to do
    // in the engine's thread, and one that exits where it finds no server would end every job at once.
    const worker = new Worker(WORKER_URL, { execArgv: [] })
    // Workers never keep the process alive: the requests waiting for them do, and the scope stops them.
    worker.unref()
    const slot: Slot = { worker, job: undefined }
    worker.on("message", (message: Message) => {
      const job = slot.job
      if (job === undefined || job.id !== message.id) return
      job.onMessage(message)
      if (job.finished) {
        slot.job = undefined
        this.dispatch()
      }
    })
    const died = (why: string) => {
      const i = this.slots.indexOf(slot)
      if (i < 0) return
      this.slots.splice(i, 1)
      slot.job?.fail(new Upstream.UpstreamError({ kind: "transport", message: `the local speech engine ${why}` }))
      slot.job = undefined
      this.dispatch()
    }
    worker.on("error", (error) => died(`failed: ${error.message}`))
    worker.on("exit", (code) => died(`stopped (exit code ${code})`))
    this.slots.push(slot)
    return slot
  }

  close(): Promise<void> {
    this.closed = true
    for (const job of this.waiting.splice(0)) {
      job.fail(new Upstream.UpstreamError({ kind: "transport", message: "the local speech engine is closed" }))
    }
    const slots = this.slots.splice(0)
    return Promise.all(slots.map((s) => s.worker.terminate())).then(() => undefined)
  }
}

const invalid = (message: string) => new Upstream.UpstreamError({ kind: "invalid_request", status: 400, message })

const speechOnly = () =>
  Effect.fail(
    new Upstream.UpstreamError({
      kind: "unsupported",
      message: "the local speech engine only synthesizes speech (POST /v1/audio/speech)"
    })
  )

/** Characters (code points) of a string. */
const characters = (s: string): number => {
  let n = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0xdc00 || c > 0xdfff) n++
  }
  return n
}

const integerOption = (options: Readonly<Record<string, unknown>> | undefined, key: string, max: number) => {
  const value = options?.[key]
  if (value === undefined || value === null) return undefined
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > max) {
    return invalid(`provider.options: ${key} must be an integer from 0 to ${max}`)
  }
  return value
}

/**
 * eSpeak's arguments for a call (voice, words per minute from `speed`, and the provider options `pitch`, 0-99, and
 * `word_gap`, in units of 10 ms), or why the call cannot be made.
 */
export const argumentsOf = (call: Upstream.SpeechCall): ReadonlyArray<string> | Upstream.UpstreamError => {
  const voice = EspeakVoices.resolve(call.voice)
  if (voice === undefined) {
    return invalid(
      `voice: the local speech engine has no voice '${call.voice}' (a language such as en-us, fr-fr or de, ` +
        `optionally with a variant: en-us+f3)`
    )
  }
  if (call.references.mode !== "none") {
    return new Upstream.UpstreamError({
      kind: "unsupported",
      message: "the local speech engine cannot clone or design voices from references"
    })
  }
  const args = ["-v", voice]
  if (call.speed !== undefined) {
    const wpm = Math.round(Math.min(450, Math.max(80, BASE_WORDS_PER_MINUTE * call.speed)))
    args.push("-s", String(wpm))
  }
  const pitch = integerOption(call.options, "pitch", 99)
  if (pitch instanceof Upstream.UpstreamError) return pitch
  if (pitch !== undefined) args.push("-p", String(pitch))
  const gap = integerOption(call.options, "word_gap", 100)
  if (gap instanceof Upstream.UpstreamError) return gap
  if (gap !== undefined) args.push("-g", String(gap))
  return args
}

/** Whether the optional `espeak-ng` package is installed. */
export const installed = (): boolean => {
  try {
    createRequire(import.meta.url).resolve("espeak-ng")
    return true
  } catch {
    return false
  }
}

const notInstalled = new Upstream.UpstreamError({
  kind: "unsupported",
  message: "the local speech engine needs the optional package espeak-ng (npm install espeak-ng)"
})

/** The content type of the engine's audio. */
export const contentTypeOf = (format: "mp3" | "pcm"): string =>
  format === "mp3" ? "audio/mpeg" : `audio/pcm;rate=${PCM_RATE};channels=1`

/** The local engine as an Upstream (speech only); its workers stop when the scope closes. */
export const make = (options: LocalSpeechOptions = {}): Effect.Effect<Upstream.UpstreamService, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => new Pool(Math.max(1, options.workers ?? DEFAULT_WORKERS))),
      (pool) => Effect.promise(() => pool.close())
    ),
    (pool): Upstream.UpstreamService => {
      const available = installed()
      const maxChars = options.maxInputChars ?? DEFAULT_MAX_INPUT_CHARS
      const firstByteMs = options.firstByteMs ?? DEFAULT_FIRST_BYTE_MS
      let ids = 0
      const speech = (call: Upstream.SpeechCall) =>
        Effect.suspend(() => {
          if (!available) return Effect.fail(notInstalled)
          const length = characters(call.input)
          if (length > maxChars) {
            return Effect.fail(
              invalid(`input: the local speech engine takes at most ${maxChars} characters, got ${length}`)
            )
          }
          const args = argumentsOf(call)
          if (args instanceof Upstream.UpstreamError) return Effect.fail(args)
          const job = new Job(++ids, { text: call.input, args, format: call.format })
          const opened = Effect.acquireRelease(
            Effect.sync(() => pool.submit(job)),
            () =>
              Effect.sync(() => {
                pool.withdraw(job)
                job.cancel()
              })
          )
          const firstBytes = Effect.timeoutFail(job.started, {
            duration: firstByteMs,
            onTimeout: () =>
              new Upstream.UpstreamError({
                kind: "timeout",
                message: `the local speech engine gave no audio within ${firstByteMs} ms`
              })
          })
          return Effect.as(
            Effect.zipRight(opened, firstBytes),
            { contentType: contentTypeOf(call.format), pull: job.pull } satisfies Upstream.SpeechAudio
          )
        })
      return { createMessage: speechOnly, streamMessage: speechOnly, speech }
    }
  )
