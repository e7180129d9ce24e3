/**
 * Loose types of the Anthropic Messages wire format that the gateway serves. Only the fields the
 * gateway reads or writes are named; everything else passes through untouched.
 */

import * as Predicate from "effect/Predicate"
import * as JsonSource from "./JsonSource.js"

/** A JSON object as parsed from the wire. */
export type JsonObject = { [key: string]: unknown }

/** A JSON object: not null, not an array. */
export const isJsonObject: (u: unknown) => u is JsonObject = Predicate.isRecord as (u: unknown) => u is JsonObject

/** Token usage as Anthropic reports it: `input_tokens` excludes cache reads and cache writes. */
export interface Usage {
  input_tokens: number
  output_tokens: number
  cache_creation_input_tokens?: number | null
  cache_read_input_tokens?: number | null
  [key: string]: unknown
}

/** A message result (spec 2.2). */
export interface Message {
  id: string
  type: "message"
  role: "assistant"
  model: string
  content: Array<JsonObject>
  stop_reason: string | null
  stop_sequence: string | null
  usage: Usage
  [key: string]: unknown
}

/**
 * `{ ...body, [key]: value }`, fast: with Object.assign when it can, because a spread object given a key it lacked is
 * slow on V8 11 (Node 20; see docs/benchmarks.md). A body with an own `__proto__` key (JSON.parse makes one) takes
 * the spread, which copies that key as a field where Object.assign would set the prototype. The copy carries the
 * body's JSON text, if it has one (see `JsonSource`).
 */
export const withField = (body: JsonObject, key: string, value: unknown): JsonObject =>
  JsonSource.derive(
    Object.hasOwn(body, "__proto__") ? { ...body, [key]: value } : Object.assign({}, body, { [key]: value }),
    body
  )

/** One server-sent event of a messages stream: the SSE event name equals `type`. */
export interface StreamEvent {
  type: string
  [key: string]: unknown
}

/**
 * Where an adapter that parsed an event from its upstream's JSON keeps that JSON text (see `withRawData`). A
 * non-enumerable property: copies of the event (spread, `Object.assign`) do not carry it, so an event the gateway
 * rewrites is serialised anew, and an event passed on as it came is sent as it came.
 */
export const RawData: unique symbol = Symbol.for("@model-gateway/core/Wire/RawData")

/**
 * Marks `event` as parsed from `raw`, unchanged: `sseFrame` then sends `raw` itself rather than serialising the event
 * again (the events of a stream are mostly deltas that the gateway does not touch). The caller must not change the
 * event afterwards.
 */
export const withRawData = <E extends StreamEvent>(event: E, raw: string): E =>
  Object.defineProperty(event, RawData, { value: raw, enumerable: false, writable: false })

/** See `unparsed`. The text is a private field: a copy of the event (spread, `Object.assign`) does not carry it. */
class Unparsed {
  readonly #raw: string
  constructor(readonly type: string, raw: string) {
    this.#raw = raw
  }
  raw(): string {
    return this.#raw
  }
}

/**
 * An event passed on without being parsed: its `type` (the SSE event's name) and its JSON text, which `sseFrame` sends
 * as it came. It has no other field: only for a caller that reads none (`MessagesCall.passThrough`), and never to be
 * copied with changes. Undefined when the text is not one line holding an object (then the event is to be parsed, and
 * refused if it is not JSON).
 */
export const unparsed = (type: string, raw: string): StreamEvent | undefined =>
  raw.charCodeAt(0) === 123 && raw.charCodeAt(raw.length - 1) === 125 && raw.indexOf("\n") === -1 &&
    raw.indexOf("\r") === -1
    ? new Unparsed(type, raw) as unknown as StreamEvent
    : undefined

const rawDataOf = (event: StreamEvent): string | undefined => {
  if (event instanceof Unparsed) return event.raw()
  const raw = (event as { readonly [RawData]?: unknown })[RawData]
  // A multi-line text would need one `data:` line per line: serialising the event again is simpler.
  return typeof raw === "string" && raw.indexOf("\n") === -1 && raw.indexOf("\r") === -1 ? raw : undefined
}

/** Serialises one stream event as a named SSE frame, the only form the Anthropic SDK reads. */
export const sseFrame = (event: StreamEvent): string =>
  `event: ${event.type}\ndata: ${rawDataOf(event) ?? JSON.stringify(event)}\n\n`

/** The text of a message's text blocks, joined. */
export const messageText = (message: Message): string =>
  message.content.filter((b) => b.type === "text").map((b) => String(b.text ?? "")).join("")

/** The body with `text` added to its system prompt (after what is there, as a string or as one more text block). */
export const appendSystem = (body: JsonObject, text: string): JsonObject => {
  const system = body.system
  if (system === undefined || system === null || system === "") return { ...body, system: text }
  if (typeof system === "string") return { ...body, system: `${system}\n\n${text}` }
  if (Array.isArray(system)) return { ...body, system: [...system, { type: "text", text }] }
  return { ...body, system: text }
}
