/**
 * A large request lets go of its conversation once its first attempt's text is made, and parses the client's text
 * again if a fallback needs the body.
 *
 * A coding agent sends its whole conversation with every turn, hundreds of KB, and parsed it takes about as much again
 * of V8's heap. Held until the answer (a fallback sends it again), it outlived several scavenges under load, so it was
 * copied into the old generation, then marked and swept there: some 1.4 ms of collection per 600 KB request, more than
 * a pass-through proxy spends on the whole request (docs/benchmarks.md, "a large request lets go of its conversation
 * once sent"). Once the adapter has made its text (`MessagesCall.bodyMade`), nothing reads the conversation but a later
 * attempt's body: the route's needs, the token estimate and the quota demand were computed before the first attempt,
 * response healing reads `output_config` alone, and a committed stream keeps no body. So the arrays that hold it
 * (`messages`, `tools`, an array `system`; in the body and in the validated request, which has arrays of its own) are
 * emptied in place, and the client's bytes, outside V8's heap and never copied by a collection, are kept to be parsed
 * again for a fallback.
 *
 * The caller decides where this is safe: a body parsed from the client's bytes by a parser that can parse them again
 * (`JsonSource.reparser`), read as it is. Not with fusion (its runs share the body), the preflight plugins (they
 * rewrite it) or the per-endpoint transforms (they read it again for each attempt).
 *
 * The OpenAI-compatible APIs do the same with their own fields (`OPENAI_FIELDS`): chat completions' `messages` and
 * `tools`, the Responses API's and embeddings' `input`.
 */
import type { OpenAiApi } from "../upstream/Upstream.js"
import * as JsonSource from "./JsonSource.js"
import type { JsonObject } from "./Wire.js"

/** From this size a body's conversation is let go once sent; holding a smaller one costs little. */
export const RELEASE_FROM = 64 * 1024

/** The body a request's attempts forward, and what lets it go. */
export interface Conversation {
  /** The body to forward: the one given, or once it was let go, the client's text parsed again. */
  readonly body: () => JsonObject
  /** An attempt's text is made from the body: it is let go, if it can be parsed again. */
  readonly made: () => void
}

/** The top-level fields whose arrays hold a messages request's conversation. */
export const MESSAGES_FIELDS: ReadonlyArray<string> = ["messages", "tools", "system"]

/** The same, for each OpenAI-compatible API. */
export const OPENAI_FIELDS: Readonly<Record<OpenAiApi, ReadonlyArray<string>>> = {
  chat: ["messages", "tools"],
  responses: ["input", "tools"],
  embeddings: ["input"]
}

type Holder = { readonly [key: string]: unknown }

/**
 * The conversation of `raw`, the client's body as parsed, validated as `request` and forwarded as `forward`
 * (`forwardOf(raw)`), held in the arrays of its `fields`.
 */
export const make = (
  raw: JsonObject,
  request: Holder,
  forward: JsonObject,
  forwardOf: (body: JsonObject) => JsonObject,
  fields: ReadonlyArray<string> = MESSAGES_FIELDS
): Conversation => {
  const arraysOf = (o: Holder, into: Set<Array<unknown>>): void => {
    for (const key of fields) {
      const value = o[key]
      if (Array.isArray(value)) into.add(value)
    }
  }
  let current: JsonObject | undefined = forward
  // What holds the conversation's arrays besides `current`.
  let holders: Array<Holder> = [raw, request]
  let again: (() => object) | undefined
  return {
    body: () => {
      if (current === undefined) {
        const parsed = again!() as JsonObject
        current = forwardOf(parsed)
        holders = [parsed]
      }
      return current
    },
    made: () => {
      if (current === undefined) return
      again ??= JsonSource.reparser(raw)
      if (again === undefined) return
      const arrays = new Set<Array<unknown>>()
      for (const holder of holders) arraysOf(holder, arrays)
      arraysOf(current, arrays)
      for (const array of arrays) array.length = 0
      current = undefined
      holders = []
    }
  }
}
