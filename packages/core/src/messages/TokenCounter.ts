/**
 * The token counter port: counts a messages request's prompt locally, for `count_tokens` when no endpoint of the
 * model can count it (an OpenAI-compatible provider has no such API). An estimate: every provider tokenizes its own
 * way. Without an adapter, the gateway estimates from the prompt's characters (about four per token).
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { JsonObject } from "./Wire.js"

export interface TokenCounterService {
  /** Tokens of the prompt a messages body sends: system, messages and tool definitions. */
  readonly count: (body: JsonObject) => Effect.Effect<number>
  /** Names the tokenizer, for the pipeline (`cl100k_base`, say). */
  readonly name: string
}

/** Port: a local tokenizer. */
export class TokenCounter
  extends Context.Tag("@model-gateway/core/TokenCounter")<TokenCounter, TokenCounterService>()
{}
