/**
 * Generators of JSON-ish request parts for the property tests that hold a plain check to its schema: values of every
 * kind to put in any field, and objects whose fields may be left out.
 */
import * as fc from "fast-check"

/** Values of every JSON kind (and `undefined`), short, to put in any field. */
export const anyValue = fc.oneof(
  fc.string({ maxLength: 3 }),
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.constant({}),
  fc.constant([])
)

/** A field drawn so is left out of its object (see `fields`). */
export const ABSENT = Symbol("absent")

/** An object of these fields, those drawn `ABSENT` left out. */
export const fields = (shape: Record<string, fc.Arbitrary<unknown>>) =>
  fc.record(shape).map((o) => {
    const out: Record<string, unknown> = {}
    for (const [key, value] of Object.entries(o)) if (value !== ABSENT) out[key] = value
    return out
  })
