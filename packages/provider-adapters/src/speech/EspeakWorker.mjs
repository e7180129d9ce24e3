// @ts-check
/**
 * The local speech engine's worker thread: eSpeak NG (the `espeak-ng` package, the espeak-ng program compiled to
 * WebAssembly with its voice data embedded, fully offline) turns text into 16-bit mono samples, which leave as raw
 * pcm (resampled to the rate asked for) or as MP3 (`@breezystack/lamejs`), chunk by chunk as eSpeak writes them.
 * Everything CPU-heavy (synthesis, resampling, MP3 encoding) runs here, never on the gateway's event loop.
 *
 * Plain JavaScript rather than TypeScript so that the same file runs from the sources (tests) and from `dist`.
 *
 * Protocol. In: `{type: "job", id, text, args, format, rate, bitrate, control}`; `control` is an `Int32Array` over a
 * `SharedArrayBuffer`: [0] the bytes posted and not yet taken by the gateway (it subtracts them as its client reads),
 * [1] set to 1 to cancel. Out: `{type: "chunk", id, bytes}`, then `{type: "end", id, sampleRate}` or
 * `{type: "error", id, message}`. One job at a time; the gateway queues the others.
 */
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { parentPort } from "node:worker_threads"

const require = createRequire(import.meta.url)

/** Past this many bytes posted and not yet taken, synthesis waits for the reader (back-pressure). */
const HIGH_WATER_MARK = 256 * 1024
/** Output is posted in chunks of about this size (the first as soon as there is any). */
const CHUNK_BYTES = 16 * 1024
/** Samples are handed to the encoder in blocks of this many bytes (an even number: whole samples). */
const BLOCK_BYTES = 8192
const WAV_HEADER_BYTES = 44

/** @type {Promise<{ factory: typeof import("espeak-ng").default; wasm: unknown }> | undefined} */
let engine
/** @type {Promise<any> | undefined} */
let lame

/** The eSpeak NG module factory and its WebAssembly compiled once per worker (some 0.4 s), on the first job. */
const loadEngine = () => {
  engine ??= (async () => {
    const path = require.resolve("espeak-ng")
    const { default: factory } = await import("espeak-ng")
    const bytes = readFileSync(join(dirname(path), "espeak-ng.wasm"))
    const wasm = await /** @type {any} */ (globalThis).WebAssembly.compile(bytes)
    return { factory, wasm }
  })()
  return engine
}

const loadLame = () => {
  lame ??= import("@breezystack/lamejs")
  return lame
}

/** Linear interpolation from one rate to another, across blocks. */
class Resampler {
  /** @param {number} from @param {number} to */
  constructor(from, to) {
    this.step = from / to
    /** Position of the next output sample, where 0 is the last sample of the previous block. */
    this.pos = 1
    this.prev = 0
  }

  /** @param {Int16Array} input @returns {Int16Array} */
  push(input) {
    const n = input.length
    if (n === 0) return new Int16Array(0)
    if (this.step === 1) return input
    const out = new Int16Array(Math.ceil((n + 1 - this.pos) / this.step) + 1)
    let k = 0
    let pos = this.pos
    while (pos < n) {
      const i = Math.floor(pos)
      const frac = pos - i
      const a = i === 0 ? this.prev : input[i - 1]
      const b = input[i]
      out[k++] = Math.round(a + (b - a) * frac)
      pos += this.step
    }
    this.pos = pos - n
    this.prev = input[n - 1]
    return out.subarray(0, k)
  }
}

/**
 * Runs one job to its end. eSpeak runs synchronously inside `main`; its standard output (`--stdout`: a WAV header,
 * then samples) comes byte by byte to `onByte`, which posts chunks as they fill.
 * @param {{ id: number; text: string; args: Array<string>; format: "mp3" | "pcm"; rate: number; bitrate: number;
 *   control: Int32Array }} job
 */
const run = async (job) => {
  const port = /** @type {import("node:worker_threads").MessagePort} */ (parentPort)
  const { factory, wasm } = await loadEngine()
  const encoderModule = job.format === "mp3" ? await loadLame() : undefined
  const control = job.control
  const cancelled = () => Atomics.load(control, 1) !== 0

  /** @type {Array<Uint8Array>} */
  let pending = []
  let pendingBytes = 0
  let posted = 0
  const flush = () => {
    if (pendingBytes === 0) return
    const bytes = pending.length === 1 ? pending[0] : concat(pending, pendingBytes)
    pending = []
    pendingBytes = 0
    Atomics.add(control, 0, bytes.byteLength)
    port.postMessage({ type: "chunk", id: job.id, bytes }, [/** @type {ArrayBuffer} */ (bytes.buffer)])
    posted++
    // Back-pressure: wait while the gateway's client is this far behind (or until the job is cancelled).
    for (;;) {
      const ahead = Atomics.load(control, 0)
      if (ahead <= HIGH_WATER_MARK || cancelled()) break
      Atomics.wait(control, 0, ahead, 1000)
    }
  }
  /** @param {Uint8Array} bytes */
  const emit = (bytes) => {
    if (bytes.byteLength === 0) return
    pending.push(bytes)
    pendingBytes += bytes.byteLength
    if (posted === 0 || pendingBytes >= CHUNK_BYTES) flush()
  }

  const header = new Uint8Array(WAV_HEADER_BYTES)
  let headerBytes = 0
  let sampleRate = 0
  const block = new Uint8Array(BLOCK_BYTES)
  let blockBytes = 0
  /** @type {Resampler | undefined} */
  let resampler
  /** @type {any} */
  let encoder
  let errorText = ""

  /** @param {Uint8Array} bytes */
  const samplesOf = (bytes) => {
    const samples = new Int16Array(bytes.byteLength >> 1)
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(i * 2, true)
    return samples
  }
  /** @param {Int16Array} samples */
  const pcmBytes = (samples) => {
    const out = new Uint8Array(samples.length * 2)
    const view = new DataView(out.buffer)
    for (let i = 0; i < samples.length; i++) view.setInt16(i * 2, samples[i], true)
    return out
  }
  /** @param {Uint8Array} bytes */
  const consume = (bytes) => {
    if (cancelled() || bytes.byteLength < 2) return
    const samples = samplesOf(bytes)
    if (encoder !== undefined) emit(new Uint8Array(encoder.encodeBuffer(samples).buffer))
    else if (resampler !== undefined) emit(pcmBytes(resampler.push(samples)))
  }
  /** @param {number | null} byte */
  const onByte = (byte) => {
    if (byte === null) return
    if (headerBytes < WAV_HEADER_BYTES) {
      header[headerBytes++] = byte
      if (headerBytes === WAV_HEADER_BYTES) {
        const view = new DataView(header.buffer)
        sampleRate = view.getUint32(24, true)
        if (encoderModule !== undefined) encoder = new encoderModule.Mp3Encoder(1, sampleRate, job.bitrate)
        else resampler = new Resampler(sampleRate, job.rate)
      }
      return
    }
    block[blockBytes++] = byte
    if (blockBytes === BLOCK_BYTES) {
      consume(block.slice(0, blockBytes))
      blockBytes = 0
    }
  }

  await factory({
    arguments: [...job.args, "--stdout", "-f", "/input.txt"],
    preRun: [(/** @type {any} */ module) => {
      module.FS.writeFile("/input.txt", job.text)
      module.FS.init(null, onByte, (/** @type {number | null} */ byte) => {
        if (byte !== null && errorText.length < 2000) errorText += String.fromCharCode(byte)
      })
    }],
    /** @param {any} imports @param {(instance: unknown, module: unknown) => void} done */
    instantiateWasm: (imports, done) => {
      /** @type {any} */ (globalThis).WebAssembly.instantiate(wasm, imports).then(
        (/** @type {unknown} */ instance) => done(instance, wasm)
      )
      return {}
    },
    print: () => {},
    printErr: (/** @type {string} */ line) => {
      if (errorText.length < 2000) errorText += `${line}\n`
    }
  })
  if (headerBytes < WAV_HEADER_BYTES) {
    const reason = errorText.split("\n").find((line) => /error/i.test(line)) ?? errorText.trim()
    throw new Error(`eSpeak NG produced no audio${reason === "" ? "" : `: ${reason.trim()}`}`)
  }
  if (blockBytes > 0) consume(block.slice(0, blockBytes & ~1))
  if (encoder !== undefined && !cancelled()) emit(new Uint8Array(encoder.flush().buffer))
  flush()
  return sampleRate
}

/** @param {Array<Uint8Array>} parts @param {number} size */
const concat = (parts, size) => {
  const out = new Uint8Array(size)
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.byteLength
  }
  return out
}

/** @type {Array<any>} */
const jobs = []
let running = false

const next = async () => {
  if (running) return
  running = true
  while (jobs.length > 0) {
    const job = jobs.shift()
    try {
      const sampleRate = await run(job)
      parentPort?.postMessage({ type: "end", id: job.id, sampleRate })
    } catch (error) {
      parentPort?.postMessage({ type: "error", id: job.id, message: String(/** @type {any} */ (error)?.message ?? error) })
    }
  }
  running = false
}

parentPort?.on("message", (message) => {
  if (message?.type !== "job") return
  jobs.push(message)
  void next()
})
