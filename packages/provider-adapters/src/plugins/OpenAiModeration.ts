/**
 * The Moderation port against an OpenAI-compatible moderation API: `POST {baseUrl}/moderations` with
 * `{ input: string[], model? }`, answered by `{ results: [{ flagged, categories: { name: boolean } }] }`.
 * One connection pool, a short default time limit, and interruption aborts the request. Any failure
 * (transport, an error status, an unexpected body) is `ModerationUnavailable`: whether to let the
 * request through then is the caller's choice.
 */
import { Moderation } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { excerpt } from "../internal/Failures.js"
import type { Timeouts } from "../internal/Transport.js"
import { makeTransport, postJson, scopedTransport, type Transport } from "../internal/Transport.js"

export interface OpenAiModerationOptions {
  /** Base URL including the version prefix, e.g. `https://api.openai.com/v1`. */
  readonly baseUrl: string
  readonly apiKey?: string | undefined
  /** e.g. `omni-moderation-latest`; omitted from the request when not set (the service's default). */
  readonly model?: string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** Default: 10 s for the whole answer, 5 s to connect. */
  readonly timeouts?: Partial<Timeouts> | undefined
  /** Texts sent in one request; more are split into several requests, run 4 at a time. Default 32. */
  readonly maxBatch?: number | undefined
}

const describeError = (body: unknown, text: string) => {
  const error = (body as { error?: { message?: unknown; type?: unknown } } | undefined)?.error
  return {
    message: typeof error?.message === "string" ? error.message : excerpt(text, "moderation service error"),
    type: typeof error?.type === "string" ? error.type : undefined
  }
}

const unavailable = (message: string) => new Moderation.ModerationUnavailable({ message })

/** Reads one `/moderations` answer for `count` inputs into the flagged categories, in order of appearance. */
export const readResults = (
  json: unknown,
  count: number
): { readonly flagged: boolean; readonly categories: Array<string> } | Moderation.ModerationUnavailable => {
  const results = (json as { results?: unknown } | null | undefined)?.results
  if (!Array.isArray(results) || results.length !== count) {
    return unavailable(
      `the moderation service answered with ${
        Array.isArray(results) ? results.length : "no"
      } results for ${count} inputs`
    )
  }
  let flagged = false
  const categories: Array<string> = []
  for (const result of results as ReadonlyArray<{ flagged?: unknown; categories?: unknown } | null>) {
    if (typeof result?.flagged !== "boolean") return unavailable("the moderation service answered without a verdict")
    flagged ||= result.flagged
    if (typeof result.categories === "object" && result.categories !== null) {
      for (const [name, value] of Object.entries(result.categories)) {
        if (value === true && !categories.includes(name)) categories.push(name)
      }
    }
  }
  return { flagged, categories }
}

const timeoutsOf = (options: OpenAiModerationOptions) => ({ connectMs: 5_000, requestMs: 10_000, ...options.timeouts })

/** A Moderation service for one OpenAI-compatible moderation endpoint (over its own pool unless given one). */
export const make = (
  options: OpenAiModerationOptions,
  transport: Transport = makeTransport(timeoutsOf(options))
): Moderation.ModerationService => {
  const url = `${options.baseUrl.replace(/\/+$/, "")}/moderations`
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/json",
    ...options.headers
  }
  if (options.apiKey !== undefined) headers.authorization = `Bearer ${options.apiKey}`
  const maxBatch = Math.max(1, options.maxBatch ?? 32)

  const checkBatch = (input: ReadonlyArray<string>) =>
    postJson(transport, {
      url,
      headers,
      body: JSON.stringify(options.model === undefined ? { input } : { input, model: options.model }),
      stream: false,
      describeError
    }).pipe(
      Effect.mapError((error) =>
        unavailable(
          `the moderation service failed: ${error.kind}${
            error.status === undefined ? "" : ` (${error.status})`
          }: ${error.message}`
        )
      ),
      Effect.flatMap((json) => {
        const read = readResults(json, input.length)
        return read instanceof Moderation.ModerationUnavailable ? Effect.fail(read) : Effect.succeed(read)
      })
    )

  return {
    check: (input) => {
      const texts = input.filter((text) => text !== "")
      if (texts.length === 0) return Effect.succeed({ flagged: false, categories: [] })
      const batches: Array<ReadonlyArray<string>> = []
      for (let i = 0; i < texts.length; i += maxBatch) batches.push(texts.slice(i, i + maxBatch))
      return Effect.map(Effect.forEach(batches, checkBatch, { concurrency: 4 }), (verdicts) => {
        const categories = [...new Set(verdicts.flatMap((verdict) => verdict.categories))]
        const flagged = verdicts.some((verdict) => verdict.flagged)
        return flagged
          ? { flagged, categories, reason: "flagged by the moderation service" }
          : { flagged, categories: [] }
      })
    }
  }
}

/** The Moderation port backed by an OpenAI-compatible moderation API; its pool closes with the layer. */
export const layer = (options: OpenAiModerationOptions): Layer.Layer<Moderation.Moderation> =>
  Layer.scoped(Moderation.Moderation, Effect.map(scopedTransport(timeoutsOf(options)), (t) => make(options, t)))
