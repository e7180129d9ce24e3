/**
 * The body of `POST /v1/messages` (spec 2.1) as an `effect/Schema` model, and `validate`, the hot-path check
 * that turns a parsed JSON body into a typed request or an `InvalidRequest` naming the offending field path.
 *
 * The decoded value is only read for routing: the gateway forwards the original body. Unknown fields are
 * accepted everywhere except inside a `fallbacks` entry and the `provider` preferences, and unknown content block
 * and server tool kinds are accepted as generic `{ type }` objects, so that newer clients keep working.
 */
import { Either, ParseResult, Schema, SchemaAST } from "effect"
import { InvalidRequest } from "../errors/GatewayError.js"
import { isObject, show } from "../internal/Values.js"
import { ProviderPreferences, Route } from "../routing/ProviderPreferences.js"

// -----------------------------------------------------------------------------
// helpers
// -----------------------------------------------------------------------------

type AnySchema = Schema.Schema.Any

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
const charCount = (s: string, limit: number): number => {
  if (s.length <= limit) return s.length
  let n = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0xdc00 || c > 0xdfff) n++
  }
  return n
}

const expected = (what: string) => (issue: ParseResult.ParseIssue) => `Expected ${what}, actual ${show(issue.actual)}`

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

type ShapeCases = { readonly [K in JsonShape]?: AnySchema }

/** One schema per JSON shape (string, array, object, ...): `oneOf({ string: ..., array: ... }, "a string or ...")`. */
const oneOf = <const C extends ShapeCases>(
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
const object = <Fields extends Schema.Struct.Fields>(fields: Fields, description = "an object") =>
  oneOf({ object: Schema.Struct(fields) }, description)

/** Any JSON object (not an array); its contents are not modelled. */
const AnyObject = Schema.declare(isObject, { description: "an object", message: expected("an object") })

/** A generic `{ type: string }` object whose other keys are allowed (and kept in the decoded value). */
const generic = <Fields extends Schema.Struct.Fields>(fields: Fields) =>
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
const tagged = <const C extends { readonly [tag: string]: AnySchema }, F extends AnySchema = never>(
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
    if (!isObject(input)) {
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

const arrayOf = <S extends AnySchema>(item: S, description: string) =>
  Schema.Array(item).annotations({ message: expected(description) })

const integer = (min?: number, max?: number) => {
  const range = min !== undefined && max !== undefined ?
    ` from ${min} to ${max}` :
    min !== undefined ?
    ` of at least ${min}` :
    ""
  return Schema.Number.pipe(
    Schema.filter((n) => Number.isInteger(n) && (min === undefined || n >= min) && (max === undefined || n <= max), {
      description: `an integer${range}`,
      message: (issue) => `must be an integer${range}, got ${show(issue.actual)}`
    })
  )
}

const Int = integer()

const maxChars = (max: number) =>
  Schema.String.pipe(
    Schema.filter((s) => charCount(s, max) <= max, {
      description: `a string of at most ${max} characters`,
      message: (issue) => `must be at most ${max} characters, got ${charCount(issue.actual as string, max)}`
    })
  )

const entries =
  (min: number, max: number, noun: string, nouns: string) =>
  <S extends Schema.Schema<ReadonlyArray<any>, any>>(self: S) =>
    self.pipe(
      Schema.filter((a) => a.length >= min && a.length <= max, {
        description: min > 0 ? `${min} to ${max} ${nouns}` : `at most ${max} ${nouns}`,
        message: (issue) => {
          const n = (issue.actual as ReadonlyArray<unknown>).length
          return n > max ?
            `at most ${max} ${max === 1 ? noun : nouns} are allowed, got ${n}` :
            `at least ${min} ${min === 1 ? `${noun} is` : `${nouns} are`} required, got ${n}`
        }
      })
    )

/** An optional key; JSON has no `undefined`, so the value is not widened to `| undefined` (which costs a union). */
const optional = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

/** One of a few string values; a single set lookup (a union of literals would try each member in turn). */
const literal = <const L extends readonly [string, ...Array<string>]>(...values: L): Schema.Schema<L[number]> => {
  const allowed = new Set<unknown>(values)
  const list = values.map((value) => JSON.stringify(value)).join(" | ")
  return Schema.declare((u): u is L[number] => allowed.has(u), {
    description: list,
    message: (issue) => `Expected ${list}, actual ${show(issue.actual)}`
  })
}

/** `schema` or null; unlike `Schema.NullOr`, an error is the schema's own, not a list of both alternatives. */
const nullable = <S extends AnySchema>(
  schema: S
): Schema.Schema<Schema.Schema.Type<S> | null, Schema.Schema.Encoded<S> | null> =>
  dispatch(
    [schema],
    ([parser]) => (input, options) => input === null ? Either.right(null) : parser(input, options),
    "nullable"
  )

// -----------------------------------------------------------------------------
// cache control
// -----------------------------------------------------------------------------

const cacheControlSchema = object({
  type: Schema.Literal("ephemeral"),
  ttl: optional(Schema.String)
}, "a cache_control object")
/** `{ type: "ephemeral", ttl? }`: an explicit cache breakpoint on a block, or the automatic one at the top level. */
export interface CacheControl extends Schema.Schema.Type<typeof cacheControlSchema> {}
/** `{ type: "ephemeral", ttl? }`: an explicit cache breakpoint on a block, or the automatic one at the top level. */
export const CacheControl: Schema.Schema<CacheControl> = cacheControlSchema

const cache_control = optional(nullable(CacheControl))

// -----------------------------------------------------------------------------
// content blocks (2.1.2)
// -----------------------------------------------------------------------------

const TextBlock = Schema.Struct({
  type: Schema.Literal("text"),
  text: Schema.String,
  cache_control
})

const GenericSource = generic({})

const MediaSource = <T extends string>(type: T) =>
  Schema.Struct({ type: Schema.Literal(type), media_type: Schema.String, data: Schema.String })

const ImageSource = tagged("type", {
  base64: MediaSource("base64"),
  url: Schema.Struct({ type: Schema.Literal("url"), url: Schema.String }),
  file: Schema.Struct({ type: Schema.Literal("file"), file_id: Schema.String })
}, { description: "an image source object", fallback: GenericSource })

const ImageBlock = Schema.Struct({
  type: Schema.Literal("image"),
  source: ImageSource,
  cache_control
})

const DocumentSource = tagged("type", {
  base64: MediaSource("base64"),
  text: MediaSource("text"),
  content: Schema.Struct({
    type: Schema.Literal("content"),
    content: oneOf({ string: Schema.String, array: Schema.Array(AnyObject) }, "a string or an array of blocks")
  }),
  url: Schema.Struct({ type: Schema.Literal("url"), url: Schema.String }),
  file: Schema.Struct({ type: Schema.Literal("file"), file_id: Schema.String })
}, { description: "a document source object", fallback: GenericSource })

const DocumentBlock = Schema.Struct({
  type: Schema.Literal("document"),
  source: DocumentSource,
  title: optional(nullable(Schema.String)),
  context: optional(nullable(Schema.String)),
  citations: optional(Schema.Unknown),
  cache_control
})

const TextBlocks = arrayOf(
  tagged("type", { text: TextBlock }, { description: "a text block" }),
  "an array of text blocks"
)

const SearchResultBlock = Schema.Struct({
  type: Schema.Literal("search_result"),
  source: Schema.String,
  title: Schema.String,
  content: TextBlocks,
  citations: optional(Schema.Unknown),
  cache_control
})

const ToolReferenceBlock = Schema.Struct({
  type: Schema.Literal("tool_reference"),
  tool_name: Schema.String,
  cache_control
})

const GenericBlock = generic({ cache_control })

const ToolResultContentBlock = tagged("type", {
  text: TextBlock,
  image: ImageBlock,
  tool_reference: ToolReferenceBlock,
  search_result: SearchResultBlock,
  document: DocumentBlock
}, { description: "a tool result content block", fallback: GenericBlock })

const ToolUseBlock = Schema.Struct({
  type: Schema.Literal("tool_use"),
  id: Schema.String,
  name: Schema.String,
  input: optional(Schema.Unknown),
  cache_control
})

const ToolResultBlock = Schema.Struct({
  type: Schema.Literal("tool_result"),
  tool_use_id: Schema.String,
  content: optional(oneOf({
    string: Schema.String,
    array: Schema.Array(ToolResultContentBlock)
  }, "a string or an array of content blocks")),
  is_error: optional(Schema.Boolean),
  cache_control
})

const ThinkingBlock = Schema.Struct({
  type: Schema.Literal("thinking"),
  thinking: Schema.String,
  signature: Schema.String
})

const RedactedThinkingBlock = Schema.Struct({
  type: Schema.Literal("redacted_thinking"),
  data: Schema.String
})

const ServerToolUseBlock = Schema.Struct({
  type: Schema.Literal("server_tool_use"),
  id: Schema.String,
  name: Schema.String,
  input: optional(Schema.Unknown),
  cache_control
})

/** The error codes of a `web_search_tool_result_error`. */
export const WebSearchErrorCode = literal(
  "invalid_tool_input",
  "unavailable",
  "max_uses_exceeded",
  "too_many_requests",
  "query_too_long"
)

const WebSearchResult = tagged("type", {
  web_search_result: Schema.Struct({
    type: Schema.Literal("web_search_result"),
    url: optional(Schema.String),
    title: optional(Schema.String),
    encrypted_content: optional(Schema.String),
    page_age: optional(nullable(Schema.String))
  })
}, { description: "a web search result block" })

const WebSearchToolResultError = tagged("type", {
  web_search_tool_result_error: Schema.Struct({
    type: Schema.Literal("web_search_tool_result_error"),
    error_code: WebSearchErrorCode
  })
}, { description: "a web search tool result error" })

const WebSearchToolResultBlock = Schema.Struct({
  type: Schema.Literal("web_search_tool_result"),
  tool_use_id: Schema.String,
  content: oneOf(
    { array: Schema.Array(WebSearchResult), object: WebSearchToolResultError },
    "an array of web search results or a web_search_tool_result_error object"
  ),
  cache_control
})

const CompactionBlock = Schema.Struct({
  type: Schema.Literal("compaction"),
  content: nullable(Schema.String),
  encrypted_content: optional(nullable(Schema.String)),
  cache_control
})

const contentBlockSchema = tagged("type", {
  text: TextBlock,
  image: ImageBlock,
  document: DocumentBlock,
  tool_use: ToolUseBlock,
  tool_result: ToolResultBlock,
  thinking: ThinkingBlock,
  redacted_thinking: RedactedThinkingBlock,
  server_tool_use: ServerToolUseBlock,
  web_search_tool_result: WebSearchToolResultBlock,
  search_result: SearchResultBlock,
  compaction: CompactionBlock
}, { description: "a content block", fallback: GenericBlock })
/** A content block of a message, selected by `type`; unknown kinds are accepted as generic `{ type }` objects. */
export type ContentBlock = typeof contentBlockSchema.Type
/** A content block of a message, selected by `type`; unknown kinds are accepted as generic `{ type }` objects. */
export const ContentBlock: Schema.Schema<ContentBlock> = contentBlockSchema

// -----------------------------------------------------------------------------
// messages (2.1.1)
// -----------------------------------------------------------------------------

const messageSchema = object({
  role: literal("user", "assistant", "system"),
  content: oneOf(
    { string: Schema.String, array: Schema.Array(ContentBlock) },
    "a string or an array of content blocks"
  ),
  clear_at: optional(AnyObject),
  output_config: optional(AnyObject)
}, "a message object")
/** One conversation turn. */
export interface Message extends Schema.Schema.Type<typeof messageSchema> {}
/** One conversation turn. */
export const Message: Schema.Schema<Message> = messageSchema

// -----------------------------------------------------------------------------
// plugins (2.1.3)
// -----------------------------------------------------------------------------

const PATTERNS_MAX_ITEMS = 1024
const PATTERN_MAX_CHARS = 1024
const PATTERNS_MAX_TOTAL_CHARS = 65536

const ModelPatterns = arrayOf(maxChars(PATTERN_MAX_CHARS), "an array of model patterns").pipe(
  entries(0, PATTERNS_MAX_ITEMS, "pattern", "patterns"),
  Schema.filter((patterns) => {
    let total = 0
    for (const pattern of patterns) total += charCount(pattern, PATTERN_MAX_CHARS)
    return total <= PATTERNS_MAX_TOTAL_CHARS ||
      `at most ${PATTERNS_MAX_TOTAL_CHARS} characters in total are allowed, got ${total}`
  }, { description: `at most ${PATTERNS_MAX_TOTAL_CHARS} characters in total` })
)

const enabled = optional(Schema.Boolean)

const routerFields = {
  enabled,
  allowed_models: optional(ModelPatterns),
  excluded_models: optional(ModelPatterns),
  cost_tier: optional(literal("low", "medium", "high", "xhigh", "max")),
  cost_quality_tradeoff: optional(integer(0, 10))
}

const plugin = <Id extends string, Fields extends Schema.Struct.Fields>(id: Id, fields: Fields) =>
  Schema.Struct({ id: Schema.Literal(id), enabled, ...fields })

const pluginSchema = tagged("id", {
  "auto-router": plugin("auto-router", { ...routerFields, pin_model: optional(Schema.Boolean) }),
  "auto-beta-router": plugin("auto-beta-router", {
    ...routerFields,
    pin_model: optional(Schema.Never.annotations({
      message: () => "is not supported by the auto-beta-router plugin (only auto-router has pin_model)"
    }))
  }),
  "context-compression": plugin("context-compression", { engine: optional(Schema.String) }),
  "file-parser": plugin("file-parser", {
    pdf: optional(object({ engine: optional(Schema.String) }, "a PDF parser options object"))
  }),
  fusion: plugin("fusion", {
    analysis_models: optional(arrayOf(Schema.String, "an array of model ids").pipe(entries(1, 8, "model", "models"))),
    model: optional(Schema.String),
    preset: optional(literal("general-high", "general-budget", "general-fast")),
    max_tool_calls: optional(integer(1, 16)),
    tools: optional(arrayOf(
      object({ type: Schema.String, parameters: optional(AnyObject) }, "a fusion tool object"),
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

// -----------------------------------------------------------------------------
// context_management.edits (2.1.4)
// -----------------------------------------------------------------------------

const counter = <const T extends readonly [string, ...Array<string>]>(...types: T) =>
  object({ type: literal(...types), value: Int }, `a {type: ${types.join(" | ")}, value} object`)

const contextManagementEditSchema = tagged("type", {
  clear_tool_uses_20250919: Schema.Struct({
    type: Schema.Literal("clear_tool_uses_20250919"),
    clear_at_least: optional(nullable(counter("input_tokens"))),
    clear_tool_inputs: optional(oneOf({
      boolean: Schema.Boolean,
      array: Schema.Array(Schema.String),
      null: Schema.Null
    }, "a boolean, an array of tool names or null")),
    exclude_tools: optional(nullable(arrayOf(Schema.String, "an array of tool names"))),
    keep: optional(counter("tool_uses")),
    trigger: optional(counter("input_tokens", "tool_uses"))
  }),
  clear_thinking_20251015: Schema.Struct({
    type: Schema.Literal("clear_thinking_20251015"),
    keep: optional(oneOf({
      object: tagged("type", {
        thinking_turns: Schema.Struct({ type: Schema.Literal("thinking_turns"), value: Int }),
        all: Schema.Struct({ type: Schema.Literal("all") })
      }, { description: "a keep object" }),
      string: Schema.Literal("all")
    }, "a {type: thinking_turns | all} object or \"all\""))
  }),
  compact_20260112: Schema.Struct({
    type: Schema.Literal("compact_20260112"),
    instructions: optional(nullable(Schema.String)),
    pause_after_compaction: optional(Schema.Boolean),
    trigger: optional(nullable(counter("input_tokens")))
  })
}, { description: "a context management edit" })
/** A context-management edit, selected by its dated `type`. */
export type ContextManagementEdit = typeof contextManagementEditSchema.Type
/** A context-management edit, selected by its dated `type`. */
export const ContextManagementEdit: Schema.Schema<ContextManagementEdit> = contextManagementEditSchema

// -----------------------------------------------------------------------------
// output_config (2.1.5), thinking (2.1.6), tool_choice (2.1.7)
// -----------------------------------------------------------------------------

const outputConfigSchema = object({
  effort: optional(nullable(literal("low", "medium", "high", "xhigh", "max"))),
  format: optional(nullable(object({
    type: Schema.Literal("json_schema"),
    schema: AnyObject
  }, "a format object"))),
  task_budget: optional(nullable(object({
    type: Schema.Literal("tokens"),
    total: integer(20000),
    remaining: optional(nullable(integer(0)))
  }, "a task_budget object")))
}, "an output_config object")
/** Effort, structured output format and the advisory task budget. */
export interface OutputConfig extends Schema.Schema.Type<typeof outputConfigSchema> {}
/** Effort, structured output format and the advisory task budget. */
export const OutputConfig: Schema.Schema<OutputConfig> = outputConfigSchema

const thinkingSchema = tagged("type", {
  enabled: Schema.Struct({
    type: Schema.Literal("enabled"),
    budget_tokens: Int,
    display: optional(Schema.Unknown),
    block_binding: optional(Schema.Unknown)
  }),
  disabled: Schema.Struct({ type: Schema.Literal("disabled") }),
  adaptive: Schema.Struct({
    type: Schema.Literal("adaptive"),
    display: optional(Schema.Unknown),
    block_binding: optional(Schema.Unknown)
  })
}, { description: "a thinking object" })
/** Extended thinking configuration, selected by `type`. */
export type Thinking = typeof thinkingSchema.Type
/** Extended thinking configuration, selected by `type`. */
export const Thinking: Schema.Schema<Thinking> = thinkingSchema

const disable_parallel_tool_use = optional(Schema.Boolean)

const toolChoiceSchema = tagged("type", {
  auto: Schema.Struct({ type: Schema.Literal("auto"), disable_parallel_tool_use }),
  any: Schema.Struct({ type: Schema.Literal("any"), disable_parallel_tool_use }),
  none: Schema.Struct({ type: Schema.Literal("none") }),
  tool: Schema.Struct({ type: Schema.Literal("tool"), name: Schema.String, disable_parallel_tool_use })
}, { description: "a tool_choice object" })
/** How the model may use tools, selected by `type`. */
export type ToolChoice = typeof toolChoiceSchema.Type
/** How the model may use tools, selected by `type`. */
export const ToolChoice: Schema.Schema<ToolChoice> = toolChoiceSchema

// -----------------------------------------------------------------------------
// tools (2.1.8)
// -----------------------------------------------------------------------------

const CustomTool = Schema.Struct({
  type: optional(nullable(Schema.Literal("custom"))),
  name: Schema.String,
  input_schema: object({
    type: optional(Schema.Literal("object")),
    properties: optional(nullable(AnyObject)),
    required: optional(nullable(arrayOf(Schema.String, "an array of property names")))
  }, "an input_schema object"),
  description: optional(Schema.String),
  strict: optional(Schema.Boolean),
  defer_loading: optional(Schema.Boolean),
  cache_control
})

const serverTool = <T extends string, N extends string, Fields extends Schema.Struct.Fields>(
  type: T,
  name: N,
  fields: Fields
) => Schema.Struct({ type: Schema.Literal(type), name: Schema.Literal(name), ...fields, cache_control })

const webSearchFields = {
  allowed_domains: optional(nullable(arrayOf(Schema.String, "an array of domains"))),
  blocked_domains: optional(nullable(arrayOf(Schema.String, "an array of domains"))),
  max_uses: optional(nullable(Int)),
  user_location: optional(nullable(AnyObject))
}

const toolSchema = tagged("type", {
  custom: CustomTool,
  bash_20250124: serverTool("bash_20250124", "bash", {}),
  text_editor_20250124: serverTool("text_editor_20250124", "str_replace_editor", {}),
  web_search_20250305: serverTool("web_search_20250305", "web_search", webSearchFields),
  web_search_20260209: serverTool("web_search_20260209", "web_search", {
    ...webSearchFields,
    allowed_callers: optional(Schema.Unknown)
  }),
  advisor_20260301: serverTool("advisor_20260301", "advisor", {
    model: Schema.String,
    max_uses: optional(Int),
    caching: optional(nullable(CacheControl)),
    allowed_callers: optional(Schema.Unknown),
    defer_loading: optional(Schema.Boolean)
  })
}, { description: "a tool object", whenAbsent: "custom", fallback: generic({ cache_control }) })
/** A tool: custom (`type` absent or "custom"), a dated server tool, or any other server tool as `{ type }`. */
export type Tool = typeof toolSchema.Type
/** A tool: custom (`type` absent or "custom"), a dated server tool, or any other server tool as `{ type }`. */
export const Tool: Schema.Schema<Tool> = toolSchema

// -----------------------------------------------------------------------------
// the request
// -----------------------------------------------------------------------------

const fallbackSchema = object({ model: Schema.String }, "a fallback object").annotations({
  parseOptions: { onExcessProperty: "error" }
})
/** A fallback model: exactly `{ model }`; any per-attempt override is rejected. */
export interface Fallback extends Schema.Schema.Type<typeof fallbackSchema> {}
/** A fallback model: exactly `{ model }`; any per-attempt override is rejected. */
export const Fallback: Schema.Schema<Fallback> = fallbackSchema

const identifier = maxChars(256)

const messagesRequestSchema = Schema.Struct({
  model: Schema.String,
  messages: nullable(arrayOf(Message, "an array of messages")),
  max_tokens: optional(Int),
  system: optional(oneOf({ string: Schema.String, array: TextBlocks }, "a string or an array of text blocks")),
  temperature: optional(Schema.Number),
  top_p: optional(Schema.Number),
  top_k: optional(Int),
  stop_sequences: optional(arrayOf(Schema.String, "an array of strings")),
  stream: optional(Schema.Boolean),
  metadata: optional(object({ user_id: optional(nullable(Schema.String)) }, "a metadata object")),
  user: optional(identifier),
  session_id: optional(identifier),
  models: optional(arrayOf(Schema.String, "an array of model ids")),
  fallbacks: optional(
    nullable(arrayOf(Fallback, "an array of fallback objects").pipe(entries(0, 3, "entry", "entries")))
  ),
  provider: optional(ProviderPreferences),
  route: optional(Route),
  plugins: optional(arrayOf(Plugin, "an array of plugin objects")),
  service_tier: optional(Schema.String),
  speed: optional(literal("fast", "standard")),
  cache_control: optional(nullable(CacheControl)),
  context_management: optional(nullable(object({
    edits: optional(arrayOf(ContextManagementEdit, "an array of edits"))
  }, "a context_management object"))),
  output_config: optional(OutputConfig),
  thinking: optional(Thinking),
  tool_choice: optional(ToolChoice),
  tools: optional(arrayOf(Tool, "an array of tools")),
  safeguards: optional(nullable(arrayOf(Schema.Unknown, "an array"))),
  stop_server_tools_when: optional(AnyObject),
  trace: optional(AnyObject)
}).pipe(
  Schema.filter((request) =>
    request.models !== undefined && request.fallbacks != null ?
      { path: ["fallbacks"], message: "cannot be combined with models" } :
      undefined
  )
)

/** The decoded body of `POST /v1/messages` (spec 2.1). */
export interface MessagesRequest extends Schema.Schema.Type<typeof messagesRequestSchema> {}

/** The JSON shape of the body of `POST /v1/messages`. */
export interface MessagesRequestEncoded extends Schema.Schema.Encoded<typeof messagesRequestSchema> {}

/** The schema of the body of `POST /v1/messages` (spec 2.1): the decoded value equals the input minus unknown keys. */
export const MessagesRequest: Schema.Schema<MessagesRequest, MessagesRequestEncoded> = oneOf(
  { object: messagesRequestSchema },
  "a JSON object"
)

// -----------------------------------------------------------------------------
// validation
// -----------------------------------------------------------------------------

const decode = Schema.decodeUnknownEither(MessagesRequest, { errors: "first", onExcessProperty: "ignore" })

const formatPath = (path: ReadonlyArray<PropertyKey>): string => {
  let out = ""
  for (const key of path) {
    out += typeof key === "number" ? `[${key}]` : out === "" ? String(key) : `.${String(key)}`
  }
  return out
}

const toInvalidRequest = (error: ParseResult.ParseError): InvalidRequest => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  const message = issue?.message ?? "is invalid"
  if (issue === undefined || issue.path.length === 0) {
    return new InvalidRequest({ message: `request body: ${message}` })
  }
  const param = formatPath(issue.path)
  return new InvalidRequest({ message: `${param}: ${message}`, param })
}

/**
 * Validates a parsed JSON body; Left carries InvalidRequest whose message starts with the offending field path
 * (e.g. "fallbacks: ...", "messages[0].content[1].type: ...", "plugins[0].allowed_models: ...") and whose `param`
 * is that path.
 */
export const validate = (body: unknown): Either.Either<MessagesRequest, InvalidRequest> =>
  Either.mapLeft(decode(body), toInvalidRequest)
