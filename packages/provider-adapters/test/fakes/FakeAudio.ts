/**
 * Audio for the fakes and the checks of tests: a tone as 16-bit pcm or MP3 (lamejs), and readers that decode what
 * came back (pcm samples, MP3 frame headers), so that a test can say the audio is the right length and not silence.
 */
import { Mp3Encoder } from "@breezystack/lamejs"

/** A tone of `seconds` at `rate` Hz (mono, 16-bit). */
export const tone = (seconds: number, rate: number, hz = 440): Int16Array => {
  const samples = new Int16Array(Math.round(seconds * rate))
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * hz * i) / rate))
  return samples
}

/** Samples as 16-bit little-endian bytes. */
export const pcmBytes = (samples: Int16Array): Uint8Array => {
  const out = new Uint8Array(samples.length * 2)
  const view = new DataView(out.buffer)
  for (let i = 0; i < samples.length; i++) view.setInt16(i * 2, samples[i], true)
  return out
}

/** Samples as MP3 (mono, 64 kbit/s). */
export const mp3Of = (samples: Int16Array, rate: number): Uint8Array => {
  const encoder = new Mp3Encoder(1, rate, 64)
  const parts = [encoder.encodeBuffer(samples), encoder.flush()].map((p) =>
    new Uint8Array(p.buffer, p.byteOffset, p.length)
  )
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.length
  }
  return out
}

/** Splits bytes in `n` chunks of (about) equal size. */
export const chunked = (bytes: Uint8Array, n: number): Array<Uint8Array> => {
  const size = Math.max(1, Math.ceil(bytes.length / n))
  const chunks: Array<Uint8Array> = []
  for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.slice(i, i + size))
  return chunks
}

/** 16-bit little-endian bytes as samples. */
export const samplesOf = (bytes: Uint8Array): Int16Array => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const samples = new Int16Array(bytes.byteLength >> 1)
  for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(i * 2, true)
  return samples
}

/** Root mean square of samples, 0..32767: under ~100 is silence. */
export const rms = (samples: Int16Array): number => {
  let sum = 0
  for (let i = 0; i < samples.length; i++) sum += samples[i] * samples[i]
  return samples.length === 0 ? 0 : Math.sqrt(sum / samples.length)
}

const MPEG1_BITRATES = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]
const MPEG2_BITRATES = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160]
const RATES: Record<number, ReadonlyArray<number>> = {
  3: [44100, 48000, 32000],
  2: [22050, 24000, 16000],
  0: [11025, 12000, 8000]
}

/** One MPEG audio layer III frame header. */
export interface Mp3Frame {
  readonly offset: number
  readonly length: number
  readonly sampleRate: number
  readonly bitrate: number
  readonly samples: number
}

/**
 * Walks the MP3 frames of a stream (skipping an ID3v2 tag): every frame must start where the previous one ended with
 * a valid layer III header. Throws on the first byte that is not one.
 */
export const mp3Frames = (bytes: Uint8Array): Array<Mp3Frame> => {
  let offset = 0
  if (bytes[0] === 0x49 && bytes[1] === 0x44 && bytes[2] === 0x33) {
    const size = ((bytes[6] & 0x7f) << 21) | ((bytes[7] & 0x7f) << 14) | ((bytes[8] & 0x7f) << 7) | (bytes[9] & 0x7f)
    offset = 10 + size
  }
  const frames: Array<Mp3Frame> = []
  while (offset + 4 <= bytes.length) {
    const b1 = bytes[offset + 1]
    const b2 = bytes[offset + 2]
    if (bytes[offset] !== 0xff || (b1 & 0xe0) !== 0xe0) throw new Error(`no MP3 frame sync at byte ${offset}`)
    const version = (b1 >> 3) & 0x03
    const layer = (b1 >> 1) & 0x03
    if (version === 1 || layer !== 1) throw new Error(`not an MPEG layer III frame at byte ${offset}`)
    const bitrateIndex = b2 >> 4
    const rateIndex = (b2 >> 2) & 0x03
    if (bitrateIndex === 0 || bitrateIndex === 15 || rateIndex === 3) throw new Error(`bad MP3 header at ${offset}`)
    const bitrate = (version === 3 ? MPEG1_BITRATES : MPEG2_BITRATES)[bitrateIndex]
    const sampleRate = RATES[version][rateIndex]
    const padding = (b2 >> 1) & 0x01
    const samples = version === 3 ? 1152 : 576
    const length = Math.floor((samples / 8) * bitrate * 1000 / sampleRate) + padding
    frames.push({ offset, length, sampleRate, bitrate, samples })
    offset += length
  }
  if (offset !== bytes.length) throw new Error(`MP3 stream ends inside a frame (${offset} of ${bytes.length})`)
  return frames
}

/** The duration of an MP3 stream in seconds, from its frames. */
export const mp3Seconds = (bytes: Uint8Array): number =>
  mp3Frames(bytes).reduce((s, frame) => s + frame.samples / frame.sampleRate, 0)
