/**
 * A local `TokenCounter`: OpenAI's `cl100k_base` encoding (`gpt-tokenizer`, pure JavaScript), for `count_tokens` when
 * no endpoint of the model counts tokens. An estimate for other models' tokenizers (Claude's counts come out within
 * roughly 10–20% on English text). The encoding (about 40 MB in memory) is loaded on first use, not at start-up.
 *
 * What is counted: the text of the system prompt and of every message block (text, thinking, tool inputs and results,
 * text documents), the tool definitions as JSON, a few tokens per message, and a flat 1,600 tokens per image (Anthropic's
 * size for a 1.15-megapixel image) and 1,500 per page-sized 100 KB of a PDF.
 */
import type { Wire } from "@model-gateway/core"
import { TokenCounter } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Predicate from "effect/Predicate"

type Encode = (text: string) => number

let encoder: Promise<Encode> | undefined

const load = (): Promise<Encode> =>
  encoder ??= import("gpt-tokenizer/encoding/cl100k_base").then((m) => (text: string) => m.countTokens(text))

const IMAGE_TOKENS = 1600
const PDF_TOKENS_PER_100KB = 1500
const MESSAGE_OVERHEAD = 4

/** The texts of a content value (a string, or blocks), and the tokens of what is not text. */
const collect = (content: unknown, texts: Array<string>): number => {
  if (typeof content === "string") {
    texts.push(content)
    return 0
  }
  if (!Array.isArray(content)) return 0
  let other = 0
  for (const block of content) {
    if (!Predicate.isRecord(block)) continue
    switch (block.type) {
      case "text":
        if (typeof block.text === "string") texts.push(block.text)
        break
      case "thinking":
        if (typeof block.thinking === "string") texts.push(block.thinking)
        break
      case "tool_use":
      case "server_tool_use":
        texts.push(String(block.name ?? ""), JSON.stringify(block.input ?? {}))
        break
      case "tool_result":
        other += collect(block.content, texts)
        break
      case "image":
        other += IMAGE_TOKENS
        break
      case "document": {
        const source = Predicate.isRecord(block.source) ? block.source : undefined
        if (source?.type === "text" && typeof source.data === "string") texts.push(source.data)
        else if (typeof source?.data === "string") {
          other += Math.ceil(((source.data.length * 3) / 4 / 100_000) * PDF_TOKENS_PER_100KB)
        } else other += collect(source?.content, texts)
        break
      }
      default:
        texts.push(JSON.stringify(block))
    }
  }
  return other
}

/** Counts a messages body's prompt with an encoder. */
export const countWith = (encode: Encode, body: Wire.JsonObject): number => {
  const texts: Array<string> = []
  let tokens = collect(body.system, texts)
  const messages = Array.isArray(body.messages) ? body.messages : []
  for (const message of messages) {
    if (!Predicate.isRecord(message)) continue
    tokens += MESSAGE_OVERHEAD + collect(message.content, texts)
  }
  if (Array.isArray(body.tools) && body.tools.length > 0) texts.push(JSON.stringify(body.tools))
  for (const text of texts) tokens += encode(text)
  return tokens
}

/** The local counter. */
export const make: TokenCounter.TokenCounterService = {
  name: "cl100k_base, a local estimate",
  count: (body) => Effect.promise(() => load().then((encode) => countWith(encode, body)))
}

/** The `TokenCounter` port, counting locally. */
export const layer: Layer.Layer<TokenCounter.TokenCounter> = Layer.succeed(TokenCounter.TokenCounter, make)
