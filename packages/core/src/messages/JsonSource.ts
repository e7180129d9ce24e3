/**
 * The JSON text a request body was parsed from, kept so that the body an upstream receives (the client's, with a few
 * top-level fields changed: the model id, the gateway's own fields left out) can be sent as that text with those
 * fields spliced in, rather than serialised and encoded again. A coding agent sends its whole conversation with every
 * turn, hundreds of KB, and serialising that again cost more than the rest of the request (docs/benchmarks.md, "a
 * coding agent's requests").
 *
 * The HTTP edge records where a body it parsed came from (`record`); what derives a body from another (`Wire.withField`,
 * `UpstreamBody.forwardBody`) carries it (`derive`); the adapter that writes a body for its upstream asks for it (`of`)
 * and compares the body with the parsed object, top-level field by field, by identity: a field that is the parsed one
 * is sent as its text. So nothing reachable from a parsed body may be changed in place: a changed copy is made instead,
 * as everywhere in the gateway. The one exception is a conversation let go once sent (`Conversation`), whose arrays
 * are emptied: that body is never written again, a fallback's body is parsed again from the bytes (`reparser`).
 */

import type { Fields } from "./JsonText.js"

/**
 * A body's source: the object parsed, the text it was parsed from (valid UTF-8), and that text's top-level fields when
 * the parser noted them (see `JsonText.parse`; otherwise the adapter finds them with `JsonText.fields`).
 */
export interface JsonSource {
  readonly parsed: { readonly [key: string]: unknown }
  readonly bytes: Uint8Array
  readonly fields?: Fields | undefined
}

/**
 * Smaller bodies are not recorded: serialising them again costs about what splicing them does, and the record has
 * its own cost.
 */
export const MIN_BYTES = 4 * 1024

/**
 * The bytes are held weakly: nothing else needs them once parsed, and a request awaiting its answer (a minute, for a
 * long one) must not hold its body twice, parsed and as bytes. They outlive the turn of the event loop they were
 * recorded in (a `WeakRef`'s target is kept until the end of the job that made it), and a body is parsed and its first
 * upstream request written in one turn on the usual path; one written later (after a wait on a remote store, or a
 * fallback's) may find them collected, and is serialised instead.
 */
interface Recorded {
  readonly parsed: JsonSource["parsed"]
  readonly bytes: WeakRef<Uint8Array>
  readonly fields: Fields | undefined
  readonly parse: Parse | undefined
}

/** The parser a body was parsed with (the HTTP edge's), able to parse its bytes again; it records what it parses. */
export type Parse = (bytes: Uint8Array) => object

const sources = new WeakMap<object, Recorded>()

/**
 * Records that `parsed` was parsed from `bytes` (valid UTF-8, exactly its JSON text), whose top-level fields are
 * `fields` when known, by `parse` when given (see `reparser`); small bodies are not recorded.
 */
export const record = (parsed: object, bytes: Uint8Array, fields?: Fields, parse?: Parse): void => {
  if (bytes.byteLength >= MIN_BYTES) {
    sources.set(parsed, { parsed: parsed as JsonSource["parsed"], bytes: new WeakRef(bytes), fields, parse })
  }
}

/**
 * What parses `body`'s text again, to a new object equal to the parsed one as it was parsed (and recorded in turn),
 * when `body` is that parsed object itself and its parser was recorded; it holds the bytes from now on. Undefined
 * otherwise, or when the bytes were collected already.
 */
export const reparser = (body: object): (() => object) | undefined => {
  const recorded = sources.get(body)
  const bytes = recorded?.bytes.deref()
  if (bytes === undefined || recorded!.parsed !== body || recorded!.parse === undefined) return undefined
  const parse = recorded!.parse
  return () => parse(bytes)
}

/** The source of `body` (recorded for it, or carried to it from the body it derives from), while its bytes are held. */
export const of = (body: object): JsonSource | undefined => {
  const recorded = sources.get(body)
  const bytes = recorded?.bytes.deref()
  return bytes === undefined ? undefined : { parsed: recorded!.parsed, bytes, fields: recorded!.fields }
}

/** `derived`, a copy of `from` with some top-level fields changed, carrying `from`'s source. */
export const derive = <A extends object>(derived: A, from: object): A => {
  const source = sources.get(from)
  if (source !== undefined) sources.set(derived, source)
  return derived
}
