/**
 * A JSON text read from its UTF-8 bytes: where its top-level fields lie (for `JsonSource`'s splicing), and its value
 * parsed in pieces rather than decoded into one string first.
 *
 * Why pieces: V8 allocates a string of more than 128 KB in a space of its own, on pages mapped afresh for each one and
 * unmapped when it dies, so the kernel zero-fills every page on first touch. Decoding a coding agent's 200 KB request
 * into one string took 53 page faults and ~300 µs here, against ~70 µs for the same bytes decoded in pieces that stay
 * under that size (docs/benchmarks.md, "a large request's text in pieces"). So a large object or array is walked
 * here, its small members gathered into runs of at most `PIECE` bytes, each run parsed by `JSON.parse`, and a member
 * too large for a run walked in turn. What is not a container (a string of 200 KB) is parsed whole: its value is that
 * large anyway.
 *
 * The walk only checks what lies between the pieces (spaces, commas, colons, brackets, keys); `JSON.parse` checks each
 * piece. Whatever the walk does not follow throws, and the caller then parses the text whole (which gives
 * `JSON.parse`'s own error): the value, when there is one, is always the one `JSON.parse` gives for the whole text.
 * Runs on any JavaScript runtime: decoding is the caller's (core has no `TextDecoder`).
 */

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

/** The text of `bytes[start, end)`, which must be valid UTF-8: a decoder that throws on anything else. */
export type Decode = (bytes: Uint8Array, start: number, end: number) => string

/**
 * The most bytes parsed as one piece: under V8's 128 KB even when the text holds a character beyond Latin-1, which
 * makes its string two bytes a character.
 */
export const PIECE = 48 * 1024

/** A container that does not end within this many bytes is walked rather than gathered into a run. */
const LARGE = 16 * 1024

/** Containers deeper than this are parsed whole, however large: the walk's own stack stays shallow. */
const MAX_DEPTH = 16

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
const COMMA = 0x2c
const COLON = 0x3a

const isSpace = (byte: number | undefined): boolean => byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09

const skipSpace = (bytes: Uint8Array, at: number): number => {
  let i = at
  while (isSpace(bytes[i])) i++
  return i
}

/** The index after the closing quote of the string whose opening quote is at `at`; -1 if it has none. */
const stringEnd = (bytes: Uint8Array, at: number): number => {
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

/**
 * The index after the value that starts at `at` (no space before it); -1 if the text ends first, or (for a container)
 * if it does not end before `limit`.
 */
const valueEnd = (bytes: Uint8Array, at: number, limit = bytes.length): number => {
  const first = bytes[at]
  if (first === QUOTE) return stringEnd(bytes, at)
  let i = at
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    // Strings are skipped whole (most of a conversation's bytes); only the brackets between them are counted.
    const end = Math.min(limit, bytes.length)
    let depth = 0
    while (i < end) {
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
    if (byte === COMMA || byte === CLOSE_BRACE || byte === CLOSE_BRACKET || isSpace(byte)) return i
    i++
  }
  return -1
}

/**
 * A key as `JSON.parse` reads it: printable ASCII without escapes as it is, anything else through `JSON.parse` (which
 * refuses what a key may not hold, a raw control character say).
 */
const keyOf = (bytes: Uint8Array, start: number, end: number, decode: Decode): string => {
  if (end - start > 64) return JSON.parse(decode(bytes, start, end)) as string
  let key = ""
  for (let i = start + 1; i < end - 1; i++) {
    const byte = bytes[i]!
    if (byte === BACKSLASH || byte >= 0x80 || byte < 0x20) return JSON.parse(decode(bytes, start, end)) as string
    key += String.fromCharCode(byte)
  }
  return key
}

/**
 * The top-level fields of a JSON object's text (the text of a value `JSON.parse` accepted), or undefined when it is
 * not one object (leading text, say) or has a key twice: `JSON.parse` keeps the last, and an upstream might read the
 * first.
 */
export const fields = (bytes: Uint8Array, decode: Decode): Fields | undefined => {
  let i = skipSpace(bytes, 0)
  if (bytes[i] !== OPEN_BRACE) return undefined
  i = skipSpace(bytes, i + 1)
  const members: Array<Member> = []
  const keys = new Set<string>()
  if (bytes[i] === CLOSE_BRACE) return { members, keys }
  for (;;) {
    if (bytes[i] !== QUOTE) return undefined
    const start = i
    const keyEnd = stringEnd(bytes, i)
    if (keyEnd === -1) return undefined
    const key = keyOf(bytes, start, keyEnd, decode)
    if (keys.has(key)) return undefined
    keys.add(key)
    i = skipSpace(bytes, keyEnd)
    if (bytes[i] !== COLON) return undefined
    i = skipSpace(bytes, i + 1)
    const end = valueEnd(bytes, i)
    if (end === -1) return undefined
    members.push({ key, start, end })
    i = skipSpace(bytes, end)
    if (bytes[i] === COMMA) {
      i = skipSpace(bytes, i + 1)
      continue
    }
    return bytes[i] === CLOSE_BRACE ? { members, keys } : undefined
  }
}

/** What the walk does not follow: the caller parses the text whole. */
const unfollowed = (): never => {
  throw new SyntaxError("JSON text not followed in pieces")
}

/** An own, enumerable field, as `JSON.parse` makes it: `__proto__` too is a field, not the object's prototype. */
const setField = (out: Record<string, unknown>, key: string, value: unknown): void => {
  if (key === "__proto__") {
    Object.defineProperty(out, key, { value, writable: true, enumerable: true, configurable: true })
  } else out[key] = value
}

/** Where a run's bytes are copied between brackets; reused (a run is decoded at once). */
const scratch = new Uint8Array(PIECE + 2)

/**
 * The text of a run of members (`bytes[start, end)`) between braces, or of elements between brackets: its bytes
 * copied between the brackets and decoded once. Adding the brackets to the decoded text instead would make `JSON.parse`
 * copy it again, whole.
 */
const bracketed = (bytes: Uint8Array, start: number, end: number, isObject: boolean, decode: Decode): string => {
  const length = end - start + 2
  const into = length <= scratch.length ? scratch : new Uint8Array(length)
  into[0] = isObject ? OPEN_BRACE : OPEN_BRACKET
  into.set(bytes.subarray(start, end), 1)
  into[length - 1] = isObject ? CLOSE_BRACE : CLOSE_BRACKET
  return decode(into, 0, length)
}

/**
 * The value of a JSON text that is one object (spaces around it allowed), parsed in pieces of at most `piece` bytes,
 * and its top-level fields (undefined when a key comes twice). Throws on any text it does not follow, malformed or
 * not, and where `decode` throws: the caller then parses the text whole.
 */
export const parse = (
  bytes: Uint8Array,
  decode: Decode,
  piece: number = PIECE
): { readonly value: Record<string, unknown>; readonly fields: Fields | undefined } => {
  const large = Math.min(LARGE, piece)
  let i = skipSpace(bytes, 0)
  if (bytes[i] !== OPEN_BRACE) unfollowed()
  const members: Array<Member> = []
  const keys = new Set<string>()
  let twice = false

  /**
   * The container whose opening bracket is at `i`, walked: `i` is left after its closing bracket. At the top
   * (`depth` 0) its members are noted.
   */
  const container = (depth: number): unknown => {
    const isObject = bytes[i] === OPEN_BRACE
    const close = isObject ? CLOSE_BRACE : CLOSE_BRACKET
    const out: Record<string, unknown> | Array<unknown> = isObject ? {} : []
    // The run of members gathered so far, from the first one's start to the last one's end.
    let runStart = -1
    let runEnd = -1
    const flush = () => {
      if (runStart < 0) return
      const text = bracketed(bytes, runStart, runEnd, isObject, decode)
      runStart = -1
      if (isObject) {
        const parsed = JSON.parse(text) as Record<string, unknown>
        for (const key of Object.keys(parsed)) setField(out as Record<string, unknown>, key, parsed[key])
      } else {
        const parsed = JSON.parse(text) as Array<unknown>
        for (let k = 0; k < parsed.length; k++) (out as Array<unknown>).push(parsed[k])
      }
    }
    i = skipSpace(bytes, i + 1)
    if (bytes[i] === close) {
      i++
      return out
    }
    for (;;) {
      const start = i
      let keyEnd = -1
      if (isObject) {
        if (bytes[i] !== QUOTE) unfollowed()
        keyEnd = stringEnd(bytes, i)
        if (keyEnd === -1) unfollowed()
        i = skipSpace(bytes, keyEnd)
        if (bytes[i] !== COLON) unfollowed()
        i = skipSpace(bytes, i + 1)
      }
      const first = bytes[i]
      const isContainer = first === OPEN_BRACE || first === OPEN_BRACKET
      // A container that does not end soon is walked in turn (unless nested too deep); anything else is run material.
      let end = isContainer && depth < MAX_DEPTH ? valueEnd(bytes, i, i + large) : valueEnd(bytes, i)
      // No value at all (`[1,]`): a run of nothing would parse.
      if (end === i) unfollowed()
      const key = isObject && (depth === 0 || end === -1) ? keyOf(bytes, start, keyEnd, decode) : ""
      if (end === -1) {
        if (!isContainer || depth >= MAX_DEPTH) unfollowed()
        flush()
        const value = container(depth + 1)
        if (isObject) setField(out as Record<string, unknown>, key, value)
        else (out as Array<unknown>).push(value)
        end = i
      } else {
        if (runStart >= 0 && end - runStart > piece) flush()
        if (runStart < 0) runStart = start
        runEnd = end
      }
      if (depth === 0) {
        if (keys.has(key)) twice = true
        keys.add(key)
        members.push({ key, start, end })
      }
      i = skipSpace(bytes, end)
      if (bytes[i] === COMMA) {
        i = skipSpace(bytes, i + 1)
        continue
      }
      if (bytes[i] !== close) unfollowed()
      i++
      flush()
      return out
    }
  }

  const value = container(0) as Record<string, unknown>
  if (skipSpace(bytes, i) !== bytes.length) unfollowed()
  return { value, fields: twice ? undefined : { members, keys } }
}
