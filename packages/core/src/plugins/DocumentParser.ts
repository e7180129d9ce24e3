/**
 * The `file-parser` plugin: PDF documents sent as base64 `document` blocks become `text` blocks for
 * endpoints that cannot take documents. The port extracts the text; `replaceDocuments` is the pure
 * rewrite of the request body around it.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import type { JsonObject } from "../messages/Wire.js"

/** Why a PDF could not be turned into text. */
export type DocumentParseFailure =
  /** not base64, not a PDF, or a PDF the parser cannot read (damaged, encrypted) */
  | "invalid"
  /** larger than the parser's byte or page limit */
  | "too_large"

export class DocumentParseFailed extends Data.TaggedError("DocumentParseFailed")<{
  readonly reason: DocumentParseFailure
  readonly message: string
}> {}

export interface DocumentParserService {
  /** The text of a base64-encoded PDF, pages separated by blank lines. */
  readonly pdfToText: (base64: string) => Effect.Effect<string, DocumentParseFailed>
}

/** Port: document text extraction. */
export class DocumentParser extends Context.Tag("@model-gateway/core/DocumentParser")<
  DocumentParser,
  DocumentParserService
>() {}

/** The base64 data of a `document` block whose source is a base64 PDF, or undefined. */
export const pdfData = (block: unknown): string | undefined => {
  if (!Predicate.isRecord(block) || block.type !== "document" || !Predicate.isRecord(block.source)) return undefined
  const source = block.source
  return source.type === "base64" && source.media_type === "application/pdf" && typeof source.data === "string"
    ? source.data
    : undefined
}

const textBlock = (block: JsonObject, text: string): JsonObject => {
  const title = typeof block.title === "string" && block.title.trim() !== "" ? block.title : "Document"
  const out: JsonObject = { type: "text", text: `${title}:\n${text}` }
  if (block.cache_control !== undefined) out.cache_control = block.cache_control
  return out
}

/** Rewrites one content array, or returns it unchanged (the same reference) when it holds no PDF. */
const rewriteBlocks = (blocks: ReadonlyArray<unknown>, texts: ReadonlyMap<string, string>): ReadonlyArray<unknown> => {
  let out: Array<unknown> | undefined
  for (let i = 0; i < blocks.length; i++) {
    const block = blocks[i]
    let next: unknown = block
    const data = pdfData(block)
    if (data !== undefined) {
      next = textBlock(block as JsonObject, texts.get(data)!)
    } else if (Predicate.isRecord(block) && block.type === "tool_result" && Array.isArray(block.content)) {
      const content = rewriteBlocks(block.content, texts)
      if (content !== block.content) next = { ...block, content }
    }
    if (next !== block) {
      out ??= blocks.slice()
      out[i] = next
    }
  }
  return out ?? blocks
}

const collect = (blocks: ReadonlyArray<unknown>, into: Set<string>): void => {
  for (const block of blocks) {
    const data = pdfData(block)
    if (data !== undefined) into.add(data)
    else if (Predicate.isRecord(block) && block.type === "tool_result" && Array.isArray(block.content)) {
      collect(block.content, into)
    }
  }
}

/**
 * Replaces every base64 PDF `document` block of the messages (also inside `tool_result` content) with a
 * `text` block `"<title or 'Document'>:\n<text>"`, keeping its `cache_control`. Each distinct PDF is parsed
 * once, in order. The input body is never modified: changed messages and arrays are copies, and a body
 * without PDFs comes back as the same object.
 */
export const replaceDocuments = <E>(
  body: JsonObject,
  parse: (base64: string) => Effect.Effect<string, E>
): Effect.Effect<JsonObject, E> => {
  const messages = body.messages
  if (!Array.isArray(messages)) return Effect.succeed(body)
  const found = new Set<string>()
  for (const message of messages) {
    if (Predicate.isRecord(message) && Array.isArray(message.content)) collect(message.content, found)
  }
  if (found.size === 0) return Effect.succeed(body)
  return Effect.map(
    Effect.forEach(found, (data) => Effect.map(parse(data), (text) => [data, text] as const)),
    (pairs) => {
      const texts = new Map(pairs)
      const rewritten = messages.map((message: unknown) => {
        if (!Predicate.isRecord(message) || !Array.isArray(message.content)) return message
        const content = rewriteBlocks(message.content, texts)
        return content === message.content ? message : { ...message, content }
      })
      return { ...body, messages: rewritten }
    }
  )
}
