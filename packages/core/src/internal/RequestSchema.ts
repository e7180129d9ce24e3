/**
 * The toolkit the request schemas are written with (`effect/Schema`): unions chosen by a cheap look at the input so
 * that an error names the member the input meant ("messages[0].content[1].text: ..."), optional keys without
 * `undefined`, nullable values, literals, integers, string and array limits, and `toInvalidRequest`, which names the
 * offending field path.
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import { InvalidRequest } from "../errors/GatewayError.js"
import { show } from "./Values.js"

export type AnySchema = Schema.Schema.Any

type JsonShape = "string" | "number" | "boolean" | "null" | "array" | "object"

type Parser = (input: unknown, options?: SchemaAST.ParseOptions) => Either.Either<unknown, ParseResult.ParseIssue>

type Dispatcher = (
  input: unknown,
  options: SchemaAST.ParseOptions,
  ast: SchemaAST.Declaration
) => Either.Either<unknown, ParseResult.ParseIssue>

const shapeOf = (u: unknown): JsonShape | undefined => {
  switch (typeof u) {
    case "string":
      return "string"
    case "number":
      return "number"
    case "boolean":
      return "boolean"
    case "object":
      return u === null ? "null" : Array.isArray(u) ? "array" : "object"
  }
  return undefined
}

/** Length in characters (code points); the code-unit length is an upper bound, so most strings skip the count. */
export const charCount = (s: string, limit: number): number => {
  if (s.length <= limit) return s.length
  let n = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0xdc00 || c > 0xdfff) n++
  }
  return n
}

export const expected = (what: string) => (issue: ParseResult.ParseIssue) =>
  `Expected ${what}, actual ${show(issue.actual)}`

/**
 * A schema whose member is chosen by a cheap look at the input, so that an error is reported by the member the
 * input was meant for ("messages[0].content[1].text: ...") rather than as a list of every union member's failure.
 */
const dispatch = <A, I>(
  members: ReadonlyArray<AnySchema>,
  make: (parsers: ReadonlyArray<Parser>) => Dispatcher,
  description: string
): Schema.Schema<A, I> =>
  Schema.declare(members, {
    decode: (...schemas) => make(schemas.map((schema) => ParseResult.decodeUnknownEither(schema))),
    encode: (...schemas) => make(schemas.map((schema) => ParseResult.encodeUnknownEither(schema)))
  }, { description }) as any

/**
 * `schema`, with a plain check of its common shapes first: an input the check accepts is its own decoded value (no
 * copy is made, and its unknown keys stay); any other input is decoded by `schema`, which accepts it or names what is
 * wrong. `accepts` must accept nothing `schema` refuses (it may refuse what `schema` accepts: that is only slower). Effect's
 * decoding copies every object it checks, some 1 µs each: for a coding agent's conversation of a few hundred blocks,
 * most of the request's validation (docs/benchmarks.md, "a coding agent's requests").
 */
export const withFastPath = <S extends AnySchema>(
  schema: S,
  accepts: (input: unknown) => boolean,
  description: string
): Schema.Schema<Schema.Schema.Type<S>, Schema.Schema.Encoded<S>> =>
  dispatch(
    [schema],
    ([parser]) => (input, options) => accepts(input) ? Either.right(input) : parser(input, options),
    description
  )

type ShapeCases = { readonly [K in JsonShape]?: AnySchema }

/** One schema per JSON shape (string, array, object, ...): `oneOf({ string: ..., array: ... }, "a string or ...")`. */
export const oneOf = <const C extends ShapeCases>(
  cases: C,
  description: string
): Schema.Schema<Schema.Schema.Type<NonNullable<C[keyof C]>>, Schema.Schema.Encoded<NonNullable<C[keyof C]>>> => {
  const shapes = Object.keys(cases) as Array<JsonShape>
  const index: { [K in JsonShape]?: number } = {}
  shapes.forEach((shape, i) => index[shape] = i)
  return dispatch(shapes.map((shape) => cases[shape]!), (parsers) => (input, options, ast) => {
    const shape = shapeOf(input)
    const i = shape === undefined ? undefined : index[shape]
    return i === undefined ?
      Either.left(new ParseResult.Type(ast, input, `Expected ${description}, actual ${show(input)}`)) :
      parsers[i](input, options)
  }, description)
}

/** A JSON object (not an array) with the given fields; other keys are accepted. */
export const object = <Fields extends Schema.Struct.Fields>(fields: Fields, description = "an object") =>
  oneOf({ object: Schema.Struct(fields) }, description)

/** Any JSON object (not an array); its contents are not modelled. */
export const AnyObject = Schema.declare(Predicate.isRecord, {
  description: "an object",
  message: expected("an object")
})

/** A generic `{ type: string }` object whose other keys are allowed (and kept in the decoded value). */
export const generic = <Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.Struct(
    { type: Schema.String, ...fields },
    Schema.Record({ key: Schema.String, value: Schema.Unknown })
  )

const MissingTag = new ParseResult.Missing(new SchemaAST.Type(SchemaAST.stringKeyword))

/**
 * An object whose kind is selected by the string at `key`. A known tag is validated by its own schema only; an
 * unknown one goes to `fallback` when there is one and is rejected otherwise; `whenAbsent` names the case for a
 * missing (or null) tag.
 */
export const tagged = <const C extends { readonly [tag: string]: AnySchema }, F extends AnySchema = never>(
  key: string,
  cases: C,
  options: { readonly description: string; readonly fallback?: F; readonly whenAbsent?: keyof C & string }
): Schema.Schema<Schema.Schema.Type<C[keyof C] | F>, Schema.Schema.Encoded<C[keyof C] | F>> => {
  const tags = Object.keys(cases)
  const members: Array<AnySchema> = tags.map((tag) => cases[tag])
  const index = new Map(tags.map((tag, i) => [tag, i]))
  const fallback = options.fallback === undefined ? -1 : members.push(options.fallback) - 1
  const absent = options.whenAbsent === undefined ? -1 : index.get(options.whenAbsent)!
  const allowed = tags.map((tag) => JSON.stringify(tag)).join(" | ")
  return dispatch(members, (parsers) => (input, parseOptions, ast) => {
    if (!Predicate.isRecord(input)) {
      return Either.left(new ParseResult.Type(ast, input, `Expected ${options.description}, actual ${show(input)}`))
    }
    const tag = input[key]
    const i = typeof tag === "string" ? index.get(tag) ?? fallback : tag == null ? absent : -1
    if (i >= 0) return parsers[i](input, parseOptions)
    const issue = tag === undefined ?
      MissingTag :
      new ParseResult.Type(
        ast,
        tag,
        fallback >= 0 ? `Expected a string, actual ${show(tag)}` : `Expected ${allowed}, actual ${show(tag)}`
      )
    return Either.left(new ParseResult.Pointer(key, input, issue))
  }, options.description)
}

export const arrayOf = <S extends AnySchema>(item: S, description: string) =>
  Schema.Array(item).annotations({ message: expected(description) })

/**
 * The primitive schemas of the request schemas: Effect's own, with messages that show the actual value briefly
 * (`show`). Effect's default message prints the whole value, which for a hostile body is megabytes long, or deep
 * enough to overflow the stack.
 */
export const Str = Schema.String.annotations({ message: (issue) => `Expected string, actual ${show(issue.actual)}` })
export const Num = Schema.Number.annotations({ message: (issue) => `Expected number, actual ${show(issue.actual)}` })
export const Bool = Schema.Boolean.annotations({ message: (issue) => `Expected boolean, actual ${show(issue.actual)}` })

/** `Schema.Literal` with a brief message (see `Str`). */
export const Lit = <const L extends readonly [string, ...Array<string>]>(...values: L) =>
  Schema.Literal(...values).annotations({
    message: (issue) => `Expected ${values.map((v) => JSON.stringify(v)).join(" | ")}, actual ${show(issue.actual)}`
  })

export const integer = (min?: number, max?: number) => {
  const range = min !== undefined && max !== undefined ?
    ` from ${min} to ${max}` :
    min !== undefined ?
    ` of at least ${min}` :
    ""
  return Num.pipe(
    Schema.filter((n) => Number.isInteger(n) && (min === undefined || n >= min) && (max === undefined || n <= max), {
      description: `an integer${range}`,
      message: (issue) => `must be an integer${range}, got ${show(issue.actual)}`
    })
  )
}

export const Int = integer()

export const maxChars = (max: number) =>
  Str.pipe(
    Schema.filter((s) => charCount(s, max) <= max, {
      description: `a string of at most ${max} characters`,
      // Also the message of a value that is not a string at all (Schema gives the refinement's message to both).
      message: (issue) =>
        typeof issue.actual === "string"
          ? `must be at most ${max} characters, got ${charCount(issue.actual, max)}`
          : `Expected a string, actual ${show(issue.actual)}`
    })
  )

export const entries =
  (min: number, max: number, noun: string, nouns: string) =>
  <S extends Schema.Schema<ReadonlyArray<any>, any>>(self: S) =>
    self.pipe(
      Schema.filter((a) => a.length >= min && a.length <= max, {
        description: min > 0 ? `${min} to ${max} ${nouns}` : `at most ${max} ${nouns}`,
        message: (issue) => {
          if (!Array.isArray(issue.actual)) return `Expected an array, actual ${show(issue.actual)}`
          const n = issue.actual.length
          return n > max ?
            `at most ${max} ${max === 1 ? noun : nouns} are allowed, got ${n}` :
            `at least ${min} ${min === 1 ? `${noun} is` : `${nouns} are`} required, got ${n}`
        }
      })
    )

/**
 * The deepest nesting of objects and arrays a request body may have. Bodies are parsed without recursion, but
 * serialising, validating and formatting them recurse: a body nested 10,000 levels deep would overflow the stack.
 * Real bodies (tool input schemas included) stay far below.
 */
export const MAX_DEPTH = 128

/** True when a parsed JSON value nests objects and arrays deeper than `limit`; walked without recursion. */
export const tooDeep = (value: unknown, limit: number = MAX_DEPTH): boolean => {
  if (typeof value !== "object" || value === null) return false
  const values: Array<object> = [value]
  const depths: Array<number> = [1]
  while (values.length > 0) {
    const current = values.pop()!
    const depth = depths.pop()!
    if (depth > limit) return true
    if (Array.isArray(current)) {
      for (const item of current) {
        if (typeof item === "object" && item !== null) {
          values.push(item)
          depths.push(depth + 1)
        }
      }
    } else {
      for (const key in current) {
        const item = (current as Record<string, unknown>)[key]
        if (typeof item === "object" && item !== null) {
          values.push(item)
          depths.push(depth + 1)
        }
      }
    }
  }
  return false
}

/** The 400 of a body nested deeper than `MAX_DEPTH`. */
export const tooDeepError = () =>
  new InvalidRequest({ message: `request body: nested deeper than ${MAX_DEPTH} levels of objects and arrays` })

/** An optional key; JSON has no `undefined`, so the value is not widened to `| undefined` (which costs a union). */
export const optional = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

/** One of a few string values; a single set lookup (a union of literals would try each member in turn). */
export const literal = <const L extends readonly [string, ...Array<string>]>(
  ...values: L
): Schema.Schema<L[number]> => {
  const allowed = new Set<unknown>(values)
  const list = values.map((value) => JSON.stringify(value)).join(" | ")
  return Schema.declare((u): u is L[number] => allowed.has(u), {
    description: list,
    message: (issue) => `Expected ${list}, actual ${show(issue.actual)}`
  })
}

/** `schema` or null; unlike `Schema.NullOr`, an error is the schema's own, not a list of both alternatives. */
export const nullable = <S extends AnySchema>(
  schema: S
): Schema.Schema<Schema.Schema.Type<S> | null, Schema.Schema.Encoded<S> | null> =>
  dispatch(
    [schema],
    ([parser]) => (input, options) => input === null ? Either.right(null) : parser(input, options),
    "nullable"
  )

const formatPath = (path: ReadonlyArray<PropertyKey>): string => {
  let out = ""
  for (const key of path) {
    out += typeof key === "number" ? `[${key}]` : out === "" ? String(key) : `.${String(key)}`
  }
  return out
}

/** The first issue of a failed decode as an `InvalidRequest` whose message starts with the field path (under `prefix`). */
export const toInvalidRequest = (
  error: ParseResult.ParseError,
  prefix: ReadonlyArray<PropertyKey> = []
): InvalidRequest => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  const message = issue?.message ?? "is invalid"
  const path = issue === undefined ? prefix : prefix.length === 0 ? issue.path : [...prefix, ...issue.path]
  if (path.length === 0) return new InvalidRequest({ message: `request body: ${message}` })
  const param = formatPath(path)
  return new InvalidRequest({ message: `${param}: ${message}`, param })
}
