/**
 * Runs one request of a batch through the same executor as a live request to its endpoint (the messages use case, or
 * the OpenAI-compatible one), as the batch's key and app, JSON only: routing, fallbacks within the batch's provider
 * restrictions, usage records and cost (times the batch price factor) are the live request's. A failure that may pass
 * (rate limited, overloaded, a time-out, a 5xx) is tried again after a back-off, up to a limit; each try is a request
 * of its own (its own request id and usage record). A refusal by the gateway's own rate limits is waited out, not
 * counted as a try, until the batch's window ends. The result is an answer or an error, never a failure; or none,
 * when the worker stops while the request is not at an upstream (before a try, or waiting for the next one).
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"
import * as GatewayError from "../errors/GatewayError.js"
import type { Charge } from "../execution/Charging.js"
import type { Outcome } from "../execution/Outcome.js"
import type { Limits } from "../limits/Limits.js"
import type { MessagesServiceShape } from "../messages/MessagesService.js"
import type { RequestContext } from "../messages/RequestContext.js"
import type { JsonObject } from "../messages/Wire.js"
import type { OpenAiServiceShape } from "../openai/OpenAiService.js"
import { type Batch, type ItemResult, openAiApiOf } from "./Batch.js"
import type { ClaimedItem, Finished } from "./BatchStore.js"

/** The executors a request runs on. */
export interface RunnerPorts {
  readonly messages: MessagesServiceShape
  readonly openai: OpenAiServiceShape
}

export interface RunnerOptions {
  /** Multiplies the cost of every request (a decimal string); none: the endpoints' prices. */
  readonly priceFactor?: string | undefined
  /** Tries after the first, for failures that may pass. */
  readonly maxRetries: number
  /** The first back-off; it doubles with each try (with jitter). */
  readonly retryBaseMs: number
  /** The longest back-off (an upstream's `Retry-After` included). */
  readonly retryMaxMs: number
  /**
   * Done when the worker stops: a request then starts no other try, and a wait between tries ends at once (the
   * request is given back without a result, to run again); a try under way at an upstream goes on to its end.
   */
  readonly stopping?: Deferred.Deferred<void> | undefined
}

/** Waits `ms`, or less when the worker stops meanwhile. */
const wait = (options: RunnerOptions, ms: number) =>
  options.stopping === undefined
    ? Effect.sleep(Duration.millis(ms))
    : Effect.raceFirst(Effect.sleep(Duration.millis(ms)), Deferred.await(options.stopping))

const stopped = (options: RunnerOptions) =>
  options.stopping === undefined ? Effect.succeed(false) : Deferred.isDone(options.stopping)

/** `prefix` and 32 random hex digits. */
export const randomId = (prefix: string): Effect.Effect<string> =>
  Effect.map(
    Effect.all(Array.from({ length: 4 }, () => Random.nextIntBetween(0, 0x100000000))),
    (parts) => `${prefix}${parts.map((p) => p.toString(16).padStart(8, "0")).join("")}`
  )

/** Failures that may pass if the same request is sent again later (`GatewayError.mayPass`). */
export const isRetryable = GatewayError.mayPass

const contextOf = (
  batch: Batch,
  item: ClaimedItem,
  requestId: string,
  priceFactor: string | undefined,
  keyLimits: Limits | undefined
) =>
  ({
    requestId,
    route: `BATCH ${batch.endpoint}`,
    principal: {
      keyId: batch.keyId ?? "batch",
      workspace: batch.workspace,
      management: false,
      interns: false,
      limits: keyLimits
    },
    metadata: false,
    headers: {},
    bodyBytes: item.body.length,
    priceFactor,
    app: {
      referer: batch.app.referer ?? undefined,
      title: batch.app.title ?? undefined,
      categories: batch.app.categories ?? undefined
    }
  }) satisfies RequestContext

const execute = (ports: RunnerPorts, batch: Batch, context: RequestContext, body: JsonObject) => {
  const api = openAiApiOf(batch.endpoint)
  return api === undefined ? ports.messages.create(context, body) : ports.openai.create(api, context, body)
}

/** Prompt tokens as OpenAI counts them (cached ones included), completion tokens, and the cost. */
const usageOf = (charge: Charge | undefined) => ({
  promptTokens: charge === undefined ? 0 : charge.usage.input + charge.usage.cacheRead + charge.usage.cacheWrite,
  completionTokens: charge?.usage.output ?? 0,
  cost: charge?.cost ?? "0"
})

type Try =
  | { readonly _tag: "Answered"; readonly requestId: string; readonly outcome: Outcome }
  | { readonly _tag: "Failed"; readonly error: GatewayError.GatewayError }

/** One try: a new request id, the executor, a defect turned into an internal error. */
const once = (
  ports: RunnerPorts,
  options: RunnerOptions,
  batch: Batch,
  item: ClaimedItem,
  body: JsonObject,
  keyLimits: Limits | undefined
) =>
  Effect.flatMap(
    randomId("req_"),
    (requestId) =>
      execute(ports, batch, contextOf(batch, item, requestId, options.priceFactor, keyLimits), body).pipe(
        Effect.map((outcome): Try => ({ _tag: "Answered", requestId, outcome })),
        Effect.catchAll((error) => Effect.succeed<Try>({ _tag: "Failed", error })),
        Effect.catchAllDefect((defect) =>
          Effect.as(
            Effect.logError("batch request failed", Cause.die(defect)),
            { _tag: "Failed", error: new GatewayError.InternalError({ message: "Internal error" }) } satisfies Try
          )
        )
      )
  )

/** How long to wait before try `n` (1 is the first retry): doubling, jittered, at least an upstream's `Retry-After`. */
const backoff = (options: RunnerOptions, n: number, error: GatewayError.GatewayError) =>
  Effect.map(Random.next, (r) => {
    const doubled = Math.min(options.retryMaxMs, options.retryBaseMs * 2 ** (n - 1))
    const asked = error._tag === "RateLimited" && error.retryAfterMs !== undefined ? error.retryAfterMs : 0
    return Math.min(options.retryMaxMs, Math.max(asked, doubled * (0.5 + r / 2)))
  })

/**
 * Waits for the gateway's own rate limit (the key's or the workspace's) to let a request through, when that limit
 * refused it: the wait its refusal named (at least the first back-off, at most the longest, jittered), then a new try
 * that does not count against `maxRetries`. A batch is paced by its limits, as its requests would be if sent one by
 * one, rather than failed by them; but a request the limit would let through only after the batch's window ends has
 * the refusal as its result. False (nothing waited) for any other failure.
 */
const pace = (options: RunnerOptions, batch: Batch, error: GatewayError.GatewayError): Effect.Effect<boolean> =>
  error._tag !== "RateLimited" || error.quota === undefined
    ? Effect.succeed(false)
    : Effect.gen(function*() {
      const asked = Math.max(options.retryBaseMs, error.retryAfterMs ?? 0)
      if ((yield* Clock.currentTimeMillis) + asked >= batch.expiresAt) return false
      yield* wait(options, Math.min(options.retryMaxMs, asked) * (1 + (yield* Random.next) / 4))
      return true
    })

const failedResult = (resultId: string, item: ClaimedItem, error: GatewayError.GatewayError): ItemResult => ({
  id: resultId,
  customId: item.customId,
  response: null,
  error: {
    message: error.message,
    type: GatewayError.describe(error).type,
    param: error._tag === "InvalidRequest" ? error.param ?? null : null
  }
})

/**
 * Runs one request (retrying what may pass) and gives its result with what it adds to the batch; undefined when the
 * worker stopped before a try (`RunnerOptions.stopping`): nothing was recorded, and the request is to run again.
 * `keyLimits` are the limits of the key that submitted the batch, as it has them now: its requests count against them
 * as its live ones do.
 */
export const run = (
  ports: RunnerPorts,
  options: RunnerOptions,
  batch: Batch,
  item: ClaimedItem,
  keyLimits?: Limits | undefined
): Effect.Effect<Finished | undefined> =>
  Effect.gen(function*() {
    const resultId = yield* randomId("batch_req_")
    const body = JSON.parse(item.body) as JsonObject
    let tries = 0
    while (true) {
      if (yield* stopped(options)) return undefined
      const attempt = yield* once(ports, options, batch, item, body, keyLimits)
      if (attempt._tag === "Answered") {
        const outcome = attempt.outcome
        if (outcome._tag === "Json") {
          return {
            outcome: "completed",
            result: {
              id: resultId,
              customId: item.customId,
              response: { statusCode: 200, requestId: attempt.requestId, body: outcome.body },
              error: null
            },
            ...usageOf(outcome.charge)
          } satisfies Finished
        }
        // Never asked for (batch requests are not streamed): release the stream and fail the request.
        yield* Effect.scoped(outcome.open)
        const error = new GatewayError.InternalError({ message: "the endpoint answered with a stream" })
        return { outcome: "failed", result: failedResult(resultId, item, error), ...usageOf(undefined) }
      }
      const paced = yield* pace(options, batch, attempt.error)
      if (paced) continue
      tries++
      if (tries > options.maxRetries || !isRetryable(attempt.error)) {
        return { outcome: "failed", result: failedResult(resultId, item, attempt.error), ...usageOf(undefined) }
      }
      yield* wait(options, yield* backoff(options, tries, attempt.error))
    }
  })
