/**
 * Column schemas that read the same on SQLite and PostgreSQL: SQLite has no boolean (0/1) and PostgreSQL returns
 * BIGINT columns as strings. Rows are decoded with these (through `SqlSchema`), not converted by hand.
 */
import * as Schema from "effect/Schema"

/** A boolean stored as an INTEGER 0/1. */
export const Flag = Schema.transform(Schema.Union(Schema.Number, Schema.Boolean), Schema.Boolean, {
  strict: true,
  decode: (value) => Boolean(value),
  encode: (flag) => flag
})

/** A number from an INTEGER, BIGINT or DOUBLE PRECISION column (PostgreSQL returns BIGINT as a string). */
export const Num = Schema.Union(Schema.Number, Schema.NumberFromString)

/** A nullable text column. */
export const Text = Schema.NullOr(Schema.String)
