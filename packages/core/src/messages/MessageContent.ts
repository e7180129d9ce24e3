/**
 * The content of a `POST /v1/messages` request (spec 2.1.1): messages and their content blocks, with cache controls.
 * Unknown block kinds are accepted as generic `{ type }` objects; a message of a common shape (`PlainMessages`) is
 * taken as it is, without the schema's copy. `MessagesRequest` checks the rest of the body.
 */
import * as Schema from "effect/Schema"
import {
  AnyObject,
  arrayOf,
  Bool,
  generic,
  Lit,
  literal,
  nullable,
  object,
  oneOf,
  optional,
  Str,
  tagged,
  withFastPath
} from "../internal/RequestSchema.js"
import { isPlainMessage } from "./PlainMessages.js"

// -----------------------------------------------------------------------------
// cache control
// -----------------------------------------------------------------------------

const cacheControlSchema = object({
  type: Lit("ephemeral"),
  ttl: optional(Str)
}, "a cache_control object")
/** `{ type: "ephemeral", ttl? }`: an explicit cache breakpoint on a block, or the automatic one at the top level. */
export interface CacheControl extends Schema.Schema.Type<typeof cacheControlSchema> {}
/** `{ type: "ephemeral", ttl? }`: an explicit cache breakpoint on a block, or the automatic one at the top level. */
export const CacheControl: Schema.Schema<CacheControl> = cacheControlSchema

/** An optional `cache_control` field, as blocks and tools have it. */
export const cache_control = optional(nullable(CacheControl))

// -----------------------------------------------------------------------------
// content blocks (2.1.2)
// -----------------------------------------------------------------------------

const TextBlock = Schema.Struct({
  type: Lit("text"),
  text: Str,
  cache_control
})

const GenericSource = generic({})

const MediaSource = <T extends string>(type: T) => Schema.Struct({ type: Lit(type), media_type: Str, data: Str })

const ImageSource = tagged("type", {
  base64: MediaSource("base64"),
  url: Schema.Struct({ type: Lit("url"), url: Str }),
  file: Schema.Struct({ type: Lit("file"), file_id: Str })
}, { description: "an image source object", fallback: GenericSource })

const ImageBlock = Schema.Struct({
  type: Lit("image"),
  source: ImageSource,
  cache_control
})

const DocumentSource = tagged("type", {
  base64: MediaSource("base64"),
  text: MediaSource("text"),
  content: Schema.Struct({
    type: Lit("content"),
    content: oneOf({ string: Str, array: Schema.Array(AnyObject) }, "a string or an array of blocks")
  }),
  url: Schema.Struct({ type: Lit("url"), url: Str }),
  file: Schema.Struct({ type: Lit("file"), file_id: Str })
}, { description: "a document source object", fallback: GenericSource })

const DocumentBlock = Schema.Struct({
  type: Lit("document"),
  source: DocumentSource,
  title: optional(nullable(Str)),
  context: optional(nullable(Str)),
  citations: optional(Schema.Unknown),
  cache_control
})

/** An array of text blocks (a `system` prompt's, a document's content). */
export const TextBlocks = arrayOf(
  tagged("type", { text: TextBlock }, { description: "a text block" }),
  "an array of text blocks"
)

const SearchResultBlock = Schema.Struct({
  type: Lit("search_result"),
  source: Str,
  title: Str,
  content: TextBlocks,
  citations: optional(Schema.Unknown),
  cache_control
})

const ToolReferenceBlock = Schema.Struct({
  type: Lit("tool_reference"),
  tool_name: Str,
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
  type: Lit("tool_use"),
  id: Str,
  name: Str,
  input: optional(Schema.Unknown),
  cache_control
})

const ToolResultBlock = Schema.Struct({
  type: Lit("tool_result"),
  tool_use_id: Str,
  content: optional(oneOf({
    string: Str,
    array: Schema.Array(ToolResultContentBlock)
  }, "a string or an array of content blocks")),
  is_error: optional(Bool),
  cache_control
})

const ThinkingBlock = Schema.Struct({
  type: Lit("thinking"),
  thinking: Str,
  signature: Str
})

const RedactedThinkingBlock = Schema.Struct({
  type: Lit("redacted_thinking"),
  data: Str
})

const ServerToolUseBlock = Schema.Struct({
  type: Lit("server_tool_use"),
  id: Str,
  name: Str,
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
    type: Lit("web_search_result"),
    url: optional(Str),
    title: optional(Str),
    encrypted_content: optional(Str),
    page_age: optional(nullable(Str))
  })
}, { description: "a web search result block" })

const WebSearchToolResultError = tagged("type", {
  web_search_tool_result_error: Schema.Struct({
    type: Lit("web_search_tool_result_error"),
    error_code: WebSearchErrorCode
  })
}, { description: "a web search tool result error" })

const WebSearchToolResultBlock = Schema.Struct({
  type: Lit("web_search_tool_result"),
  tool_use_id: Str,
  content: oneOf(
    { array: Schema.Array(WebSearchResult), object: WebSearchToolResultError },
    "an array of web search results or a web_search_tool_result_error object"
  ),
  cache_control
})

const CompactionBlock = Schema.Struct({
  type: Lit("compaction"),
  content: nullable(Str),
  encrypted_content: optional(nullable(Str)),
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

/** A message as its schema alone checks it: what `PlainMessages` must never be more lenient than (its test). */
export const CheckedMessage = object({
  role: literal("user", "assistant", "system"),
  content: oneOf(
    { string: Str, array: Schema.Array(ContentBlock) },
    "a string or an array of content blocks"
  ),
  clear_at: optional(AnyObject),
  output_config: optional(AnyObject)
}, "a message object")

/** A message; one of the common shapes (`PlainMessages`) is taken as it is, without the schema's copy. */
const messageSchema = withFastPath(CheckedMessage, isPlainMessage, "a message object")
/** One conversation turn. */
export interface Message extends Schema.Schema.Type<typeof messageSchema> {}
/** One conversation turn. */
export const Message: Schema.Schema<Message> = messageSchema
