/**
 * A JSON request body as written to an upstream. A body derived from the client's (see core's `JsonSource`) is
 * spliced from the client's own bytes: its top-level fields that are the parsed ones are sent as they came, and only
 * the fields the gateway changed (the model id, say) or added are serialised; the gateway's own fields are left out.
 * A coding agent's conversation of hundreds of KB is then neither serialised nor encoded again: its top-level fields
 * (noted when it was parsed, or found by a scan) and a few small writes instead (docs/benchmarks.md, "a coding agent's
 * requests").
 */
import { JsonSource, JsonText } from "@model-gateway/core"
import type { Body } from "./HttpClient.js"

/** A text this long is encoded once, to bytes, rather than measured (`content-length`) and then encoded to be written. */
const ENCODE_FROM = 16 * 1024

/** The body of `value`: spliced from the client's JSON text when it derives from it, serialised otherwise. */
export const encode = (value: { readonly [key: string]: unknown }): Body => {
  const source = JsonSource.of(value)
  const fields = source === undefined ? undefined : fieldsOf(source)
  return fields === undefined || source === undefined ? serialised(value) : splice(value, source, fields)
}

/**
 * Texts gathered into parts of at most `JsonText.PIECE` characters, each encoded on its own: never one string over
 * V8's 128 KB, which would take fresh pages (core's `JsonText` says why). A body under `ENCODE_FROM` stays a text.
 */
class Parts {
  private readonly parts: Array<Uint8Array> = []
  private pending: Array<string> = []
  private size = 0

  add(text: string): void {
    if (this.size + text.length > JsonText.PIECE && this.size > 0) {
      this.parts.push(Buffer.from(this.pending.join("")))
      this.pending = []
      this.size = 0
    }
    this.pending.push(text)
    this.size += text.length
  }

  body(): Body {
    const last = this.pending.join("")
    if (this.parts.length === 0 && last.length < ENCODE_FROM) return last
    this.parts.push(Buffer.from(last))
    return this.parts
  }
}

const hasToJson = (value: object): boolean => typeof (value as { readonly toJSON?: unknown }).toJSON === "function"

/**
 * A body with fewer elements than this in its top-level arrays is serialised whole: one `JSON.stringify` costs less
 * than one per field (a request of one message, the usual small one, pays no more than before). A conversation worth
 * serialising in parts has more turns.
 */
const PIECEWISE_FROM = 16

const elementsOf = (value: { readonly [key: string]: unknown }): number => {
  let n = 0
  for (const key in value) {
    const field = value[key]
    if (Array.isArray(field)) n += field.length
  }
  return n
}

/**
 * `JSON.stringify(value)`, for a body the gateway made (a translated conversation, hundreds of KB): its fields
 * serialised one by one, and an array's elements one by one, so that only an element larger than a part makes a
 * string that large. A body of a few turns is serialised whole (`PIECEWISE_FROM`). The same text as `JSON.stringify`
 * for JSON data (a field that serialises to nothing left out, such an element written `null`); a `toJSON` on the body
 * or on an array field is serialised as `JSON.stringify` does it.
 */
const serialised = (value: { readonly [key: string]: unknown }): Body => {
  if (hasToJson(value) || elementsOf(value) < PIECEWISE_FROM) {
    const text = JSON.stringify(value)
    return text.length >= ENCODE_FROM ? [Buffer.from(text)] : text
  }
  const out = new Parts()
  out.add("{")
  let first = true
  for (const key of Object.keys(value)) {
    const field = value[key]
    if (Array.isArray(field) && !hasToJson(field)) {
      out.add(`${first ? "" : ","}${JSON.stringify(key)}:[`)
      for (let i = 0; i < field.length; i++) {
        if (i > 0) out.add(",")
        out.add(JSON.stringify(field[i]) ?? "null")
      }
      out.add("]")
    } else {
      const json = JSON.stringify(field)
      if (json === undefined) continue
      out.add(`${first ? "" : ","}${JSON.stringify(key)}:${json}`)
    }
    first = false
  }
  out.add("}")
  return out.body()
}

/**
 * Scanned once per text (a fallback may write the same body to another upstream) when the parser did not note the
 * fields. Null: a text not to splice.
 */
const scanned = new WeakMap<Uint8Array, JsonText.Fields | null>()

const decode: JsonText.Decode = (bytes, start, end) =>
  Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8", start, end)

const fieldsOf = (source: JsonSource.JsonSource): JsonText.Fields | undefined => {
  if (source.fields !== undefined) return source.fields
  const { bytes } = source
  let fields = scanned.get(bytes)
  if (fields === undefined) {
    fields = JsonText.fields(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), decode) ?? null
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
const splice = (
  value: { readonly [key: string]: unknown },
  source: JsonSource.JsonSource,
  fields: JsonText.Fields
): Body => {
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
