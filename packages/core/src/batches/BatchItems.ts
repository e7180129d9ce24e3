/**
 * The requests of a batch submission, checked one by one and made ready to run: each `custom_id` present and unique,
 * each `body` an object whose own `model` (if any) is the batch's, not streamed, valid as its endpoint expects (the
 * full messages schema for `/v1/messages`, the OpenAI request shapes for the others), and routable as its live route
 * would plan it (`BatchRoutes`). The stored body carries the batch's model, its provider restrictions and, in `trace`,
 * the batch id and custom id (they reach the usage records). An error names the request's index, the field and the
 * request's `custom_id`.
 */
import * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"
import type { CatalogueSnapshot } from "../catalogue/Catalogue.js"
import { InvalidRequest, NotFound } from "../errors/GatewayError.js"
import { charCount } from "../internal/RequestSchema.js"
import { show } from "../internal/Values.js"
import * as MessagesRequest from "../messages/MessagesRequest.js"
import type { JsonObject } from "../messages/Wire.js"
import * as OpenAiRequest from "../openai/OpenAiRequest.js"
import { type BatchEndpoint, type BatchProvider, openAiApiOf } from "./Batch.js"
import type { Submission } from "./BatchRequests.js"
import * as BatchRoutes from "./BatchRoutes.js"
import type { NewItem } from "./BatchStore.js"

export const MAX_CUSTOM_ID = 512

const invalid = (param: string, message: string) => new InvalidRequest({ message: `${param}: ${message}`, param })

/** An error of a request's body, under `requests[i].body`, naming the request's `custom_id`; its status kept. */
const underItem = (error: InvalidRequest | NotFound, index: number, customId: string): InvalidRequest | NotFound => {
  const base = `requests[${index}].body`
  const field = error._tag === "InvalidRequest" ? error.param : undefined
  const param = field === undefined ? base : `${base}.${field}`
  const own = field !== undefined && error.message.startsWith(`${field}: `)
    ? error.message.slice(field.length + 2)
    : error.message.replace(/^request body: /, "")
  const message = `${param}: ${own} (custom_id ${show(customId)})`
  return error._tag === "NotFound" ? new NotFound({ message }) : new InvalidRequest({ message, param })
}

/** The body with the batch's restrictions: its `only` and `allow_fallbacks` replace the request's own. */
const withProvider = (body: JsonObject, provider: BatchProvider | null): JsonObject => {
  if (provider === null) return body
  const own = Predicate.isRecord(body.provider) ? body.provider as JsonObject : {}
  return {
    ...body,
    provider: {
      ...own,
      ...(provider.only === undefined ? {} : { only: [...provider.only] }),
      ...(provider.allowFallbacks === undefined ? {} : { allow_fallbacks: provider.allowFallbacks })
    }
  }
}

/** The batch id and custom id in `trace`, where the usage record keeps custom keys. */
const withTrace = (body: JsonObject, batchId: string, customId: string): JsonObject =>
  body.trace !== undefined && !Predicate.isRecord(body.trace)
    ? body
    : { ...body, trace: { ...(body.trace as JsonObject | undefined), batch_id: batchId, batch_custom_id: customId } }

const validate = (endpoint: BatchEndpoint, body: JsonObject): Either.Either<BatchRoutes.Decoded, InvalidRequest> => {
  const api = openAiApiOf(endpoint)
  if (api === undefined) {
    return Either.map(MessagesRequest.validate(body), (request) => ({ api: "messages", request }))
  }
  if ((api === "responses" || api === "embeddings") && body.input === undefined) {
    return Either.left(new InvalidRequest({ message: "input: is missing", param: "input" }))
  }
  return OpenAiRequest.validate(api, body)
}

/** One request, checked and made ready; `seen` maps the custom ids so far to their index. */
const item = (
  submission: Submission,
  batchId: string,
  snapshot: CatalogueSnapshot,
  routerSlug: string | undefined,
  raw: unknown,
  index: number,
  seen: Map<string, number>
): Either.Either<NewItem, InvalidRequest | NotFound> => {
  const at = `requests[${index}]`
  if (!Predicate.isRecord(raw)) {
    return Either.left(invalid(at, `Expected an object with custom_id and body, actual ${show(raw)}`))
  }
  const customId = raw.custom_id
  if (typeof customId !== "string" || customId === "" || charCount(customId, MAX_CUSTOM_ID) > MAX_CUSTOM_ID) {
    return Either.left(
      invalid(
        `${at}.custom_id`,
        customId === undefined
          ? "is missing"
          : `must be a string of 1 to ${MAX_CUSTOM_ID} characters, got ${show(customId)}`
      )
    )
  }
  const earlier = seen.get(customId)
  if (earlier !== undefined) {
    return Either.left(invalid(`${at}.custom_id`, `${show(customId)} is already the custom_id of requests[${earlier}]`))
  }
  seen.set(customId, index)
  const body = raw.body
  if (!Predicate.isRecord(body)) {
    return Either.left(
      invalid(`${at}.body`, body === undefined ? "is missing" : `Expected an object, actual ${show(body)}`)
    )
  }
  if (body.model !== undefined && body.model !== submission.model) {
    return Either.left(
      invalid(
        `${at}.body.model`,
        `must be the batch's model ${show(submission.model)} or absent, got ${show(body.model)} (custom_id ${
          show(customId)
        })`
      )
    )
  }
  if (body.stream === true) {
    return Either.left(
      invalid(`${at}.body.stream`, `batch requests are not streamed (custom_id ${show(customId)})`)
    )
  }
  const { stream: _stream, ...rest } = body as JsonObject
  const ready = withTrace(withProvider({ ...rest, model: submission.model }, submission.provider), batchId, customId)
  const decoded = validate(submission.endpoint, ready)
  if (Either.isLeft(decoded)) return Either.left(underItem(decoded.left, index, customId))
  const text = JSON.stringify(ready)
  const refused = BatchRoutes.refusal(snapshot, decoded.right, ready, text.length, routerSlug)
  return refused === undefined
    ? Either.right({ customId, body: text })
    : Either.left(underItem(refused, index, customId))
}

/**
 * Every request of a submission checked and made ready, in order, its route planned on `snapshot` (unless the
 * auto-router's `routerSlug` chooses its model when it runs); the first error otherwise.
 */
export const prepare = (
  submission: Submission,
  batchId: string,
  snapshot: CatalogueSnapshot,
  routerSlug?: string | undefined
): Either.Either<Array<NewItem>, InvalidRequest | NotFound> => {
  const seen = new Map<string, number>()
  const items: Array<NewItem> = []
  for (let i = 0; i < submission.requests.length; i++) {
    const result = item(submission, batchId, snapshot, routerSlug, submission.requests[i], i, seen)
    if (Either.isLeft(result)) return Either.left(result.left)
    items.push(result.right)
  }
  return Either.right(items)
}
