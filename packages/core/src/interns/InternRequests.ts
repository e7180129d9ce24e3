/**
 * What clients send to the intern routes, validated: the bodies of create, update and delete, the list's query, and
 * the fingerprint that tells a replayed create (same `Idempotency-Key`, same request) from a conflicting one.
 */
import * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import { InvalidRequest } from "../errors/GatewayError.js"
import { Bool, charCount, optional, Str, toInvalidRequest, tooDeep, tooDeepError } from "../internal/RequestSchema.js"
import { show } from "../internal/Values.js"
import { type InternStatus, isStatus, statuses } from "./Intern.js"

/** A string of `min` to `max` characters. */
const text = (min: number, max: number) =>
  Str.pipe(
    Schema.filter((s) => s.length >= min && charCount(s, max) <= max, {
      // Also the message of a value that is not a string at all (as in RequestSchema's `maxChars`).
      message: (issue) =>
        typeof issue.actual === "string"
          ? `must be ${min === 0 ? "at most" : `${min} to`} ${max} characters, got ${charCount(issue.actual, max)}`
          : `Expected string, actual ${show(issue.actual)}`
    })
  )

export const MAX_NAME = 128
export const MAX_DESCRIPTION = 4_000
export const MAX_INSTRUCTIONS = 100_000

const Name = text(1, MAX_NAME)
const Description = Schema.NullOr(text(0, MAX_DESCRIPTION))
const Instructions = Schema.NullOr(text(0, MAX_INSTRUCTIONS))
const ModelId = Schema.NullOr(text(1, 256))
const Flag = Bool
const Id = text(1, 256)

/** `POST /interns`. `model` is the gateway's addition (the SDK sets it with an update). */
export const CreateIntern = Schema.Struct({
  name: Name,
  description: optional(Description),
  instructions: optional(Instructions),
  model: optional(ModelId),
  /** Provision right away. */
  provision: optional(Flag),
  vault_id: optional(Id),
  workspace_id: optional(Id)
})
export type CreateIntern = typeof CreateIntern.Type

/** `PATCH /interns/{id}`: the fields to change. */
export const UpdateIntern = Schema.Struct({
  name: optional(Name),
  description: optional(Description),
  instructions: optional(Instructions),
  model: optional(ModelId)
})
export type UpdateIntern = typeof UpdateIntern.Type

/** `DELETE /interns/{id}`: `acknowledge_workspace_loss` is accepted either way (a local daemon keeps no files). */
export const DeleteIntern = Schema.Struct({ acknowledge_workspace_loss: optional(Flag) })

/** Decodes a parsed JSON body with `schema`; a failure is a 400 naming the field (the other routes' messages). */
export const decodeBody = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "first", onExcessProperty: "ignore" })
  return (body: unknown): Either.Either<A, InvalidRequest> => {
    if (!Predicate.isRecord(body)) {
      return Either.left(new InvalidRequest({ message: `request body: must be a JSON object, got ${show(body)}` }))
    }
    if (tooDeep(body)) return Either.left(tooDeepError())
    return Either.mapLeft(decode(body), toInvalidRequest)
  }
}

/** The create request as its idempotency fingerprint: equal for the same request, whatever the key order. */
export const fingerprint = (request: CreateIntern): string =>
  JSON.stringify([
    request.name,
    request.description ?? null,
    request.instructions ?? null,
    request.model ?? null,
    request.provision ?? false,
    request.vault_id ?? null,
    request.workspace_id ?? null
  ])

/** The list query as it arrives (a repeated key gives an array). */
export interface ListParams {
  readonly status?: string | ReadonlyArray<string> | undefined
  readonly limit?: string | ReadonlyArray<string> | undefined
  readonly starting_after?: string | ReadonlyArray<string> | undefined
  readonly workspace_id?: string | ReadonlyArray<string> | undefined
}

export interface ListOptions {
  readonly statuses: ReadonlyArray<InternStatus>
  readonly limit: number
  readonly startingAfter: string | undefined
  readonly workspace: string | undefined
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

/** The list query: `status=a,b` (comma-separated, or repeated), `limit` 1..100, `starting_after`, `workspace_id`. */
export const listOptions = (params: ListParams): Either.Either<ListOptions, InvalidRequest> =>
  Either.gen(function*() {
    const raw = params.status === undefined ? [] : typeof params.status === "string" ? [params.status] : params.status
    const wanted = raw.flatMap((s) => s.split(",")).map((s) => s.trim()).filter((s) => s !== "")
    const unknown = wanted.find((s) => !isStatus(s))
    if (unknown !== undefined) {
      return yield* Either.left(
        new InvalidRequest({
          message: `status: '${unknown}' is not a status; expected a comma-separated list of ${statuses.join(", ")}`,
          param: "status"
        })
      )
    }
    const limitText = yield* single("limit", params.limit)
    const limit = limitText === undefined ? DEFAULT_LIMIT : Number(limitText)
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
      return yield* Either.left(
        new InvalidRequest({ message: `limit: must be an integer from 1 to ${MAX_LIMIT}`, param: "limit" })
      )
    }
    const startingAfter = yield* single("starting_after", params.starting_after)
    const workspace = yield* single("workspace_id", params.workspace_id)
    return { statuses: [...new Set(wanted as Array<InternStatus>)], limit, startingAfter, workspace }
  })
