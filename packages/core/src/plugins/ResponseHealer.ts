/**
 * The `response-healing` plugin's port: turns the text of a non-streamed answer to a request with
 * `output_config.format` of type `json_schema` into a JSON value that satisfies the schema, repairing
 * the usual damage (code fences, prose around the JSON, trailing commas, unquoted keys, single quotes,
 * a cut-off end) when the text is not already valid JSON.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import type * as Effect from "effect/Effect"

/** Why healing gave up. */
export type HealingFailure =
  /** no JSON value could be recovered from the text, even after repair */
  | "unparseable"
  /** JSON was recovered, but it does not satisfy the schema */
  | "schema_violation"
  /** the schema itself cannot be compiled (unknown draft, broken `$ref`) */
  | "invalid_schema"

/** Healing failed; `issues` lists what failed (a parse error, or each schema violation as `<pointer> <message>`). */
export class HealingFailed extends Data.TaggedError("HealingFailed")<{
  readonly reason: HealingFailure
  readonly issues: ReadonlyArray<string>
  readonly message: string
}> {}

/** Builds a `HealingFailed` whose message lists the issues. */
export const healingFailed = (reason: HealingFailure, issues: ReadonlyArray<string>): HealingFailed => {
  const what = reason === "unparseable"
    ? "the answer is not parseable as JSON, even after repair"
    : reason === "schema_violation"
    ? "the answer does not satisfy the requested JSON schema"
    : "the requested JSON schema cannot be compiled"
  return new HealingFailed({
    reason,
    issues,
    message: issues.length === 0 ? what : `${what}: ${issues.join("; ")}`
  })
}

/** The healed value; `repaired` is false when the text was already valid JSON satisfying the schema. */
export interface Healed {
  readonly value: unknown
  readonly repaired: boolean
}

export interface ResponseHealerService {
  /** Recovers a JSON value from `text` and validates it against the JSON schema `schema`. */
  readonly heal: (text: string, schema: unknown) => Effect.Effect<Healed, HealingFailed>
}

/** Port: JSON repair and schema validation for structured outputs. */
export class ResponseHealer extends Context.Tag("@model-gateway/core/ResponseHealer")<
  ResponseHealer,
  ResponseHealerService
>() {}
