/**
 * The common shapes of a conversation's messages, checked with plain code: the messages a coding agent sends on every
 * turn (text, tool calls and their results, thinking, images), the bulk of a large request. `MessagesRequest` accepts
 * a message this check accepts as it is (see `RequestSchema.withFastPath`); every other message (another block kind, a
 * field of the wrong type) goes through its schema, which accepts it or names what is wrong.
 *
 * So this check must accept nothing `MessagesRequest`'s schema refuses: it mirrors the schemas of the blocks it knows,
 * field by field, and refuses (leaves to the schema) anything else. A property test keeps the two in step.
 */
import * as Predicate from "effect/Predicate"

type Fields = { readonly [key: string]: unknown }

/** An object, not an array (what the schemas' `object` and `AnyObject` take). */
const isRecord: (u: unknown) => u is Fields = Predicate.isRecord

/** An optional field (`optional(...)`, exact): absent, or present and passing `check`. */
const absentOr = (o: Fields, key: string, check: (value: unknown) => boolean): boolean => {
  const value = o[key]
  return value === undefined ? !Object.hasOwn(o, key) : check(value)
}

const isString = (u: unknown): boolean => typeof u === "string"

/** Every item passes `check`; a hole is `undefined`, as the schema reads it (`every` would skip it). */
const all = (items: ReadonlyArray<unknown>, check: (item: unknown) => boolean): boolean => {
  for (let i = 0; i < items.length; i++) if (!check(items[i])) return false
  return true
}

const isBoolean = (u: unknown): boolean => typeof u === "boolean"

const cacheControlValue = (c: unknown): boolean =>
  c === null || (isRecord(c) && c.type === "ephemeral" && absentOr(c, "ttl", isString))

/** `cache_control`: absent, null, or `{ type: "ephemeral", ttl?: string }`. */
const cacheControl = (block: Fields): boolean => absentOr(block, "cache_control", cacheControlValue)

const imageSource = (source: unknown): boolean => {
  if (!isRecord(source)) return false
  switch (source.type) {
    case "base64":
      return isString(source.media_type) && isString(source.data)
    case "url":
      return isString(source.url)
    default:
      return false
  }
}

const textBlock = (block: Fields): boolean => isString(block.text) && cacheControl(block)

const imageBlock = (block: Fields): boolean => imageSource(block.source) && cacheControl(block)

/** A block inside a `tool_result`'s content: text or an image. */
const toolResultPart = (part: unknown): boolean => {
  if (!isRecord(part)) return false
  switch (part.type) {
    case "text":
      return textBlock(part)
    case "image":
      return imageBlock(part)
    default:
      return false
  }
}

const toolResultContent = (content: unknown): boolean =>
  isString(content) || (Array.isArray(content) && all(content, toolResultPart))

const block = (b: unknown): boolean => {
  if (!isRecord(b)) return false
  switch (b.type) {
    case "text":
      return textBlock(b)
    case "tool_use":
      return isString(b.id) && isString(b.name) && cacheControl(b)
    case "tool_result":
      return isString(b.tool_use_id) && absentOr(b, "content", toolResultContent) &&
        absentOr(b, "is_error", isBoolean) && cacheControl(b)
    case "thinking":
      return isString(b.thinking) && isString(b.signature)
    case "redacted_thinking":
      return isString(b.data)
    case "image":
      return imageBlock(b)
    default:
      return false
  }
}

const ROLES = new Set<unknown>(["user", "assistant", "system"])

/** A message of the common shapes, as `MessagesRequest`'s message schema accepts it. */
export const isPlainMessage = (m: unknown): boolean => {
  if (!isRecord(m) || !ROLES.has(m.role)) return false
  const content = m.content
  if (!isString(content) && !(Array.isArray(content) && all(content, block))) return false
  return absentOr(m, "clear_at", isRecord) && absentOr(m, "output_config", isRecord)
}
