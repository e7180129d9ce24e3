/**
 * Speech over an OpenAI-compatible API (OpenAI, OpenRouter, vLLM-omni, Kokoro-FastAPI, LocalAI, anything serving
 * `POST {baseUrl}/audio/speech`): `{model, input, voice, response_format, speed}` plus the request's options for this
 * provider, the audio body handed on as it arrives. Reference parts (voice cloning) are sent as `input_references`,
 * OpenRouter's shape, to endpoints the catalogue says support them.
 */
import type { SpeechReferences, Upstream, Wire } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { excerpt } from "../internal/Failures.js"
import type { Timeouts } from "../internal/Transport.js"
import { scopedTransport } from "../internal/Transport.js"
import { openByteStream } from "./ByteStream.js"

export interface OpenAiSpeechOptions {
  /** Base URL including the version prefix, e.g. `https://api.openai.com/v1`. */
  readonly baseUrl: string
  readonly apiKey?: string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly timeouts?: Partial<Timeouts> | undefined
}

/** OpenAI's pcm: 24 kHz, mono, 16-bit little-endian; an upstream that says another rate is believed. */
export const DEFAULT_PCM_RATE = 24_000

/** Keys of the provider options that would change what the gateway asked for: never forwarded. */
const RESERVED = new Set(["model", "input", "voice", "response_format", "speed", "stream_format", "input_references"])

const describeError = (body: unknown, text: string) => {
  const error = (body as { error?: { message?: unknown; type?: unknown } } | undefined)?.error
  return {
    message: typeof error?.message === "string" ? error.message : excerpt(text, "upstream error"),
    type: typeof error?.type === "string" ? error.type : undefined
  }
}

/** The media types of each format the gateway asks for, and of the other audio formats (lower case, no parameters). */
const MP3_TYPES = ["audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mpeg-3", "audio/x-mp3"]
const PCM_TYPES = ["audio/pcm", "audio/l16", "audio/x-pcm", "audio/raw", "audio/x-raw"]
const OTHER_TYPES = [
  "audio/wav",
  "audio/x-wav",
  "audio/wave",
  "audio/vnd.wave",
  "audio/ogg",
  "audio/opus",
  "audio/aac",
  "audio/x-aac",
  "audio/flac",
  "audio/x-flac",
  "audio/webm",
  "audio/mp4"
]

/**
 * Checks a 200's head for `format`: a body that is not audio (JSON or text) is an upstream failure, not sound, and so is
 * audio of another known format (mp3 asked, pcm or wav answered): labelled as asked, it would play as noise. A generic
 * type (`application/octet-stream`, `audio/*` of no known format) or none is taken as the format asked for.
 */
const headCheck = (format: "mp3" | "pcm") => {
  const refused = new Set([...(format === "mp3" ? PCM_TYPES : MP3_TYPES), ...OTHER_TYPES])
  return (contentType: string | undefined): string | undefined => {
    if (contentType === undefined) return undefined
    const type = contentType.split(";")[0]!.trim().toLowerCase()
    if (/^(application\/(json|problem\+json)|text\/)/.test(type)) return `upstream answered ${type} instead of audio`
    return refused.has(type) ? `upstream answered ${type} audio where ${format} was asked for` : undefined
  }
}

const CHECK_HEAD = { mp3: headCheck("mp3"), pcm: headCheck("pcm") } as const

/** The content type of the audio: `audio/mpeg`, or pcm with the upstream's rate when it names one. */
export const contentTypeOf = (format: "mp3" | "pcm", upstream: string | undefined): string => {
  if (format === "mp3") return "audio/mpeg"
  const rate = upstream === undefined ? undefined : /(?:^|;)\s*rate=(\d+)/i.exec(upstream)?.[1]
  return `audio/pcm;rate=${rate ?? DEFAULT_PCM_RATE};channels=1`
}

/** The reference parts as OpenRouter takes them: each clip followed by its transcript, or the image. */
export const referenceParts = (references: SpeechReferences.References): Array<Wire.JsonObject> => {
  switch (references.mode) {
    case "none":
      return []
    case "image":
      return [{ type: "image_url", image_url: { url: references.url } }]
    case "audio":
      return references.clips.flatMap((clip) => {
        const audio: Wire.JsonObject = {
          type: "input_audio",
          input_audio: clip.format === undefined ? { data: clip.data } : { data: clip.data, format: clip.format }
        }
        return clip.transcript === undefined ? [audio] : [audio, { type: "text", text: clip.transcript }]
      })
  }
}

/** The JSON body sent upstream. */
export const requestBody = (call: Upstream.SpeechCall): Wire.JsonObject => {
  const body: Wire.JsonObject = {}
  for (const [key, value] of Object.entries(call.options ?? {})) if (!RESERVED.has(key)) body[key] = value
  body.model = call.endpoint.upstreamModel
  body.input = call.input
  if (call.voice !== undefined) body.voice = call.voice
  body.response_format = call.format
  if (call.speed !== undefined) body.speed = call.speed
  if (call.references.mode !== "none") body.input_references = referenceParts(call.references)
  return body
}

/** The speech of one OpenAI-compatible provider; its connection pool closes with the scope. */
export const make = (
  options: OpenAiSpeechOptions
): Effect.Effect<
  (call: Upstream.SpeechCall) => Effect.Effect<Upstream.SpeechAudio, Upstream.UpstreamError, Scope.Scope>,
  never,
  Scope.Scope
> =>
  Effect.map(scopedTransport(options.timeouts), (transport) => {
    const url = `${options.baseUrl.replace(/\/+$/, "")}/audio/speech`
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: "audio/*",
      ...options.headers
    }
    if (options.apiKey !== undefined) headers.authorization = `Bearer ${options.apiKey}`
    return (call) =>
      Effect.map(
        openByteStream(transport, {
          url,
          headers,
          body: JSON.stringify(requestBody(call)),
          describeError,
          checkHead: CHECK_HEAD[call.format]
        }),
        (response): Upstream.SpeechAudio => {
          const upstream = response.headers["content-type"]
          return {
            contentType: contentTypeOf(call.format, Array.isArray(upstream) ? upstream[0] : upstream),
            pull: response.pull
          }
        }
      )
  })
