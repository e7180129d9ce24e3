/**
 * The `moderation` plugin: the text a request shows the model is checked before it is sent, and a
 * flagged request is refused (403 `permission_error`, with the guardrail step in `service_metadata`).
 * The port has a built-in blocklist implementation here; provider-adapters has an adapter for
 * OpenAI-compatible `/moderations` endpoints.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as GatewayError from "../errors/GatewayError.js"
import type { JsonObject } from "../messages/Wire.js"
import type { PipelineStep } from "../routing/RoutePlanner.js"

/** The verdict on a request's input. `categories` names what was flagged (empty when not flagged). */
export interface ModerationResult {
  readonly flagged: boolean
  readonly categories: ReadonlyArray<string>
  readonly reason?: string | undefined
}

/** The moderation service could not give a verdict (unreachable, timed out, an unexpected answer). */
export class ModerationUnavailable extends Data.TaggedError("ModerationUnavailable")<{
  readonly message: string
}> {}

export interface ModerationService {
  /** Checks the given texts together: flagged when any of them is. */
  readonly check: (input: ReadonlyArray<string>) => Effect.Effect<ModerationResult, ModerationUnavailable>
}

/** Port: input moderation. */
export class Moderation extends Context.Tag("@model-gateway/core/Moderation")<Moderation, ModerationService>() {}

const notFlagged: ModerationResult = { flagged: false, categories: [] }

const normalize = (text: string): string => text.normalize("NFKC").toLowerCase()

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/**
 * A blocklist moderation: flags input that contains any of `terms` as a whole word or phrase.
 * Matching is case-insensitive and Unicode-aware: input and terms are NFKC-normalized (so full-width
 * letters and ligatures match their plain forms) and lower-cased; a term matches only where it is not
 * directly preceded or followed by a letter, a digit or `_`, so "ass" does not match "class"; the
 * whitespace inside a phrase matches any run of whitespace. Diacritics are kept ("café" is not "cafe"),
 * and scripts written without spaces (Chinese, Japanese, Thai) only match when the term stands apart.
 * The verdict names category `blocklist` but not the term, so that answers do not reveal the list.
 */
export const blocklist = (terms: ReadonlyArray<string>): ModerationService => {
  const patterns = [...new Set(terms.map((term) => normalize(term).trim()).filter((term) => term !== ""))]
    .sort((a, b) => b.length - a.length)
    .map((term) => term.split(/\s+/u).map(escapeRegExp).join("\\s+"))
  if (patterns.length === 0) return { check: () => Effect.succeed(notFlagged) }
  const matcher = new RegExp(`(?<![\\p{L}\\p{N}\\p{M}_])(?:${patterns.join("|")})(?![\\p{L}\\p{N}\\p{M}_])`, "u")
  return {
    check: (input) =>
      Effect.sync(() =>
        input.some((text) => matcher.test(normalize(text)))
          ? { flagged: true, categories: ["blocklist"], reason: "the input contains a blocked term" }
          : notFlagged
      )
  }
}

const pushText = (blocks: unknown, out: Array<string>): void => {
  if (typeof blocks === "string") {
    if (blocks !== "") out.push(blocks)
    return
  }
  if (!Array.isArray(blocks)) return
  for (const block of blocks) {
    if (!Predicate.isRecord(block)) continue
    if (block.type === "text" && typeof block.text === "string" && block.text !== "") out.push(block.text)
    else if (block.type === "tool_result") pushText(block.content, out)
    else if (
      block.type === "document" && Predicate.isRecord(block.source) && block.source.type === "text" &&
      typeof block.source.data === "string" && block.source.data !== ""
    ) out.push(block.source.data)
  }
}

/**
 * The user-visible text of a request, in order: the system prompt, then the text of every message
 * (user, assistant and system roles; `text` blocks, `tool_result` content, and plain-text documents).
 * Images, base64 documents, tool inputs and thinking are not included.
 */
export const moderationInput = (body: JsonObject): Array<string> => {
  const out: Array<string> = []
  pushText(body.system, out)
  if (Array.isArray(body.messages)) {
    for (const message of body.messages) {
      if (Predicate.isRecord(message)) pushText(message.content, out)
    }
  }
  return out
}

/** The `service_metadata` pipeline step that names the guardrail which blocked (or passed) a request. */
export const guardrailStep = (result: ModerationResult, name = "moderation"): PipelineStep => ({
  type: "guardrail",
  name,
  summary: result.flagged
    ? `input flagged${result.categories.length > 0 ? ` (${result.categories.join(", ")})` : ""}${
      result.reason === undefined ? "" : `: ${result.reason}`
    }; request blocked`
    : "input passed moderation"
})

/** The 403 a flagged request gets; pair it with `guardrailStep` in `service_metadata`. */
export const blocked = (result: ModerationResult): GatewayError.PermissionDenied =>
  new GatewayError.PermissionDenied({
    message: `the request was blocked by input moderation${
      result.categories.length > 0 ? ` (flagged: ${result.categories.join(", ")})` : ""
    }`
  })
