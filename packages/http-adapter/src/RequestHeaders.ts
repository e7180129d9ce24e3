/**
 * What the gateway reads from request headers besides the key: the session id header, the metadata switch and the
 * client-identification (app attribution) headers of spec section 4, under the names real clients send.
 */
import { GatewayError } from "@model-gateway/core"
import * as Either from "effect/Either"
import type { Headers } from "./HttpTypes.js"
import { header } from "./HttpTypes.js"

/** The longest session id, in characters (spec 8). */
export const MAX_SESSION_ID = 256

/** The `x-session-id` header, at most 256 characters (code points, as for the body's `session_id`). */
export const sessionId = (headers: Headers): Either.Either<string | undefined, GatewayError.InvalidRequest> => {
  const value = header(headers, "x-session-id")
  // Only a value longer than the limit in UTF-16 units can be longer in code points: count them only then.
  if (value === undefined || value.length <= MAX_SESSION_ID) return Either.right(value)
  const length = [...value].length
  return length <= MAX_SESSION_ID ? Either.right(value) : Either.left(
    new GatewayError.InvalidRequest({
      message: `x-session-id: must be at most ${MAX_SESSION_ID} characters, got ${length}`,
      param: "x-session-id"
    })
  )
}

const METADATA_HEADERS = ["x-service-metadata", "x-service-experimental-metadata", "x-openrouter-metadata"]

/** `X-Service-Metadata: enabled`, or one of its aliases, was sent. */
export const wantsMetadata = (headers: Headers): boolean =>
  METADATA_HEADERS.some((name) => header(headers, name)?.toLowerCase() === "enabled")

/** The app a request says it comes from (usage tracking and rankings). */
export interface App {
  readonly referer: string | undefined
  readonly title: string | undefined
  readonly categories: string | undefined
}

/** The app attribution headers: `HTTP-Referer` (or `Referer`), `X-OpenRouter-Title` (or `X-Title`), categories. */
export const app = (headers: Headers): App => ({
  referer: header(headers, "http-referer") ?? header(headers, "referer"),
  title: header(headers, "x-openrouter-title") ?? header(headers, "x-title"),
  categories: header(headers, "x-openrouter-categories")
})
