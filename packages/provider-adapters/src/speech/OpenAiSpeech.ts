/**
 * Speech over an OpenAI-compatible API (OpenAI, OpenRouter, vLLM-omni, Kokoro-FastAPI, LocalAI, anything serving
 * `POST {baseUrl}/audio/speech`): `{model, input, voice, response_format, speed}` plus the request's options for this
 * provider, the audio body handed on as it arrives. Reference parts (voice cloning) are sent as `input_references`,
 * OpenRouter's shape, to endpoints the catalogue says support them.
 */
import type { SpeechReferences, Upstream, Wire } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
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
    message: typeof error?.message === "string" ? error.message : text.slice(0, 500) || "upstream error",
    type: typeof error?.type === "string" ? error.type : undefined
  }
}

/** A response that is not audio (a JSON or text body with a 200) is an upstream failure, not sound. */
const checkHead = (contentType: string | undefined): string | undefined =>
  contentType !== undefined && /^(application\/(json|problem\+json)|text\/)/i.test(contentType.trim())
    ? `upstream answered ${contentType} instead of audio`
    : undefined

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
        openByteStream(transport, { url, headers, body: JSON.stringify(requestBody(call)), describeError, checkHead }),
        (response): Upstream.SpeechAudio => {
          const upstream = response.headers["content-type"]
          return {
            contentType: contentTypeOf(call.format, Array.isArray(upstream) ? upstream[0] : upstream),
            pull: response.pull
          }
        }
      )
  })
