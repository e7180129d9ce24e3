/**
 * A JSON request body as written to an upstream. A body derived from the client's (see core's `JsonSource`) is
 * spliced from the client's own bytes: its top-level fields that are the parsed ones are sent as they came, and only
 * the fields the gateway changed (the model id, say) or added are serialised; the gateway's own fields are left out.
 * A coding agent's conversation of hundreds of KB is then neither serialised nor encoded again: a scan of its
 * top-level structure and a few small writes instead (docs/benchmarks.md, "a coding agent's requests").
 */
import { JsonSource } from "@model-gateway/core"
import type { Body } from "./HttpClient.js"

/** A text this long is encoded once, to bytes, rather than measured (`content-length`) and then encoded to be written. */
const ENCODE_FROM = 16 * 1024

const textBody = (text: string): Body => (text.length >= ENCODE_FROM ? [Buffer.from(text)] : text)

/** The body of `value`: spliced from the client's JSON text when it derives from it, serialised otherwise. */
export const encode = (value: { readonly [key: string]: unknown }): Body => {
  const source = JsonSource.of(value)
  const fields = source === undefined ? undefined : fieldsOf(source)
  return fields === undefined || source === undefined ? textBody(JSON.stringify(value)) : splice(value, source, fields)
}

/** One top-level field of a JSON text: its key as parsed, and the bytes from the key's opening quote to the value's end. */
export interface Member {
  readonly key: string
  readonly start: number
  readonly end: number
}

/** The top-level fields of a JSON object's text, in order, and their keys. */
export interface Fields {
  readonly members: ReadonlyArray<Member>
  readonly keys: ReadonlySet<string>
}

/** Scanned once per text (a fallback may write the same body to another upstream). Null: a text not to splice. */
const scanned = new WeakMap<Uint8Array, Fields | null>()

const fieldsOf = ({ bytes }: JsonSource.JsonSource): Fields | undefined => {
  let fields = scanned.get(bytes)
  if (fields === undefined) {
    fields = scan(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)) ?? null
    scanned.set(bytes, fields)
  }
  return fields ?? undefined
}

/**
 * `value` as the source's text with its fields: a field that is the parsed one (the same value, by identity) as it
 * came, a field changed or added serialised, a field left out (a gateway field) not written. Fields kept side by side
 * are one run of the source's bytes (the commas between them included), and what is serialised between two runs one
 * text: a body is a few parts, however many fields it has.
 */
const splice = (value: { readonly [key: string]: unknown }, source: JsonSource.JsonSource, fields: Fields): Body => {
  const { bytes, parsed } = source
  const parts: Array<Uint8Array> = []
  /** Serialised text not yet in `parts`: it goes before the next run, or last. */
  let text = "{"
  let empty = true
  let runStart = -1
  let runEnd = -1
  const separate = () => {
    if (empty) empty = false
    else text += ","
  }
  const endRun = () => {
    if (runStart < 0) return
    if (text !== "") parts.push(Buffer.from(text))
    parts.push(bytes.subarray(runStart, runEnd))
    text = ""
    runStart = -1
  }
  const serialise = (key: string, field: unknown) => {
    // What JSON.stringify leaves out of an object (undefined, a function) is left out here too.
    const json = JSON.stringify(field)
    if (json === undefined) return
    separate()
    text += `${JSON.stringify(key)}:${json}`
  }
  for (const { end, key, start } of fields.members) {
    if (!Object.hasOwn(value, key)) {
      endRun()
      continue
    }
    const field = value[key]
    if (field !== parsed[key]) {
      endRun()
      serialise(key, field)
    } else if (runStart < 0) {
      separate()
      runStart = start
      runEnd = end
    } else runEnd = end
  }
  endRun()
  for (const key of Object.keys(value)) if (!fields.keys.has(key)) serialise(key, value[key])
  parts.push(Buffer.from(`${text}}`))
  return parts
}

// ---- the scan ----------------------------------------------------------------------------------------------------

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
const COMMA_BYTE = 0x2c
const COLON = 0x3a

const isSpace = (byte: number | undefined): boolean => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09

/** The index after the closing quote of the string whose opening quote is at `at`; -1 if it has none. */
const stringEnd = (bytes: Buffer, at: number): number => {
  for (let from = at + 1;;) {
    const quote = bytes.indexOf(QUOTE, from)
    if (quote === -1) return -1
    // Escaped when an odd number of backslashes precede it.
    let before = quote - 1
    while (bytes[before] === BACKSLASH) before--
    if ((quote - 1 - before) % 2 === 0) return quote + 1
    from = quote + 1
  }
}

/** The index after the value that starts at `at` (no space before it); -1 if the text ends first. */
const valueEnd = (bytes: Buffer, at: number): number => {
  const first = bytes[at]
  if (first === QUOTE) return stringEnd(bytes, at)
  let i = at
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    // Strings are skipped whole (most of a conversation's bytes); only the brackets between them are counted.
    let depth = 0
    while (i < bytes.length) {
      const byte = bytes[i]
      if (byte === QUOTE) {
        i = stringEnd(bytes, i)
        if (i === -1) return -1
        continue
      }
      if (byte === OPEN_BRACE || byte === OPEN_BRACKET) depth++
      else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
        depth--
        if (depth === 0) return i + 1
      }
      i++
    }
    return -1
  }
  // A number, true, false or null: up to the next delimiter.
  while (i < bytes.length) {
    const byte = bytes[i]
    if (byte === COMMA_BYTE || byte === CLOSE_BRACE || byte === CLOSE_BRACKET || isSpace(byte)) return i
    i++
  }
  return -1
}

/** A key as JSON.parse reads it: ASCII without escapes as it is, anything else through JSON.parse. */
const keyOf = (bytes: Buffer, start: number, end: number): string => {
  for (let i = start + 1; i < end - 1; i++) {
    const byte = bytes[i]!
    if (byte === BACKSLASH || byte >= 0x80) return JSON.parse(bytes.toString("utf8", start, end)) as string
  }
  return bytes.toString("latin1", start + 1, end - 1)
}

/**
 * The top-level fields of a JSON object's text (the text of a value JSON.parse accepted), or undefined when it is not
 * one object (leading text, say) or has a key twice: JSON.parse keeps the last, and an upstream might read the first.
 */
export const scan = (bytes: Buffer): Fields | undefined => {
  let i = 0
  const skipSpace = () => {
    while (isSpace(bytes[i])) i++
  }
  skipSpace()
  if (bytes[i] !== OPEN_BRACE) return undefined
  i++
  skipSpace()
  const members: Array<Member> = []
  const keys = new Set<string>()
  if (bytes[i] === CLOSE_BRACE) return { members, keys }
  for (;;) {
    if (bytes[i] !== QUOTE) return undefined
    const start = i
    const keyEnd = stringEnd(bytes, i)
    if (keyEnd === -1) return undefined
    const key = keyOf(bytes, start, keyEnd)
    if (keys.has(key)) return undefined
    keys.add(key)
    i = keyEnd
    skipSpace()
    if (bytes[i] !== COLON) return undefined
    i++
    skipSpace()
    const end = valueEnd(bytes, i)
    if (end === -1) return undefined
    members.push({ key, start, end })
    i = end
    skipSpace()
    if (bytes[i] === COMMA_BYTE) {
      i++
      skipSpace()
      continue
    }
    return bytes[i] === CLOSE_BRACE ? { members, keys } : undefined
  }
}
