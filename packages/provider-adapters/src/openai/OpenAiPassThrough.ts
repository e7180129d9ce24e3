/**
 * OpenAI-protocol calls passed through to an OpenAI-compatible provider: the client's body (gateway fields already
 * stripped, the model id the endpoint's) is sent as it is, and the answer comes back as it is, JSON or each event's
 * parsed `data` as it arrives. Only the output-cap field is renamed when the endpoint takes the other one. Of the
 * client's headers, only `openai-beta` is sent (`withBeta`).
 */
import { ChunkTemplate, JsonSource, Upstream } from "@model-gateway/core"
import type { Wire } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { KEEP_ALIVE, openEventStream } from "../internal/EventStream.js"
import { excerpt } from "../internal/Failures.js"
import * as JsonBody from "../internal/JsonBody.js"
import * as Nesting from "../internal/Nesting.js"
import type { Transport } from "../internal/Transport.js"
import { postJson } from "../internal/Transport.js"
import * as ChunkShortcut from "./ChunkShortcut.js"
import * as OpenAiTranslate from "./OpenAiTranslate.js"

export interface PassThroughOptions {
  readonly baseUrl: string
  readonly headers: Record<string, string>
  readonly streamHeaders: Record<string, string>
  /** The output-cap field the provider's endpoints take unless one says otherwise. */
  readonly maxTokensField: "max_tokens" | "max_completion_tokens"
}

const describeError = (body: unknown, text: string) => {
  const error = (body as { error?: { message?: unknown; type?: unknown; code?: unknown } } | undefined)?.error
  return {
    message: typeof error?.message === "string" ? error.message : excerpt(text, "upstream error"),
    type: typeof error?.type === "string" ? error.type : undefined
  }
}

/**
 * The provider's headers, with the client's `openai-beta` when it sent one (the one client header an OpenAI-protocol
 * upstream receives: see `Upstream.ForwardHeaders`). The shared object as it is otherwise: nothing is copied per call.
 */
export const withBeta = (
  headers: Record<string, string>,
  forwarded: Upstream.ForwardHeaders
): Record<string, string> => {
  if (forwarded.openaiBeta === undefined) return headers
  // Object.assign, not `{ ...headers }` plus a key: objects built by spread and then given keys are slow on V8 11.
  const out: Record<string, string> = Object.assign({}, headers)
  out["openai-beta"] = forwarded.openaiBeta
  return out
}

const malformed = new Upstream.UpstreamError({ kind: "transport", message: "upstream sent a malformed event" })
const tooDeep = new Upstream.UpstreamError({ kind: "transport", message: Nesting.tooDeepMessage("an event") })

/** A chat body with its output cap under the field the endpoint takes. */
const capField = (call: Upstream.OpenAiCall, field: "max_tokens" | "max_completion_tokens"): Wire.JsonObject => {
  const body = call.body
  if (call.api !== "chat") return body
  const want = call.endpoint.maxTokensField ?? field
  const other = want === "max_tokens" ? "max_completion_tokens" : "max_tokens"
  if (body[other] === undefined || body[want] !== undefined) return body
  const out: Wire.JsonObject = {}
  for (const key of Object.keys(body)) out[key === other ? want : key] = body[key]
  return JsonSource.derive(out, body)
}

/** A failed Responses stream (`response.failed`, an `error` event), classified like an HTTP error. */
const responsesError = (data: Wire.JsonObject): Upstream.UpstreamError | undefined => {
  if (data.type === "error") return OpenAiTranslate.classifyInBandError(data)
  if (data.type === "response.failed") {
    const response = data.response as { error?: unknown } | undefined
    return OpenAiTranslate.classifyInBandError(response?.error ?? { message: "the upstream response failed" })
  }
  return undefined
}

/** A value a keep-alive's delta may hold: nothing (the `role` of a delta is not content either). */
const isNothing = (value: unknown): boolean =>
  value === null || value === undefined || value === "" || (Array.isArray(value) && value.length === 0)

/**
 * A chat chunk that says nothing, which some servers send to keep a stream open: no usage, and no choice with a
 * `finish_reason` or anything in its delta but its `role`. Not content (see EventStream's `KEEP_ALIVE`).
 */
export const saysNothing = (chunk: Wire.JsonObject): boolean => {
  if (!isNothing(chunk.usage)) return false
  const choices = chunk.choices
  if (!Array.isArray(choices)) return false
  for (const choice of choices) {
    if (typeof choice !== "object" || choice === null) return false
    const { delta, finish_reason } = choice as Wire.JsonObject
    if (!isNothing(finish_reason)) return false
    if (isNothing(delta)) continue
    if (typeof delta !== "object") return false
    // `for in`, not `Object.keys`: no array per chunk (a parsed chunk has no inherited keys).
    for (const key in delta) {
      if (key !== "role" && !isNothing((delta as Wire.JsonObject)[key])) return false
    }
  }
  return true
}

const answerWithout = (what: string) =>
  new Upstream.UpstreamError({ kind: "server_error", message: `upstream answered 200 without ${what}` })

/**
 * What makes a 200 JSON answer a failure rather than an answer: an `error` object (some providers answer an overloaded
 * or failed generation so), a chat completion without a choice, a list of embeddings without its `data`, a response
 * whose status is `failed`. Such an attempt fails (and the next endpoint is tried) instead of reaching the client as
 * a success, and being billed as one.
 */
export const failureOfAnswer = (api: Upstream.OpenAiApi, json: unknown): Upstream.UpstreamError | undefined => {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return answerWithout("a JSON object")
  const body = json as Wire.JsonObject
  if (body.error !== undefined && body.error !== null) return OpenAiTranslate.classifyInBandError(body.error)
  switch (api) {
    case "chat":
      return Array.isArray(body.choices) && body.choices.length > 0 ? undefined : answerWithout("a choice")
    case "embeddings":
      return Array.isArray(body.data) ? undefined : answerWithout("its data")
    case "responses":
      return body.status === "failed" ?
        OpenAiTranslate.classifyInBandError({ message: "the upstream response failed" })
        : Array.isArray(body.output)
        ? undefined
        : answerWithout("its output")
  }
}

/** `failureOfAnswer` per API, as the transport's `check` of a JSON answer (made once, not per call). */
const CHECK_ANSWER: Readonly<Record<Upstream.OpenAiApi, (json: unknown) => Upstream.UpstreamError | undefined>> = {
  chat: (json) => failureOfAnswer("chat", json),
  embeddings: (json) => failureOfAnswer("embeddings", json),
  responses: (json) => failureOfAnswer("responses", json)
}

/** The pass-through calls of one provider. */
export const make = (transport: Transport, options: PassThroughOptions) => {
  const base = options.baseUrl.replace(/\/+$/, "")
  const urlOf = (call: Upstream.OpenAiCall) => `${base}${Upstream.openAiPaths[call.api]}`

  /** The call's text; its body is read no more after it (see `OpenAiCall.bodyMade`). */
  const textOf = (call: Upstream.OpenAiCall) => {
    const text = JsonBody.encode(capField(call, options.maxTokensField))
    call.bodyMade?.()
    return text
  }

  const createOpenAi = (call: Upstream.OpenAiCall): Effect.Effect<Wire.JsonObject, Upstream.UpstreamError> =>
    postJson(transport, {
      url: urlOf(call),
      headers: withBeta(options.headers, call.headers),
      body: () => textOf(call),
      stream: false,
      describeError,
      check: CHECK_ANSWER[call.api]
    }) as Effect.Effect<Wire.JsonObject, Upstream.UpstreamError>

  // The decoder refers to `call.api` only, not to `call`: a closure holding the call would hold its body (the whole
  // conversation) for as long as the stream is open.
  const streamOpenAi = (call: Upstream.OpenAiCall): Effect.Effect<Upstream.JsonPull, never, Scope.Scope> => {
    const { api } = call
    // A chat chunk that repeats the last text chunk but for its text is read without parsing (see core's
    // `ChunkTemplate`, and `ChunkShortcut`).
    const shortcut = api === "chat" ? ChunkShortcut.make() : undefined
    let template: ChunkTemplate.ChunkTemplate | undefined = undefined
    return openEventStream(transport, {
      url: urlOf(call),
      headers: withBeta(options.streamHeaders, call.headers),
      body: textOf(call),
      stream: true,
      describeError
    }, {
      event: (message, out: Array<Wire.JsonObject>) => {
        // `[DONE]` ends a chat stream: nothing after it is read.
        if (message.data === "[DONE]") return true
        if (template !== undefined) {
          const text = shortcut!.text(message.data)
          if (text !== undefined) {
            out.push(ChunkTemplate.fill(template, text, shortcut!.padding()))
            return text === "" ? KEEP_ALIVE : undefined
          }
        }
        if (Nesting.tooDeep(message.data)) throw tooDeep
        let data: Wire.JsonObject
        try {
          data = JSON.parse(message.data) as Wire.JsonObject
        } catch {
          throw malformed
        }
        if (shortcut?.learn(message.data, data) === true) template = ChunkTemplate.make(data)
        if (api === "chat" && data.error !== undefined && data.error !== null) {
          throw OpenAiTranslate.classifyInBandError(data.error)
        }
        if (api === "responses") {
          if (typeof data.type !== "string" && message.event !== undefined) data.type = message.event
          const failure = responsesError(data)
          if (failure !== undefined) throw failure
          // A response's last event ends the stream, as `[DONE]` ends a chat stream (the body's end is read after it).
          if (data.type === "response.completed" || data.type === "response.incomplete") {
            out.push(data)
            return true
          }
        }
        out.push(data)
        return api === "chat" && saysNothing(data) ? KEEP_ALIVE : undefined
      },
      end: () => {}
    })
  }

  return { createOpenAi, streamOpenAi }
}
