/**
 * The `provider` preferences of a request (OpenRouter's provider routing object) and the deprecated `route` field,
 * as `effect/Schema` models, and `effective`, which folds `route` into the preferences the route planner reads.
 *
 * Unlike the rest of the request body, the preferences object is closed: an unknown key is rejected (a 400 naming
 * e.g. `provider.bogus`), so that a misspelt preference never silently routes somewhere the client did not want.
 * Every key may also be `null`, which means the same as leaving it out (OpenRouter's SDK sends nulls).
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import { show } from "../internal/Values.js"
import { isDecimal } from "../pricing/Cost.js"

// -----------------------------------------------------------------------------
// helpers (the request schema's conventions: one error per field, named by its path)
// -----------------------------------------------------------------------------

type AnySchema = Schema.Schema.Any

const optional = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

/** One of a few string values, with one readable error. */
const literal = <const L extends readonly [string, ...Array<string>]>(...values: L): Schema.Schema<L[number]> => {
  const allowed = new Set<unknown>(values)
  const list = values.map((value) => JSON.stringify(value)).join(" | ")
  return Schema.declare((u): u is L[number] => allowed.has(u), {
    description: list,
    message: (issue) => `Expected ${list}, actual ${show(issue.actual)}`
  })
}

type Case<S extends AnySchema> = { readonly is: (u: unknown) => boolean; readonly schema: S }

type Parser = (input: unknown, options?: SchemaAST.ParseOptions) => Either.Either<unknown, ParseResult.ParseIssue>

/**
 * A schema whose member is chosen by a look at the input (its JSON shape), so that an error is the chosen member's
 * own ("provider.sort.by: ...") rather than a list of every member's failure.
 */
const byShape = (description: string, allowNull: boolean, cases: ReadonlyArray<Case<AnySchema>>): AnySchema => {
  const make = (parsers: ReadonlyArray<Parser>) =>
  (
    input: unknown,
    options: SchemaAST.ParseOptions,
    ast: SchemaAST.Declaration
  ) => {
    if (input === null && allowNull) return Either.right(null)
    for (let i = 0; i < cases.length; i++) if (cases[i].is(input)) return parsers[i](input, options)
    return Either.left(new ParseResult.Type(ast, input, `Expected ${description}, actual ${show(input)}`))
  }
  return Schema.declare(cases.map((c) => c.schema), {
    decode: (...schemas) => make(schemas.map((schema) => ParseResult.decodeUnknownEither(schema))),
    encode: (...schemas) => make(schemas.map((schema) => ParseResult.encodeUnknownEither(schema)))
  }, { description })
}

/** `first` (or `second`, for another JSON shape). */
const oneOf = <A extends AnySchema, B extends AnySchema = A>(
  description: string,
  first: Case<A>,
  second?: Case<B>
): Schema.Schema<Schema.Schema.Type<A | B>, Schema.Schema.Encoded<A | B>> =>
  byShape(description, false, second === undefined ? [first] : [first, second]) as any

/** `first` (or `second`, for another JSON shape) or null; null means the same as an absent key. */
const nullable = <A extends AnySchema, B extends AnySchema = A>(
  description: string,
  first: Case<A>,
  second?: Case<B>
): Schema.Schema<Schema.Schema.Type<A | B> | null, Schema.Schema.Encoded<A | B> | null> =>
  byShape(description, true, second === undefined ? [first] : [first, second]) as any

/** A closed object: an unknown key is an error ("is unexpected"). */
const closed = <Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.Struct(fields).annotations({ parseOptions: { onExcessProperty: "error" } })

const isString = (u: unknown) => typeof u === "string"
const isNumber = (u: unknown) => typeof u === "number"
const isBoolean = (u: unknown) => typeof u === "boolean"

const nullableBoolean = optional(nullable("a boolean", { is: isBoolean, schema: Schema.Boolean }))

const NonNegative = Schema.Number.pipe(
  Schema.filter((n) => Number.isFinite(n) && n >= 0, {
    description: "a non-negative number",
    message: (issue) => `must be a non-negative number, got ${show(issue.actual)}`
  })
)

const DecimalString = Schema.String.pipe(
  Schema.filter(isDecimal, {
    description: "a non-negative decimal string",
    message: (issue) => `must be a non-negative decimal number, got ${show(issue.actual)}`
  })
)

const slugs = optional(
  nullable("an array of provider names", { is: Array.isArray, schema: Schema.Array(Schema.String) })
)

// -----------------------------------------------------------------------------
// the preferences
// -----------------------------------------------------------------------------

/** The ways `sort` can order endpoints. */
export const SortBy = literal("price", "throughput", "latency")
export type SortBy = typeof SortBy.Type

/** `model`: endpoints are sorted within each candidate model, models keep their order; `none`: all together. */
export const Partition = literal("model", "none")
export type Partition = typeof Partition.Type

/** Quantization levels (OpenRouter's list); `unknown` matches endpoints whose quantization is not configured. */
export const Quantization = literal(
  "int4",
  "int8",
  "fp4",
  "mxfp4",
  "nvfp4",
  "fp6",
  "fp8",
  "mxfp8",
  "fp16",
  "bf16",
  "fp32",
  "unknown"
)
export type Quantization = typeof Quantization.Type

const sortConfigSchema = closed({
  by: optional(nullable("a string", { is: isString, schema: SortBy })),
  partition: optional(nullable("a string", { is: isString, schema: Partition }))
})
/** `{ by, partition }`: the long form of `sort`. */
export interface SortConfig extends Schema.Schema.Type<typeof sortConfigSchema> {}

const percentile = optional(nullable("a number", { is: isNumber, schema: NonNegative }))

const percentilesSchema = closed({ p50: percentile, p75: percentile, p90: percentile, p99: percentile })
/** Cut-offs per percentile of the last 30 minutes; a number alone applies to p50. */
export interface PercentileCutoffs extends Schema.Schema.Type<typeof percentilesSchema> {}

const cutoff = optional(nullable(
  "a number or a percentile object",
  { is: isNumber, schema: NonNegative },
  { is: Predicate.isRecord, schema: percentilesSchema }
))

const price = optional(nullable(
  "a number or a decimal string",
  { is: isNumber, schema: NonNegative },
  { is: isString, schema: DecimalString }
))

const maxPriceSchema = closed({ prompt: price, completion: price, request: price, image: price })
/** Price ceilings in USD: `prompt` and `completion` per million tokens, `request` per request, `image` per image. */
export interface MaxPrice extends Schema.Schema.Type<typeof maxPriceSchema> {}

const providerPreferencesSchema = closed({
  order: slugs,
  only: slugs,
  ignore: slugs,
  allow_fallbacks: nullableBoolean,
  require_parameters: nullableBoolean,
  data_collection: optional(nullable("a string", { is: isString, schema: literal("allow", "deny") })),
  zdr: nullableBoolean,
  enforce_distillable_text: nullableBoolean,
  quantizations: optional(
    nullable("an array of quantizations", { is: Array.isArray, schema: Schema.Array(Quantization) })
  ),
  sort: optional(nullable(
    "a string or a {by, partition} object",
    { is: isString, schema: SortBy },
    { is: Predicate.isRecord, schema: sortConfigSchema }
  )),
  max_price: optional(nullable("a max_price object", { is: Predicate.isRecord, schema: maxPriceSchema })),
  preferred_min_throughput: cutoff,
  preferred_max_latency: cutoff
})

/**
 * Provider routing preferences (the request's `provider` object). Provider names in `order`, `only` and `ignore`
 * match an endpoint's `provider`, ignoring case. See `RoutePlanner.plan` for what each preference does.
 */
export interface ProviderPreferences extends Schema.Schema.Type<typeof providerPreferencesSchema> {}

/** The JSON shape of the `provider` object. */
export interface ProviderPreferencesEncoded extends Schema.Schema.Encoded<typeof providerPreferencesSchema> {}

/** The schema of the `provider` object: a closed object, every key optional and nullable. */
export const ProviderPreferences: Schema.Schema<ProviderPreferences, ProviderPreferencesEncoded> = oneOf(
  "an object",
  { is: Predicate.isRecord, schema: providerPreferencesSchema }
)

// -----------------------------------------------------------------------------
// route (deprecated)
// -----------------------------------------------------------------------------

/**
 * The deprecated `route` field: OpenRouter's `"fallback"` or `"sort"`, or an object (the interface specification
 * types `route` as an object whose contents are not shown; such an object is accepted and has no effect).
 */
export type Route = "fallback" | "sort" | { readonly [key: string]: unknown }

const AnyObject = Schema.declare(Predicate.isRecord, { description: "an object" })

/** The schema of the deprecated `route` field. */
export const Route: Schema.Schema<Route> = oneOf(
  "\"fallback\" | \"sort\" or an object",
  { is: isString, schema: literal("fallback", "sort") },
  { is: Predicate.isRecord, schema: AnyObject }
)

/**
 * The preferences the planner reads, from the request's `provider` and deprecated `route`: `route: "fallback"`
 * means `sort.partition: "model"` and `route: "sort"` means `sort.partition: "none"` (an explicit
 * `provider.sort.partition` wins); the `by` of a string `sort` is kept. A `route` object changes nothing.
 */
export const effective = (
  provider: ProviderPreferences | null | undefined,
  route?: Route | null | undefined
): ProviderPreferences | undefined => {
  if (route !== "fallback" && route !== "sort") return provider ?? undefined
  const partition: Partition = route === "fallback" ? "model" : "none"
  const sort = provider?.sort
  if (sort != null && typeof sort !== "string" && sort.partition != null) return provider ?? undefined
  const by = sort == null ? undefined : typeof sort === "string" ? sort : sort.by ?? undefined
  return { ...provider, sort: by === undefined ? { partition } : { by, partition } }
}
