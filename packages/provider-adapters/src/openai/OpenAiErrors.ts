/**
 * Classification of the errors an OpenAI-compatible upstream answers with, for the executor: an HTTP error answer by
 * its status and body (`classifyErrorBody`), and an error sent inside a stream or a 200 body (`classifyInBandError`),
 * whose status comes from its `code` or its type.
 */
import { Upstream } from "@model-gateway/core"
import { excerpt, rejectionKind } from "../internal/Failures.js"
import { asNumber, asObject, asString } from "./Translation.js"

type UpstreamError = Upstream.UpstreamError
type UpstreamFailure = Upstream.UpstreamFailure

const statusFromErrorType = (type: string | undefined): number | undefined => {
  switch (type) {
    case "rate_limit_exceeded":
    case "rate_limit_error":
    case "insufficient_quota":
      return 429
    case "overloaded_error":
    case "overloaded":
      return 529
    case "invalid_request_error":
    case "context_length_exceeded":
    case "invalid_request":
      return 400
    case "authentication_error":
    case "invalid_api_key":
      return 401
    case "permission_error":
      return 403
    case "not_found_error":
    case "model_not_found":
      return 404
    case "timeout":
    case "timeout_error":
      return 408
    case "server_error":
    case "api_error":
    case "internal_error":
      return 500
    default:
      return undefined
  }
}

const kindFromStatus = (status: number, overloaded: boolean): UpstreamFailure => {
  if (status === 429) return "rate_limited"
  if (status === 529 || (overloaded && status >= 500)) return "overloaded"
  if (status === 408 || status === 504) return "timeout"
  if (status >= 500) return "server_error"
  if (status === 401 || status === 403 || status === 402) return "auth"
  if (status === 404) return "not_found"
  return "invalid_request"
}

/**
 * Classifies an upstream HTTP error answer (status and parsed body) for the executor: 429 →
 * `rate_limited`, 529 or an overloaded body → `overloaded`, 5xx → `server_error`, 401/402/403 →
 * `auth`, 404 → `not_found`, other 4xx → `invalid_request`. The message comes from `error.message`.
 */
export const classifyErrorBody = (status: number, body: unknown, retryAfterMs?: number): UpstreamError => {
  const error = asObject(asObject(body)?.error)
  const errorType = asString(error?.type) ?? asString(error?.code)
  const message = asString(error?.message) ?? asString(asObject(body)?.message) ??
    excerpt(typeof body === "string" ? body : "", `upstream answered with status ${status}`)
  const overloaded = errorType === "overloaded_error" || errorType === "overloaded" || /overloaded/i.test(message)
  const kind = kindFromStatus(status, overloaded)
  return new Upstream.UpstreamError({
    kind: kind === "invalid_request"
      ? rejectionKind(message, `${errorType ?? ""} ${asString(error?.code) ?? ""}`)
      : kind,
    message,
    status,
    errorType,
    retryAfterMs
  })
}

/** An error an OpenAI-compatible server sent inside a stream (`{"error": {...}}`), classified like an HTTP error. */
export const classifyInBandError = (error: unknown): UpstreamError => {
  const object = asObject(error)
  const code = asNumber(object?.code)
  const type = asString(object?.type) ?? asString(object?.code)
  const status = code !== undefined && code >= 400 && code <= 599 ? code : statusFromErrorType(type) ?? 500
  const err = classifyErrorBody(status, { error: object ?? { message: String(error) } })
  return new Upstream.UpstreamError({ kind: err.kind, message: err.message, errorType: err.errorType })
}
