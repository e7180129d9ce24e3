/**
 * The OpenAI-compatible adapter (chat completions: OpenAI, vLLM, Ollama, llama.cpp server,
 * OpenRouter, anything serving `/v1/chat/completions`). It translates the Anthropic Messages request
 * and answer both ways; streams are translated chunk by chunk as they arrive.
 */
import type { Wire } from "@model-gateway/core"
import { Upstream } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Scope from "effect/Scope"
import * as JsonBody from "../internal/JsonBody.js"
import type { Timeouts } from "../internal/Transport.js"
import { openEventStream, postJson, scopedTransport } from "../internal/Transport.js"
import * as ChunkShortcut from "./ChunkShortcut.js"
import * as OpenAiPassThrough from "./OpenAiPassThrough.js"
import * as OpenAiTranslate from "./OpenAiTranslate.js"

export interface OpenAiOptions {
  /** Base URL including the version prefix, e.g. `https://api.openai.com/v1`. */
  readonly baseUrl: string
  readonly apiKey?: string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly timeouts?: Partial<Timeouts> | undefined
  /**
   * The output-cap field of this provider's endpoints unless an endpoint says otherwise: `max_completion_tokens` for
   * api.openai.com (its reasoning models refuse `max_tokens`), `max_tokens` elsewhere (vLLM, Ollama, llama.cpp, ...).
   */
  readonly maxTokensField?: "max_tokens" | "max_completion_tokens" | undefined
}

/** The output-cap field a provider takes by default. */
export const defaultMaxTokensField = (baseUrl: string): "max_tokens" | "max_completion_tokens" => {
  try {
    return new URL(baseUrl).hostname === "api.openai.com" ? "max_completion_tokens" : "max_tokens"
  } catch {
    return "max_tokens"
  }
}

const describeError = (body: unknown, text: string) => {
  const error = (body as { error?: { message?: unknown; type?: unknown; code?: unknown } } | undefined)?.error
  return {
    message: typeof error?.message === "string" ? error.message : text.slice(0, 500) || "upstream error",
    type: typeof error?.type === "string" ? error.type : undefined
  }
}

/** Appends a translation's events, or throws its failure (which fails the stream). */
const append = (
  result: Either.Either<ReadonlyArray<Wire.StreamEvent>, Upstream.UpstreamError>,
  out: Array<Wire.StreamEvent>
): void => {
  if (Either.isLeft(result)) throw result.left
  for (const event of result.right) out.push(event)
}

/** An Upstream for one OpenAI-compatible provider; its connection pool closes with the scope. */
export const make = (options: OpenAiOptions): Effect.Effect<Upstream.UpstreamService, never, Scope.Scope> =>
  Effect.map(scopedTransport(options.timeouts), (transport) => {
    const url = `${options.baseUrl.replace(/\/+$/, "")}/chat/completions`
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: "application/json",
      ...options.headers
    }
    if (options.apiKey !== undefined) headers.authorization = `Bearer ${options.apiKey}`
    const streamHeaders = { ...headers, accept: "text/event-stream" }

    const maxTokensField = options.maxTokensField ?? defaultMaxTokensField(options.baseUrl)
    const translate = (call: Upstream.MessagesCall, stream: boolean) =>
      OpenAiTranslate.toChatRequest(call.body, {
        upstreamModel: call.endpoint.upstreamModel,
        stream,
        maxTokensField: call.endpoint.maxTokensField ?? maxTokensField,
        supportsDocuments: call.endpoint.inputModalities?.includes("file") ?? false,
        supportsReasoning: call.endpoint.supportedParameters?.some((p) =>
          p === "reasoning" || p === "include_reasoning"
        ) ??
          false
      })

    const createMessage = (call: Upstream.MessagesCall) =>
      Effect.flatMap(
        translate(call, false),
        (body) =>
          postJson(transport, { url, headers, body: () => JsonBody.encode(body), stream: false, describeError }).pipe(
            Effect.flatMap((json) =>
              OpenAiTranslate.fromChatCompletion(json as Wire.JsonObject, call.endpoint.upstreamModel)
            )
          )
      )

    // Chunks are translated as each network read arrives, with no Effect per chunk (see Transport.openEventStream).
    // No closure here refers to `call`, nor is an error made ahead: either would hold the call's body (the whole
    // conversation) for as long as the stream is open.
    const streamMessage = (
      call: Upstream.MessagesCall
    ): Effect.Effect<Upstream.EventPull, Upstream.UpstreamError, Scope.Scope> => {
      const { upstreamModel } = call.endpoint
      const passThrough = call.passThrough === true
      return Effect.flatMap(translate(call, true), (body) => {
        const translator = OpenAiTranslate.makeStreamTranslator(upstreamModel, undefined, { passThrough })
        // Most text chunks repeat the last one but for their text: read without parsing (see ChunkShortcut).
        const read = ChunkShortcut.reader(translator)
        return openEventStream(transport, {
          url,
          headers: streamHeaders,
          body: JsonBody.encode(body),
          stream: true,
          describeError
        }, {
          event: (message, out: Array<Wire.StreamEvent>) => {
            // `[DONE]` ends the stream: nothing after it is read.
            if (message.data === "[DONE]") {
              append(translator.end(), out)
              return true
            }
            append(read(message.data), out)
          },
          end: (out) => append(translator.end(), out)
        })
      })
    }

    const passThrough = OpenAiPassThrough.make(transport, {
      baseUrl: options.baseUrl,
      headers,
      streamHeaders,
      maxTokensField
    })

    return { createMessage, streamMessage, ...passThrough }
  })
