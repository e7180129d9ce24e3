/**
 * The body of `POST /v1/audio/speech` (spec 2.3) as an `effect/Schema`, and `validate`, which turns a parsed JSON
 * body into the request the speech use case works with (or an `InvalidRequest` naming the offending field).
 *
 * Property names where the specification leaves them open are OpenRouter's (its SDK sends them): the reference parts
 * are `input_references`, the provider passthrough object is `provider` (`provider.options.<provider name>` holds
 * the options forwarded to that provider only; the other keys of `provider` are the routing preferences of
 * `POST /v1/messages`), and the tracing object is `trace`. Like the messages route, `models` and `fallbacks` (at most
 * 3) name further candidate models. Optional fields may be `null`, which means the same as leaving them out. Unknown
 * fields are ignored: what reaches a provider is built from the known fields and that provider's options.
 */
import * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import { InvalidRequest } from "../errors/GatewayError.js"
import {
  AnyObject,
  type AnySchema,
  arrayOf,
  entries,
  literal,
  maxChars,
  nullable,
  Num,
  object,
  optional,
  Str,
  tagged,
  toInvalidRequest,
  tooDeep,
  tooDeepError
} from "../internal/RequestSchema.js"
import { show } from "../internal/Values.js"
import type { JsonObject } from "../messages/Wire.js"
import { Fallback, Trace } from "../routing/GatewayFields.js"
import { ProviderPreferences } from "../routing/ProviderPreferences.js"
import * as SpeechReferences from "./SpeechReferences.js"

/** The longest `session_id` and `user`, in characters (spec 8). */
export const MAX_IDENTIFIER = 256

/** The audio formats of the answer. */
export type ResponseFormat = "mp3" | "pcm"

/** What the OpenRouter SDK sends when the caller names no format. */
export const DEFAULT_FORMAT: ResponseFormat = "pcm"

/** The tracing object: the keys with special handling, and every other key as custom metadata. */
export interface SpeechTrace {
  readonly traceId?: string | undefined
  readonly traceName?: string | undefined
  readonly spanName?: string | undefined
  readonly generationName?: string | undefined
  readonly parentSpanId?: string | undefined
  /** The other keys of `trace`, as sent. */
  readonly custom: Readonly<Record<string, unknown>>
}

/** A validated speech request. */
export interface SpeechRequest {
  readonly input: string
  readonly model: string
  readonly voice: string | undefined
  readonly responseFormat: ResponseFormat
  readonly speed: number | undefined
  readonly sessionId: string | undefined
  readonly user: string | undefined
  readonly references: SpeechReferences.References
  /** The routing preferences of `provider` (without `options`). */
  readonly preferences: ProviderPreferences | undefined
  /** `provider.options`, by provider name in lower case: forwarded to that provider only. */
  readonly providerOptions: ReadonlyMap<string, JsonObject>
  readonly models: ReadonlyArray<string> | undefined
  readonly fallbacks: ReadonlyArray<{ readonly model: string }> | undefined
  readonly trace: SpeechTrace | undefined
}

// -----------------------------------------------------------------------------
// the schema
// -----------------------------------------------------------------------------

/** An optional key that may also be `null` (the same as absent). */
const orNull = <S extends AnySchema>(schema: S) => optional(nullable(schema))

const NonEmpty = Str.pipe(Schema.filter((s) => s.length > 0, {
  message: (issue) =>
    typeof issue.actual === "string" ? "must not be empty" : `Expected string, actual ${show(issue.actual)}`
}))

const Speed = Num.pipe(Schema.filter((n) => Number.isFinite(n) && n > 0, {
  message: (issue) => `must be a number greater than 0, got ${show(issue.actual)}`
}))

const ReferencePart: Schema.Schema<SpeechReferences.ReferencePart> = tagged("type", {
  input_audio: Schema.Struct({
    type: Schema.Literal("input_audio"),
    input_audio: object({ data: Str, format: optional(Str) })
  }),
  text: Schema.Struct({ type: Schema.Literal("text"), text: Str }),
  image_url: Schema.Struct({ type: Schema.Literal("image_url"), image_url: object({ url: Str }) })
}, { description: "a reference part object" })

const speechRequestSchema = Schema.Struct({
  input: NonEmpty,
  model: NonEmpty,
  voice: orNull(NonEmpty),
  response_format: orNull(literal("mp3", "pcm")),
  speed: orNull(Speed),
  session_id: orNull(maxChars(MAX_IDENTIFIER)),
  user: orNull(maxChars(MAX_IDENTIFIER)),
  input_references: orNull(arrayOf(ReferencePart, "an array of reference parts")),
  provider: orNull(AnyObject),
  models: orNull(arrayOf(Str, "an array of model ids")),
  fallbacks: orNull(arrayOf(Fallback, "an array of fallback objects").pipe(entries(0, 3, "entry", "entries"))),
  trace: orNull(Trace)
})

/** The JSON shape of the body (every field besides `input` and `model` optional, and nullable). */
export type SpeechRequestEncoded = Schema.Schema.Encoded<typeof speechRequestSchema>

const RequestObject = Schema.declare(Predicate.isRecord, {
  message: (issue) => `Expected a JSON object, actual ${show(issue.actual)}`
})

const decodeObject = Schema.decodeUnknownEither(RequestObject)
const decodeBody = Schema.decodeUnknownEither(speechRequestSchema, { errors: "first", onExcessProperty: "ignore" })
const decodePreferences = Schema.decodeUnknownEither(ProviderPreferences, {
  errors: "first",
  onExcessProperty: "error"
})

// -----------------------------------------------------------------------------
// validation
// -----------------------------------------------------------------------------

const invalid = (param: string, message: string): InvalidRequest =>
  new InvalidRequest({ message: `${param}: ${message}`, param })

/** `provider`: its `options` (an object of objects, by provider name) and the routing preferences beside them. */
const providerOf = (
  provider: Readonly<Record<string, unknown>> | null | undefined
): Either.Either<
  { readonly preferences: ProviderPreferences | undefined; readonly options: ReadonlyMap<string, JsonObject> },
  InvalidRequest
> => {
  if (provider == null) return Either.right({ preferences: undefined, options: new Map() })
  const { options, ...rest } = provider
  const byName = new Map<string, JsonObject>()
  if (options != null) {
    if (!Predicate.isRecord(options)) {
      return Either.left(
        invalid("provider.options", `Expected an object keyed by provider name, actual ${show(options)}`)
      )
    }
    for (const [name, value] of Object.entries(options)) {
      if (value === null) continue
      if (!Predicate.isRecord(value)) {
        return Either.left(invalid(`provider.options.${name}`, `Expected an object, actual ${show(value)}`))
      }
      byName.set(name.toLowerCase(), value as JsonObject)
    }
  }
  if (Object.keys(rest).length === 0) return Either.right({ preferences: undefined, options: byName })
  const preferences = decodePreferences(rest)
  return Either.isLeft(preferences)
    ? Either.left(toInvalidRequest(preferences.left, ["provider"]))
    : Either.right({ preferences: preferences.right, options: byName })
}

const TRACE_KEYS = {
  trace_id: "traceId",
  trace_name: "traceName",
  span_name: "spanName",
  generation_name: "generationName",
  parent_span_id: "parentSpanId"
} as const

/** `trace`: the keys with special handling (strings), and the others as custom metadata. */
const traceOf = (trace: Readonly<Record<string, unknown>> | null | undefined): Either.Either<
  SpeechTrace | undefined,
  InvalidRequest
> => {
  if (trace == null) return Either.right(undefined)
  const known: Record<string, string> = {}
  const custom: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(trace)) {
    const name = (TRACE_KEYS as Record<string, string | undefined>)[key]
    if (name === undefined) {
      custom[key] = value
      continue
    }
    if (value === null) continue
    if (typeof value !== "string") return Either.left(invalid(`trace.${key}`, `Expected string, actual ${show(value)}`))
    known[name] = value
  }
  return Either.right({ ...known, custom })
}

/**
 * Validates a parsed JSON body: Right with the request, or Left with an `InvalidRequest` whose message starts with
 * the offending field's path (`voice: ...`, `input_references[2]: rule 2 ...`, `provider.sort: ...`), its `param`.
 */
export const validate = (body: unknown): Either.Either<SpeechRequest, InvalidRequest> => {
  const object = decodeObject(body)
  if (Either.isLeft(object)) return Either.left(toInvalidRequest(object.left))
  if (tooDeep(body)) return Either.left(tooDeepError())
  const decoded = decodeBody(body)
  if (Either.isLeft(decoded)) return Either.left(toInvalidRequest(decoded.left))
  const raw = decoded.right
  if (raw.models != null && raw.fallbacks != null) {
    return Either.left(invalid("fallbacks", "cannot be combined with models"))
  }
  const references = SpeechReferences.check(raw.input_references ?? [])
  if (Either.isLeft(references)) {
    const { index, message } = references.left
    return Either.left(invalid(index === undefined ? "input_references" : `input_references[${index}]`, message))
  }
  const provider = providerOf(raw.provider)
  if (Either.isLeft(provider)) return Either.left(provider.left)
  const trace = traceOf(raw.trace)
  if (Either.isLeft(trace)) return Either.left(trace.left)
  return Either.right({
    input: raw.input,
    model: raw.model,
    voice: raw.voice ?? undefined,
    responseFormat: raw.response_format ?? DEFAULT_FORMAT,
    speed: raw.speed ?? undefined,
    sessionId: raw.session_id ?? undefined,
    user: raw.user ?? undefined,
    references: references.right,
    preferences: provider.right.preferences,
    providerOptions: provider.right.options,
    models: raw.models ?? undefined,
    fallbacks: raw.fallbacks ?? undefined,
    trace: trace.right
  })
}
