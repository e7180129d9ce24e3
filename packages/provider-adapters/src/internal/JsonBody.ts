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

const textBody = (text: string): Body => (text.length >= ENCODE_FROM ? [Buffer.from(text)] : text)

/** The body of `value`: spliced from the client's JSON text when it derives from it, serialised otherwise. */
export const encode = (value: { readonly [key: string]: unknown }): Body => {
  const source = JsonSource.of(value)
  const fields = source === undefined ? undefined : fieldsOf(source)
  return fields === undefined || source === undefined ? textBody(JSON.stringify(value)) : splice(value, source, fields)
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
