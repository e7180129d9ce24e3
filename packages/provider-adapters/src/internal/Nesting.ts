/**
 * How deep an upstream's JSON may nest. `JSON.parse` takes any depth (it does not recurse), but what the gateway does
 * with the value afterwards does: `JSON.stringify` of the answer, the translations, the client's own parser. A
 * provider that answers with a tool input or an extra field some thousands of levels deep would overflow the stack
 * there, after the status was chosen: a 500, or a stream that ends with nothing. So an answer, a stream event or a
 * tool call's arguments nested deeper than the bound is refused where it is read, as a malformed answer is (pitfall
 * 18: bound the depth before anything recurses).
 */
import { MessagesRequest } from "@model-gateway/core"

/**
 * The deepest nesting of JSON a client sent inside a string (a tool call's `arguments`), which the request's own bound
 * does not see: that same bound (core's `MessagesRequest.MAX_DEPTH`, 128).
 */
export const MAX_CLIENT_DEPTH = MessagesRequest.MAX_DEPTH

/**
 * The deepest nesting of objects and arrays accepted from an upstream: twice a client request's, so that an answer's
 * envelope (a message, its content, a block) around a tool input a client may send back still fits, and far below
 * what overflows the stack (some thousands of levels).
 */
export const MAX_UPSTREAM_DEPTH = 2 * MAX_CLIENT_DEPTH

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d

/**
 * Whether a JSON text nests objects and arrays deeper than `limit`. A text of at most `2 × limit` characters cannot
 * (each level takes an opening and a closing bracket), and is not read: every ordinary stream event and most answers
 * cost one comparison. Brackets inside strings do not count. Read for its brackets only: the text need not be valid
 * JSON (parsing it says that).
 */
export const tooDeep = (text: string, limit: number = MAX_UPSTREAM_DEPTH): boolean => {
  if (text.length <= 2 * limit) return false
  let depth = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === QUOTE) {
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i)
        if (s === BACKSLASH) i++
        else if (s === QUOTE) break
      }
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > limit) return true
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--
    }
  }
  return false
}

/** The message of an upstream text refused by `tooDeep`, naming what it was. */
export const tooDeepMessage = (what: string): string =>
  `upstream sent ${what} nested deeper than ${MAX_UPSTREAM_DEPTH} levels of objects and arrays`
