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
 * as everywhere in the gateway.
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
}

const sources = new WeakMap<object, Recorded>()

/**
 * Records that `parsed` was parsed from `bytes` (valid UTF-8, exactly its JSON text), whose top-level fields are
 * `fields` when known; small bodies are not recorded.
 */
export const record = (parsed: object, bytes: Uint8Array, fields?: Fields): void => {
  if (bytes.byteLength >= MIN_BYTES) {
    sources.set(parsed, { parsed: parsed as JsonSource["parsed"], bytes: new WeakRef(bytes), fields })
  }
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
