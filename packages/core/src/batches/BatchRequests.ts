/**
 * What clients send to the batch routes, validated: the submission body's own fields (its requests are checked one by
 * one in `BatchItems`) and the list's query. Every error is a 400 naming the field, except too many requests: a 413.
 */
import * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import { InvalidRequest, PayloadTooLarge } from "../errors/GatewayError.js"
import { Bool, literal, maxChars, optional, toInvalidRequest } from "../internal/RequestSchema.js"
import { show } from "../internal/Values.js"
import { type BatchEndpoint, type BatchProvider, type BatchStatus, endpoints, isStatus, statuses } from "./Batch.js"

/** The submission body without its requests. */
export interface Submission {
  readonly endpoint: BatchEndpoint
  readonly model: string
  readonly provider: BatchProvider | null
  /** Each request as sent: checked by `BatchItems`. */
  readonly requests: ReadonlyArray<unknown>
}

const Slug = maxChars(256).pipe(
  Schema.filter((s) => s.trim() !== "" || "must not be empty")
)

const header = Schema.Struct({
  endpoint: literal(...endpoints),
  model: Slug,
  completion_window: optional(literal("24h")),
  provider: optional(Schema.Unknown)
})

const decodeHeader = Schema.decodeUnknownEither(header, { errors: "first", onExcessProperty: "ignore" })

const PROVIDER_KEYS: ReadonlySet<string> = new Set(["only", "allow_fallbacks"])

const decodeOnly = Schema.decodeUnknownEither(
  Schema.Array(Slug).annotations({
    message: (issue) => `Expected an array of provider slugs, actual ${show(issue.actual)}`
  })
)
const decodeFlag = Schema.decodeUnknownEither(Bool)

/** `provider`: only `only` (provider slugs) and `allow_fallbacks`; any other key is a 400. */
const providerOf = (raw: unknown): Either.Either<BatchProvider | null, InvalidRequest> => {
  if (raw === undefined || raw === null) return Either.right(null)
  if (!Predicate.isRecord(raw)) {
    return Either.left(
      new InvalidRequest({ message: `provider: Expected an object, actual ${show(raw)}`, param: "provider" })
    )
  }
  const unsupported = Object.keys(raw).find((key) => !PROVIDER_KEYS.has(key))
  if (unsupported !== undefined) {
    const param = `provider.${unsupported}`
    return Either.left(
      new InvalidRequest({
        message: `${param}: not supported in batches (only provider.only and provider.allow_fallbacks are)`,
        param
      })
    )
  }
  const only = raw.only === undefined || raw.only === null ? Either.right(undefined) : decodeOnly(raw.only)
  if (Either.isLeft(only)) return Either.left(toInvalidRequest(only.left, ["provider", "only"]))
  const flag = raw.allow_fallbacks === undefined || raw.allow_fallbacks === null
    ? Either.right(undefined)
    : decodeFlag(raw.allow_fallbacks)
  if (Either.isLeft(flag)) return Either.left(toInvalidRequest(flag.left, ["provider", "allow_fallbacks"]))
  return Either.right({
    ...(only.right === undefined ? {} : { only: only.right }),
    ...(flag.right === undefined ? {} : { allowFallbacks: flag.right })
  })
}

/** The submission's own fields; `maxRequests` is the most requests a batch may have (more is a 413). */
export const submission = (
  body: unknown,
  maxRequests: number
): Either.Either<Submission, InvalidRequest | PayloadTooLarge> =>
  Either.gen(function*() {
    if (!Predicate.isRecord(body)) {
      return yield* Either.left(
        new InvalidRequest({ message: `request body: must be a JSON object, got ${show(body)}` })
      )
    }
    const fields = yield* Either.mapLeft(decodeHeader(body), (error) => toInvalidRequest(error))
    const provider = yield* providerOf(fields.provider)
    const requests = body.requests
    if (!Array.isArray(requests)) {
      return yield* Either.left(
        new InvalidRequest({
          message: requests === undefined
            ? "requests: is missing"
            : `requests: Expected an array of requests, actual ${show(requests)}`,
          param: "requests"
        })
      )
    }
    if (requests.length === 0) {
      return yield* Either.left(
        new InvalidRequest({ message: "requests: at least 1 request is required", param: "requests" })
      )
    }
    if (requests.length > maxRequests) {
      return yield* Either.left(
        new PayloadTooLarge({ message: `requests: at most ${maxRequests} requests per batch, got ${requests.length}` })
      )
    }
    return { endpoint: fields.endpoint, model: fields.model, provider, requests }
  })

/** The list query as it arrives (a repeated key gives an array). */
export interface ListParams {
  readonly limit?: string | ReadonlyArray<string> | undefined
  readonly after?: string | ReadonlyArray<string> | undefined
  readonly status?: string | ReadonlyArray<string> | undefined
  readonly created_after?: string | ReadonlyArray<string> | undefined
  readonly created_before?: string | ReadonlyArray<string> | undefined
}

export interface ListOptions {
  readonly limit: number
  readonly after: string | undefined
  readonly statuses: ReadonlyArray<BatchStatus>
  /** Epoch milliseconds, exclusive: batches created in a later second than `created_after`. */
  readonly createdAfter: number | undefined
  /** Epoch milliseconds, exclusive: batches created in an earlier second than `created_before`. */
  readonly createdBefore: number | undefined
}

export const DEFAULT_LIMIT = 20
export const MAX_LIMIT = 100

const single = (
  name: string,
  value: string | ReadonlyArray<string> | undefined
): Either.Either<string | undefined, InvalidRequest> =>
  typeof value === "string" || value === undefined
    ? Either.right(value)
    : Either.left(new InvalidRequest({ message: `${name}: give it once`, param: name }))

const UNIX_SECONDS = /^\d{1,12}$/

/** A unix time in seconds (a non-negative integer). */
const seconds = (name: string, value: string | ReadonlyArray<string> | undefined) =>
  Either.flatMap(single(name, value), (text) =>
    text === undefined ? Either.right(undefined) : UNIX_SECONDS.test(text)
      ? Either.right(Number(text))
      : Either.left(
        new InvalidRequest({ message: `${name}: must be a unix time in seconds, got ${show(text)}`, param: name })
      ))

/**
 * The list query: `limit` 1..100 (20), `after` (the previous page's `last_id`), `status` repeated (or comma-separated;
 * any of them), `created_after` / `created_before` (unix seconds, strict). A batch's `created_at` is in whole seconds,
 * so the bounds compare whole seconds.
 */
export const listOptions = (params: ListParams): Either.Either<ListOptions, InvalidRequest> =>
  Either.gen(function*() {
    const raw = params.status === undefined ? [] : typeof params.status === "string" ? [params.status] : params.status
    const wanted = raw.flatMap((s) => s.split(",")).map((s) => s.trim()).filter((s) => s !== "")
    const unknown = wanted.find((s) => !isStatus(s))
    if (unknown !== undefined) {
      return yield* Either.left(
        new InvalidRequest({
          message: `status: ${show(unknown)} is not a batch status; expected any of ${statuses.join(", ")}`,
          param: "status"
        })
      )
    }
    const limitText = yield* single("limit", params.limit)
    const limit = limitText === undefined ? DEFAULT_LIMIT : /^\d+$/.test(limitText) ? Number(limitText) : NaN
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
      return yield* Either.left(
        new InvalidRequest({ message: `limit: must be an integer from 1 to ${MAX_LIMIT}`, param: "limit" })
      )
    }
    const after = yield* single("after", params.after)
    if (after === "") {
      return yield* Either.left(new InvalidRequest({ message: "after: must not be empty", param: "after" }))
    }
    const createdAfter = yield* seconds("created_after", params.created_after)
    const createdBefore = yield* seconds("created_before", params.created_before)
    return {
      limit,
      after,
      statuses: [...new Set(wanted as Array<BatchStatus>)],
      createdAfter: createdAfter === undefined ? undefined : (createdAfter + 1) * 1000 - 1,
      createdBefore: createdBefore === undefined ? undefined : createdBefore * 1000
    }
  })
