/**
 * The request fields only the gateway understands, the same on every API it serves (messages, chat completions,
 * responses, embeddings, speech): `user` and `session_id` (at most 256 characters), `models`, `fallbacks` (at most 3
 * `{model}` entries, never both with `models`), `provider` preferences, the deprecated `route`, and `plugins` (spec
 * 2.1.3 and the limits of section 8). None of them is sent to a provider.
 */
import * as Schema from "effect/Schema"
import {
  AnyObject,
  arrayOf,
  Bool,
  charCount,
  entries,
  integer,
  Lit,
  literal,
  maxChars,
  nullable,
  object,
  optional,
  Str,
  tagged
} from "../internal/RequestSchema.js"
import { ProviderPreferences, Route } from "./ProviderPreferences.js"

// -----------------------------------------------------------------------------
// plugins (2.1.3)
// -----------------------------------------------------------------------------

const PATTERNS_MAX_ITEMS = 1024
const PATTERN_MAX_CHARS = 1024
const PATTERNS_MAX_TOTAL_CHARS = 65536

const ModelPatterns = arrayOf(maxChars(PATTERN_MAX_CHARS), "an array of model patterns").pipe(
  entries(0, PATTERNS_MAX_ITEMS, "pattern", "patterns"),
  Schema.filter((patterns) => {
    // Code units first, an upper bound of the characters: only a total over the limit is counted exactly.
    let total = 0
    for (const pattern of patterns) total += pattern.length
    if (total <= PATTERNS_MAX_TOTAL_CHARS) return true
    total = 0
    for (const pattern of patterns) total += charCount(pattern, 0)
    return total <= PATTERNS_MAX_TOTAL_CHARS ||
      `at most ${PATTERNS_MAX_TOTAL_CHARS} characters in total are allowed, got ${total}`
  }, { description: `at most ${PATTERNS_MAX_TOTAL_CHARS} characters in total` })
)

const enabled = optional(Bool)

/**
 * file-parser's `pdf.engine` (OpenRouter's names; the spec gives none): `pdf-text` is the gateway's own text
 * extraction, `native` sends PDFs only to endpoints that take files; `mistral-ocr` needs an OCR service, which the
 * gateway has no port for, so it is refused rather than silently served by another engine.
 */
const PdfEngine = literal("pdf-text", "mistral-ocr", "native").pipe(
  Schema.filter((engine) =>
    engine !== "mistral-ocr" ||
    "'mistral-ocr' needs an OCR service, and this gateway has none; use 'pdf-text' (the gateway's text extraction) " +
      "or 'native' (only endpoints that take PDF files)"
  )
)

const routerFields = {
  enabled,
  allowed_models: optional(ModelPatterns),
  excluded_models: optional(ModelPatterns),
  cost_tier: optional(literal("low", "medium", "high", "xhigh", "max")),
  cost_quality_tradeoff: optional(integer(0, 10))
}

const plugin = <Id extends string, Fields extends Schema.Struct.Fields>(id: Id, fields: Fields) =>
  Schema.Struct({ id: Lit(id), enabled, ...fields })

const pluginSchema = tagged("id", {
  "auto-router": plugin("auto-router", { ...routerFields, pin_model: optional(Bool) }),
  "auto-beta-router": plugin("auto-beta-router", {
    ...routerFields,
    pin_model: optional(Schema.Never.annotations({
      message: () => "is not supported by the auto-beta-router plugin (only auto-router has pin_model)"
    }))
  }),
  "context-compression": plugin("context-compression", { engine: optional(Str) }),
  "file-parser": plugin("file-parser", {
    pdf: optional(object({ engine: optional(PdfEngine) }, "a PDF parser options object"))
  }),
  fusion: plugin("fusion", {
    analysis_models: optional(arrayOf(Str, "an array of model ids").pipe(entries(1, 8, "model", "models"))),
    model: optional(Str),
    preset: optional(literal("general-high", "general-budget", "general-fast")),
    max_tool_calls: optional(integer(1, 16)),
    tools: optional(arrayOf(
      object({ type: Str, parameters: optional(AnyObject) }, "a fusion tool object"),
      "an array of fusion tools"
    ))
  }),
  moderation: plugin("moderation", {}),
  "pareto-router": plugin("pareto-router", {}),
  "response-healing": plugin("response-healing", {}),
  "switchyard-router": plugin("switchyard-router", {}),
  web: plugin("web", {}),
  "web-fetch": plugin("web-fetch", {})
}, { description: "a plugin object" })
/** A routing or processing plugin, selected by `id`. */
export type Plugin = typeof pluginSchema.Type
/** A routing or processing plugin, selected by `id`. */
export const Plugin: Schema.Schema<Plugin> = pluginSchema

const fallbackSchema = object({ model: Str }, "a fallback object").annotations({
  parseOptions: { onExcessProperty: "error" }
})
/** A fallback model: exactly `{ model }`; any per-attempt override is rejected. */
export interface Fallback extends Schema.Schema.Type<typeof fallbackSchema> {}
/** A fallback model: exactly `{ model }`; any per-attempt override is rejected. */
export const Fallback: Schema.Schema<Fallback> = fallbackSchema

const identifier = maxChars(256)

/** The gateway's own fields, to spread into a request's `Schema.Struct`. */
export const fields = {
  user: optional(identifier),
  session_id: optional(identifier),
  models: optional(arrayOf(Str, "an array of model ids")),
  fallbacks: optional(
    nullable(arrayOf(Fallback, "an array of fallback objects").pipe(entries(0, 3, "entry", "entries")))
  ),
  provider: optional(ProviderPreferences),
  route: optional(Route),
  plugins: optional(arrayOf(Plugin, "an array of plugin objects"))
}

/** `models` and `fallbacks` cannot be combined. */
export const modelsOrFallbacks = <A extends { readonly models?: unknown; readonly fallbacks?: unknown }, I, R>(
  self: Schema.Schema<A, I, R>
) =>
  self.pipe(
    Schema.filter((request) =>
      request.models !== undefined && request.fallbacks != null ?
        { path: ["fallbacks"], message: "cannot be combined with models" } :
        undefined
    )
  )

/** The longest custom trace metadata a usage record keeps, in bytes of JSON. */
export const TRACE_MAX_BYTES = 16 * 1024

/** The UTF-8 length of a string (core has no TextEncoder: it runs on any JavaScript runtime). */
const utf8Bytes = (s: string): number => {
  let n = s.length
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    // Two bytes for U+0080..U+07FF, three up to U+FFFF; a surrogate pair (four bytes) counts 2 + 2.
    if (c >= 0x80) n += c >= 0x800 && (c < 0xd800 || c > 0xdfff) ? 2 : 1
  }
  return n
}

/** The keys of `trace` with a meaning of their own (the tracing ids and names); every other key is custom metadata. */
export const TRACE_KEYS: ReadonlySet<string> = new Set([
  "trace_id",
  "trace_name",
  "span_name",
  "generation_name",
  "parent_span_id"
])

/**
 * `trace`: an object of tracing ids and names and custom metadata, at most `TRACE_MAX_BYTES` of JSON (the custom keys
 * are kept on the usage record). Nesting is bounded before validation runs (`RequestSchema.tooDeep`).
 */
export const Trace = AnyObject.pipe(
  Schema.filter((trace) => {
    const bytes = utf8Bytes(JSON.stringify(trace))
    return bytes <= TRACE_MAX_BYTES ||
      `must be at most ${TRACE_MAX_BYTES} bytes of JSON, got ${bytes}`
  })
)

/** The custom metadata of a `trace` object: its keys besides the tracing ids and names; undefined when none. */
export const customTrace = (
  trace: Readonly<Record<string, unknown>> | null | undefined
): Readonly<Record<string, unknown>> | undefined => {
  if (trace == null) return undefined
  let custom: Record<string, unknown> | undefined
  for (const key in trace) {
    if (!TRACE_KEYS.has(key)) (custom ??= {})[key] = trace[key]
  }
  return custom
}

/** The names of the gateway's own fields: stripped before a body goes to a provider. */
export const names: ReadonlySet<string> = new Set([...Object.keys(fields), "trace"])
