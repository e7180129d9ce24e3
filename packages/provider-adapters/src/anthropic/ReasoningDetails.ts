/**
 * Anthropic thinking blocks as OpenRouter's `reasoning_details`, both ways: how a chat completions answer over an
 * Anthropic endpoint carries its signed thinking (whole in a `chat.completion`, in fragments in a stream), and how the
 * thinking comes back as blocks when the client hands the assistant turn back, as Anthropic requires of a tool loop's
 * turn when thinking is on. Pure; no I/O.
 */
import type { Wire } from "@model-gateway/core"
import { asObject, asString } from "./ChatFields.js"

type JsonObject = Wire.JsonObject

/** OpenRouter's `format` of reasoning details that are Anthropic thinking blocks. */
export const ANTHROPIC_REASONING_FORMAT = "anthropic-claude-v1"

/** A thinking or redacted thinking block, whole, as the `index`-th entry; undefined for any other block. */
export const ofBlock = (block: JsonObject, index: number): JsonObject | undefined =>
  block.type === "thinking"
    ? {
      type: "reasoning.text",
      text: asString(block.thinking) ?? "",
      signature: asString(block.signature) ?? null,
      format: ANTHROPIC_REASONING_FORMAT,
      index
    }
    : block.type === "redacted_thinking"
    ? encrypted(asString(block.data) ?? "", index)
    : undefined

/** A streamed fragment of the `index`-th entry's thinking. */
export const textFragment = (text: string, index: number): JsonObject => ({
  type: "reasoning.text",
  text,
  format: ANTHROPIC_REASONING_FORMAT,
  index
})

/** The `index`-th entry's signature, streamed after its text (Anthropic's `signature_delta`). */
export const signatureFragment = (signature: string, index: number): JsonObject => ({
  type: "reasoning.text",
  text: "",
  signature,
  format: ANTHROPIC_REASONING_FORMAT,
  index
})

/** A redacted thinking block's data as the `index`-th entry. */
export const encrypted = (data: string, index: number): JsonObject => ({
  type: "reasoning.encrypted",
  data,
  format: ANTHROPIC_REASONING_FORMAT,
  index
})

/**
 * The entries with a stream's fragments of one entry (the same `type` and numeric `index`) merged into one, in the
 * order each entry first came: texts and data joined, the signature the last one given. A client that merged them
 * already (as OpenRouter's clients do) hands back one entry per number, kept as it is.
 */
export const merged = (details: unknown): Array<JsonObject> => {
  const entries: Array<JsonObject> = []
  const byIndex = new Map<string, JsonObject>()
  for (const item of Array.isArray(details) ? details : []) {
    const detail = asObject(item)
    if (detail === undefined) continue
    const key = typeof detail.index === "number" ? `${String(detail.type)}:${detail.index}` : undefined
    const into = key === undefined ? undefined : byIndex.get(key)
    if (into === undefined) {
      const entry = { ...detail }
      entries.push(entry)
      if (key !== undefined) byIndex.set(key, entry)
      continue
    }
    for (const field of ["text", "data"] as const) {
      const more = asString(detail[field])
      if (more !== undefined) into[field] = (asString(into[field]) ?? "") + more
    }
    const signature = asString(detail.signature)
    if (signature) into.signature = signature
  }
  return entries
}

/**
 * The thinking blocks an assistant message's `reasoning_details` hand back: a signed `reasoning.text` as `thinking`, a
 * `reasoning.encrypted` as `redacted_thinking`. Entries of another format, a text without its signature (Anthropic
 * refuses a thinking block it did not sign) and a signature without its text are left out. The last is what the
 * openai SDK's `finalChatCompletion()` keeps of a streamed answer (the last fragment of each delta field it does not
 * know): sent, Anthropic would refuse it, while a turn without its thinking runs with thinking off (`ChatRequest`).
 * The gateway asks for thinking shown, never omitted, so a block it answered always has text.
 */
export const thinkingBlocks = (details: unknown): Array<JsonObject> => {
  const blocks: Array<JsonObject> = []
  for (const detail of merged(details)) {
    if (detail.format != null && detail.format !== ANTHROPIC_REASONING_FORMAT) continue
    const signature = asString(detail.signature)
    const data = asString(detail.data)
    const text = asString(detail.text)
    if (detail.type === "reasoning.text" && signature && text) {
      blocks.push({ type: "thinking", thinking: text, signature })
    } else if (detail.type === "reasoning.encrypted" && data) {
      blocks.push({ type: "redacted_thinking", data })
    }
  }
  return blocks
}
