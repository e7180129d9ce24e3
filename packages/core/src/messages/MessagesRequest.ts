/**
 * The body of `POST /v1/messages` (spec 2.1) as an `effect/Schema` model (its messages' content in `MessageContent`),
 * and `validate`, the hot-path check that turns a parsed JSON body into a typed request or an `InvalidRequest` naming
 * the offending field path.
 *
 * The decoded value is only read for routing: the gateway forwards the original body. Unknown fields are
 * accepted everywhere except inside a `fallbacks` entry and the `provider` preferences, and unknown content block
 * and server tool kinds are accepted as generic `{ type }` objects, so that newer clients keep working.
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { InvalidRequest } from "../errors/GatewayError.js"
import {
  AnyObject,
  arrayOf,
  Bool,
  generic,
  Int,
  integer,
  Lit,
  literal,
  nullable,
  Num,
  object,
  oneOf,
  optional,
  Str,
  tagged,
  toInvalidRequest,
  tooDeep,
  tooDeepError
} from "../internal/RequestSchema.js"
import * as GatewayFields from "../routing/GatewayFields.js"
import { cache_control, CacheControl, Message, TextBlocks } from "./MessageContent.js"

export { CacheControl, CheckedMessage, ContentBlock, Message, WebSearchErrorCode } from "./MessageContent.js"

/** The deepest nesting of objects and arrays a request body may have (a 400 beyond it). */
export { MAX_DEPTH } from "../internal/RequestSchema.js"

// -----------------------------------------------------------------------------
// context_management.edits (2.1.4)
// -----------------------------------------------------------------------------

const counter = <const T extends readonly [string, ...Array<string>]>(...types: T) =>
  object({ type: literal(...types), value: Int }, `a {type: ${types.join(" | ")}, value} object`)

const contextManagementEditSchema = tagged("type", {
  clear_tool_uses_20250919: Schema.Struct({
    type: Lit("clear_tool_uses_20250919"),
    clear_at_least: optional(nullable(counter("input_tokens"))),
    clear_tool_inputs: optional(oneOf({
      boolean: Bool,
      array: Schema.Array(Str),
      null: Schema.Null
    }, "a boolean, an array of tool names or null")),
    exclude_tools: optional(nullable(arrayOf(Str, "an array of tool names"))),
    keep: optional(counter("tool_uses")),
    trigger: optional(counter("input_tokens", "tool_uses"))
  }),
  clear_thinking_20251015: Schema.Struct({
    type: Lit("clear_thinking_20251015"),
    keep: optional(oneOf({
      object: tagged("type", {
        thinking_turns: Schema.Struct({ type: Lit("thinking_turns"), value: Int }),
        all: Schema.Struct({ type: Lit("all") })
      }, { description: "a keep object" }),
      string: Lit("all")
    }, "a {type: thinking_turns | all} object or \"all\""))
  }),
  compact_20260112: Schema.Struct({
    type: Lit("compact_20260112"),
    instructions: optional(nullable(Str)),
    pause_after_compaction: optional(Bool),
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
    type: Lit("json_schema"),
    schema: AnyObject
  }, "a format object"))),
  task_budget: optional(nullable(object({
    type: Lit("tokens"),
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
    type: Lit("enabled"),
    budget_tokens: Int,
    display: optional(Schema.Unknown),
    block_binding: optional(Schema.Unknown)
  }),
  disabled: Schema.Struct({ type: Lit("disabled") }),
  adaptive: Schema.Struct({
    type: Lit("adaptive"),
    display: optional(Schema.Unknown),
    block_binding: optional(Schema.Unknown)
  })
}, { description: "a thinking object" })
/** Extended thinking configuration, selected by `type`. */
export type Thinking = typeof thinkingSchema.Type
/** Extended thinking configuration, selected by `type`. */
export const Thinking: Schema.Schema<Thinking> = thinkingSchema

const disable_parallel_tool_use = optional(Bool)

const toolChoiceSchema = tagged("type", {
  auto: Schema.Struct({ type: Lit("auto"), disable_parallel_tool_use }),
  any: Schema.Struct({ type: Lit("any"), disable_parallel_tool_use }),
  none: Schema.Struct({ type: Lit("none") }),
  tool: Schema.Struct({ type: Lit("tool"), name: Str, disable_parallel_tool_use })
}, { description: "a tool_choice object" })
/** How the model may use tools, selected by `type`. */
export type ToolChoice = typeof toolChoiceSchema.Type
/** How the model may use tools, selected by `type`. */
export const ToolChoice: Schema.Schema<ToolChoice> = toolChoiceSchema

// -----------------------------------------------------------------------------
// tools (2.1.8)
// -----------------------------------------------------------------------------

const CustomTool = Schema.Struct({
  type: optional(nullable(Lit("custom"))),
  name: Str,
  input_schema: object({
    type: optional(Lit("object")),
    properties: optional(nullable(AnyObject)),
    required: optional(nullable(arrayOf(Str, "an array of property names")))
  }, "an input_schema object"),
  description: optional(Str),
  strict: optional(Bool),
  defer_loading: optional(Bool),
  cache_control
})

const serverTool = <T extends string, N extends string, Fields extends Schema.Struct.Fields>(
  type: T,
  name: N,
  fields: Fields
) => Schema.Struct({ type: Lit(type), name: Lit(name), ...fields, cache_control })

const webSearchFields = {
  allowed_domains: optional(nullable(arrayOf(Str, "an array of domains"))),
  blocked_domains: optional(nullable(arrayOf(Str, "an array of domains"))),
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
    model: Str,
    max_uses: optional(Int),
    caching: optional(nullable(CacheControl)),
    allowed_callers: optional(Schema.Unknown),
    defer_loading: optional(Bool)
  })
}, { description: "a tool object", whenAbsent: "custom", fallback: generic({ cache_control }) })
/** A tool: custom (`type` absent or "custom"), a dated server tool, or any other server tool as `{ type }`. */
export type Tool = typeof toolSchema.Type
/** A tool: custom (`type` absent or "custom"), a dated server tool, or any other server tool as `{ type }`. */
export const Tool: Schema.Schema<Tool> = toolSchema

// -----------------------------------------------------------------------------
// the request
// -----------------------------------------------------------------------------

const messagesRequestSchema = Schema.Struct({
  model: Str,
  messages: nullable(arrayOf(Message, "an array of messages")),
  max_tokens: optional(integer(1)),
  system: optional(oneOf({ string: Str, array: TextBlocks }, "a string or an array of text blocks")),
  temperature: optional(Num),
  top_p: optional(Num),
  top_k: optional(Int),
  stop_sequences: optional(arrayOf(Str, "an array of strings")),
  stream: optional(Bool),
  metadata: optional(object({ user_id: optional(nullable(Str)) }, "a metadata object")),
  ...GatewayFields.fields,
  service_tier: optional(Str),
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
  trace: optional(GatewayFields.Trace)
}).pipe(GatewayFields.modelsOrFallbacks)

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

export type { Fallback, Plugin } from "../routing/GatewayFields.js"

/**
 * Validates a parsed JSON body; Left carries InvalidRequest whose message starts with the offending field path
 * (e.g. "fallbacks: ...", "messages[0].content[1].type: ...", "plugins[0].allowed_models: ...") and whose `param`
 * is that path.
 */
export const validate = (body: unknown): Either.Either<MessagesRequest, InvalidRequest> =>
  tooDeep(body) ? Either.left(tooDeepError()) : Either.mapLeft(decode(body), toInvalidRequest)
