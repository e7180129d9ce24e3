/**
 * The `context-compression` plugin: when a prompt is longer than the chosen endpoint's context, the
 * `middle-out` engine removes whole messages from the middle of the conversation until it fits, instead
 * of letting the upstream fail. The system prompt, the first user turn and the last turns are kept, and
 * the result is still a valid Messages conversation. Pure functions; the caller picks the budget.
 */
import * as Predicate from "effect/Predicate"
import type { JsonObject } from "../messages/Wire.js"

/** The compression engines this module implements (the plugin's `engine` field). */
export const engines = ["middle-out"] as const
export type Engine = (typeof engines)[number]

/** The tokens one image is counted as by `estimateTokens` (about a 1.15 megapixel image, Anthropic's cap). */
export const IMAGE_TOKENS = 1600

/**
 * A cheap, provider-neutral estimate of the input tokens of a value (a whole request body, a message, a
 * system prompt), from the JSON text of the value: ASCII characters count 1/4 token each, Chinese,
 * Japanese and Korean characters 1 each, other non-ASCII characters 1/2 each; each `image` block counts
 * `IMAGE_TOKENS` and its base64 data nothing. It is a heuristic, not a tokenizer: it counts JSON
 * punctuation and field names (so it leans high on small messages), counts base64 PDFs by their size,
 * and real tokenizers differ by model (Claude's is not published). Keep a margin when choosing budgets.
 * No tokenizer library is used, since an exact count for one model would still be an estimate for the
 * others, and core depends on nothing but `effect`.
 */
export const estimateTokens = (value: unknown): number => {
  let images = 0
  const json = JSON.stringify(value, (_key, inner: unknown) => {
    if (Predicate.isRecord(inner) && inner.type === "image") {
      images++
      return null
    }
    return inner
  }) as string | undefined
  if (json === undefined) return images * IMAGE_TOKENS
  let ascii = 0
  let wide = 0
  let other = 0
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i)
    if (c < 0x80) ascii++
    else if ((c >= 0x2e80 && c <= 0x9fff) || (c >= 0xac00 && c <= 0xd7af) || (c >= 0xf900 && c <= 0xfaff)) wide++
    else other++
  }
  return Math.ceil(ascii / 4 + other / 2 + wide) + images * IMAGE_TOKENS
}

/** The outcome of a compression: the new body, how many messages left it, and its estimated size. */
export interface Compressed {
  readonly body: JsonObject
  readonly removedMessages: number
  readonly estimatedTokens: number
}

const roleOf = (message: unknown): unknown => (Predicate.isRecord(message) ? message.role : undefined)

const blocksOf = (message: unknown): ReadonlyArray<unknown> => {
  if (!Predicate.isRecord(message)) return []
  const content = message.content
  if (Array.isArray(content)) return content
  return typeof content === "string" && content !== "" ? [{ type: "text", text: content }] : []
}

/**
 * Splits the messages into units that are removed whole: contiguous runs in which every `tool_use`
 * (also `server_tool_use`, any `*tool_use` block) and the blocks answering it (`tool_result`, any block
 * with its `tool_use_id`) stay together with everything between them. Units are index ranges, in order.
 */
const unitsOf = (messages: ReadonlyArray<unknown>): Array<{ start: number; end: number }> => {
  const owner = new Map<string, number>()
  messages.forEach((message, i) => {
    for (const block of blocksOf(message)) {
      if (
        Predicate.isRecord(block) && typeof block.id === "string" && typeof block.type === "string" &&
        block.type.endsWith("tool_use")
      ) owner.set(block.id, i)
    }
  })
  const reach = messages.map((_, i) => i)
  messages.forEach((message, i) => {
    for (const block of blocksOf(message)) {
      if (!Predicate.isRecord(block) || typeof block.tool_use_id !== "string") continue
      const j = owner.get(block.tool_use_id)
      if (j === undefined || j === i) continue
      const [from, to] = j < i ? [j, i] : [i, j]
      reach[from] = Math.max(reach[from], to)
    }
  })
  const units: Array<{ start: number; end: number }> = []
  for (let i = 0; i < messages.length; i++) {
    const last = units[units.length - 1]
    if (last !== undefined && i <= last.end) last.end = Math.max(last.end, reach[i])
    else units.push({ start: i, end: reach[i] })
  }
  return units
}

/** Indexes 0..n-1 from the middle outwards: the middle, then alternately one older and one newer. */
const middleOutOrder = (n: number): Array<number> => {
  const order: Array<number> = []
  const center = Math.floor((n - 1) / 2)
  for (let d = 0; order.length < n; d++) {
    if (d === 0) order.push(center)
    else {
      if (center - d >= 0) order.push(center - d)
      if (center + d < n) order.push(center + d)
    }
  }
  return order
}

/** How many more units may go, past the first that fits, to avoid merging two turns of one role. */
const MAX_EXTRA_UNITS = 2

/** Concatenates two messages of the same role into one, keeping the first one's other fields. */
const merge = (first: unknown, second: unknown): unknown =>
  Predicate.isRecord(first) ? { ...first, content: [...blocksOf(first), ...blocksOf(second)] } : first

/**
 * The `middle-out` engine. Returns the body unchanged when its estimate is within `budgetTokens`;
 * otherwise removes whole messages from the middle of `messages` outwards until it fits, and returns
 * undefined when even removing everything removable is not enough.
 *
 * Kept always: `system` and every other top-level field, role `system` messages, every message up to
 * and including the first user message, and every message from the last user message on (with the
 * assistant `tool_use` it answers, and any assistant prefill after it). A `tool_use` and its
 * `tool_result` are removed together, never one without the other. Where a removal leaves two messages
 * of the same role side by side, up to two more units are removed to restore the alternation; failing
 * that, the two are merged into one message, content concatenated (what the Anthropic API does with
 * consecutive turns anyway). Nothing is inserted: no placeholder or summary text. Removal goes from the
 * middle unit outwards, alternately one older and one newer, so what goes is always one contiguous run.
 *
 * Pass the endpoint's context length less the requested `max_tokens` (and a margin for the estimate's
 * error) as the budget. `estimate` is called on whole bodies and on single messages and should be
 * roughly additive; the result is checked with it on the whole final body.
 */
export const middleOut = (
  body: JsonObject,
  budgetTokens: number,
  estimate: (value: unknown) => number = estimateTokens
): Compressed | undefined => {
  const total = estimate(body)
  if (total <= budgetTokens) return { body, removedMessages: 0, estimatedTokens: total }
  const messages = body.messages
  if (!Array.isArray(messages) || messages.length === 0) return undefined

  const firstUser = messages.findIndex((m) => roleOf(m) === "user")
  let lastUser = -1
  for (let i = messages.length - 1; i >= 0 && lastUser < 0; i--) if (roleOf(messages[i]) === "user") lastUser = i
  if (firstUser < 0) return undefined

  const units = unitsOf(messages)
  const unitOf = new Array<number>(messages.length)
  units.forEach((unit, u) => {
    for (let i = unit.start; i <= unit.end; i++) unitOf[i] = u
  })
  const removable: Array<number> = []
  for (let u = unitOf[firstUser] + 1; u < unitOf[lastUser]; u++) {
    const unit = units[u]
    if (!(unit.start === unit.end && roleOf(messages[unit.start]) === "system")) removable.push(u)
  }
  if (removable.length === 0) return undefined

  const cost = messages.map((m) => estimate(m))
  const unitCost = (u: number) => {
    let sum = 0
    for (let i = units[u].start; i <= units[u].end; i++) sum += cost[i]
    return sum
  }
  let additive = estimate({ ...body, messages: [] }) + cost.reduce((a, b) => a + b, 0)

  const removed = new Array<boolean>(messages.length).fill(false)
  let removedMessages = 0

  /** The kept messages, and the places where a removal put two messages of one role side by side. */
  const kept = () => {
    const out: Array<unknown> = []
    const seams: Array<number> = []
    let previous: unknown = undefined
    let gap = false
    for (let i = 0; i < messages.length; i++) {
      if (removed[i]) {
        gap = true
        continue
      }
      const role = roleOf(messages[i])
      if (role !== "system") {
        if (gap && previous !== undefined && roleOf(previous) === role) seams.push(out.length)
        previous = messages[i]
        gap = false
      }
      out.push(messages[i])
    }
    return { out, seams }
  }

  const withMerges = (out: Array<unknown>, seams: ReadonlyArray<number>) => {
    const merged = out.slice()
    for (let s = seams.length - 1; s >= 0; s--) {
      const at = seams[s]
      let before = at - 1
      while (roleOf(merged[before]) === "system") before--
      merged[before] = merge(merged[before], merged[at])
      merged.splice(at, 1)
    }
    return merged
  }

  const attempt = (messagesOut: Array<unknown>): Compressed | undefined => {
    const candidate = { ...body, messages: messagesOut }
    const estimatedTokens = estimate(candidate)
    return estimatedTokens <= budgetTokens ? { body: candidate, removedMessages, estimatedTokens } : undefined
  }

  let fallback: Compressed | undefined
  let extra = 0
  for (const position of middleOutOrder(removable.length)) {
    const unit = units[removable[position]]
    for (let i = unit.start; i <= unit.end; i++) removed[i] = true
    removedMessages += unit.end - unit.start + 1
    additive -= unitCost(removable[position])
    if (additive > budgetTokens) continue
    const { out, seams } = kept()
    if (seams.length === 0) {
      const done = attempt(out)
      if (done !== undefined) return done
    } else if (fallback === undefined) {
      fallback = attempt(withMerges(out, seams))
    } else if (++extra >= MAX_EXTRA_UNITS) {
      return fallback
    }
  }
  return fallback
}
