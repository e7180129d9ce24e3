/**
 * Usage an upstream told before a chat stream's usage chunk, carried unseen on the chunks translated from it. An
 * Anthropic upstream tells a stream's prompt and cache tokens in `message_start` and its output in `message_delta`; the
 * chat chunks made from its events tell usage only in the last one, at `message_stop`. A stream that broke off before
 * (the upstream cut, the client gone after content) would be billed the prompt estimated from the request's size (see
 * `UntoldUsage`), though the upstream had told it exactly. So the adapter marks the chunks that follow such an event
 * (the first, the finish) with the usage told so far, in chat completions' terms, and the chat dialect keeps it as the
 * stream's usage until a usage chunk comes.
 *
 * The mark is a non-enumerable symbol, as `ChunkTemplate`'s: copies (spread, `Object.assign`) and `JSON.stringify` do
 * not carry it, so the client never sees it.
 */
import type { JsonObject } from "../messages/Wire.js"

const Told: unique symbol = Symbol.for("@model-gateway/core/ToldUsage")

/** `chunk`, marked with `usage`: chat completions usage its upstream has told so far. */
export const mark = (chunk: JsonObject, usage: JsonObject): JsonObject =>
  Object.defineProperty(chunk, Told, { value: usage, enumerable: false })

/** The usage `chunk` was marked with, if it was. */
export const toldOf = (chunk: JsonObject): JsonObject | undefined => (chunk as { readonly [Told]?: JsonObject })[Told]
