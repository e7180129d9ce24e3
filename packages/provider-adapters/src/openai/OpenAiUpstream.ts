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
import { openEventStream } from "../internal/EventStream.js"
import { excerpt } from "../internal/Failures.js"
import type * as HttpClient from "../internal/HttpClient.js"
import * as JsonBody from "../internal/JsonBody.js"
import type { Timeouts, Transport } from "../internal/Transport.js"
import { postJson, scopedTransport } from "../internal/Transport.js"
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
  /**
   * Keep the Anthropic `cache_control` markers of a `/v1/messages` request in its translation (see
   * `ChatRequestOptions.cacheControl`): on for OpenRouter, which honours them, off elsewhere (strict OpenAI-schema
   * servers refuse unknown keys in content parts).
   */
  readonly cacheControl?: boolean | undefined
  /**
   * Hand an assistant turn's thinking back as `reasoning_content` when translating a `/v1/messages` request (see
   * `ChatRequestOptions.reasoningContent`): on for DeepSeek and Moonshot (Kimi), whose thinking models require it in a
   * tool loop, off elsewhere.
   */
  readonly reasoningContent?: boolean | undefined
}

/** The hosts whose thinking models require an assistant turn's reasoning back as `reasoning_content`. */
const REASONING_CONTENT_HOSTS = new Set(["api.deepseek.com", "api.moonshot.ai", "api.moonshot.cn"])

/** Whether a provider gets thinking back as `reasoning_content` by default: on DeepSeek's and Moonshot's APIs. */
export const defaultReasoningContent = (baseUrl: string): boolean => {
  try {
    return REASONING_CONTENT_HOSTS.has(new URL(baseUrl).hostname)
  } catch {
    return false
  }
}

/** Whether a provider keeps cache markers by default: on openrouter.ai only. */
export const defaultCacheControl = (baseUrl: string): boolean => {
  try {
    return new URL(baseUrl).hostname === "openrouter.ai"
  } catch {
    return false
  }
}

/** Whether a provider is OpenAI's own API. */
const isOpenAiHost = (baseUrl: string): boolean => {
  try {
    return new URL(baseUrl).hostname === "api.openai.com"
  } catch {
    return false
  }
}

/** The output-cap field a provider takes by default. */
export const defaultMaxTokensField = (baseUrl: string): "max_tokens" | "max_completion_tokens" =>
  isOpenAiHost(baseUrl) ? "max_completion_tokens" : "max_tokens"

const describeError = (body: unknown, text: string) => {
  const error = (body as { error?: { message?: unknown; type?: unknown; code?: unknown } } | undefined)?.error
  return {
    message: typeof error?.message === "string" ? error.message : excerpt(text, "upstream error"),
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

/**
 * Opens the translated stream of a chat request whose text is `text`. Chunks are translated as each network read
 * arrives, with no Effect per chunk (see EventStream.openEventStream). Made here, not in `streamMessage`, and given no
 * error made ahead: a closure there would hold the call, its body (the whole conversation) and what lets that go
 * (`MessagesCall.bodyMade`), for as long as the stream is open.
 */
const openTranslated = (
  transport: Transport,
  url: string,
  headers: Record<string, string>,
  text: HttpClient.Body,
  upstreamModel: string,
  passThrough: boolean
): Effect.Effect<Upstream.EventPull, never, Scope.Scope> => {
  const translator = OpenAiTranslate.makeStreamTranslator(upstreamModel, undefined, { passThrough })
  // Most text chunks repeat the last one but for their text: read without parsing (see ChunkShortcut).
  const read = ChunkShortcut.reader(translator)
  return openEventStream(transport, { url, headers, body: text, stream: true, describeError }, {
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
    const cacheControl = options.cacheControl ?? defaultCacheControl(options.baseUrl)
    const reasoningContent = options.reasoningContent ?? defaultReasoningContent(options.baseUrl)
    const openAiHost = isOpenAiHost(options.baseUrl)
    const translate = (call: Upstream.MessagesCall, stream: boolean) =>
      OpenAiTranslate.toChatRequest(call.body, {
        upstreamModel: call.endpoint.upstreamModel,
        stream,
        cacheControl,
        reasoningContent,
        maxTokensField: call.endpoint.maxTokensField ?? maxTokensField,
        supportsDocuments: call.endpoint.inputModalities?.includes("file") ?? false,
        supportsReasoning: call.endpoint.supportedParameters?.some((p) =>
          p === "reasoning" || p === "include_reasoning"
        ) ??
          false,
        // An endpoint that lists its parameters says whether it takes `top_k`; otherwise api.openai.com does not.
        supportsTopK: call.endpoint.supportedParameters?.includes("top_k") ?? !openAiHost
      })

    // Translated when run, and kept in a variable rather than an Effect's value: an Effect (the `Either` itself, were
    // it `flatMap`ped) stays on the fiber's stack while the answer is awaited, and the translation holds the
    // conversation. It goes once its text is made (see `MessagesCall.bodyMade`).
    const createMessage = (call: Upstream.MessagesCall) =>
      Effect.suspend(() => {
        const translated = translate(call, false)
        if (Either.isLeft(translated)) return Effect.fail(translated.left)
        let body: Wire.JsonObject | undefined = translated.right
        return postJson(transport, {
          url,
          headers: OpenAiPassThrough.withBeta(headers, call.headers),
          body: () => {
            const text = JsonBody.encode(body!)
            body = undefined
            call.bodyMade?.()
            return text
          },
          stream: false,
          describeError
        }).pipe(
          Effect.flatMap((json) =>
            OpenAiTranslate.fromChatCompletion(json as Wire.JsonObject, call.endpoint.upstreamModel)
          )
        )
      })

    const streamMessage = (
      call: Upstream.MessagesCall
    ): Effect.Effect<Upstream.EventPull, Upstream.UpstreamError, Scope.Scope> =>
      Effect.suspend(() => {
        const translated = translate(call, true)
        if (Either.isLeft(translated)) return Effect.fail(translated.left)
        const text = JsonBody.encode(translated.right)
        call.bodyMade?.()
        return openTranslated(
          transport,
          url,
          OpenAiPassThrough.withBeta(streamHeaders, call.headers),
          text,
          call.endpoint.upstreamModel,
          call.passThrough === true
        )
      })

    const passThrough = OpenAiPassThrough.make(transport, {
      baseUrl: options.baseUrl,
      headers,
      streamHeaders,
      maxTokensField
    })

    return { createMessage, streamMessage, ...passThrough }
  })
