/**
 * Error bodies, one per route family: the messages-style body of spec 7.1 (`/v1/messages`), the generic
 * `{error:{code,message,metadata}}` body of spec 7.2 (speech, endpoints, interns, batches, and any path the gateway
 * does not know), and for the OpenAI-compatible routes the generic body with OpenAI's `type` and `param`
 * (`{error:{code,message,type,param,metadata}}`): `code` is the HTTP status, as OpenRouter sends it and its SDK
 * requires, which the openai SDK accepts too. Statuses and types come from the one table in core
 * (`GatewayError.describe`).
 */
import { GatewayError } from "@model-gateway/core"
import type { GatewayResponse } from "./HttpTypes.js"
import * as QuotaHeaders from "./QuotaHeaders.js"

/** The error body a route answers with. */
export type Family = "messages" | "generic" | "openai"

/** What an error response says, before its family gives it a body. */
interface Problem {
  readonly status: number
  /** The messages-protocol error type (spec 7.1). */
  readonly type: string
  readonly message: string
  readonly param: string | undefined
  /** OpenAI's string error code, when there is one: told in the OpenAI body's `metadata.openai_code`. */
  readonly openaiCode: string | undefined
  readonly serviceMetadata: unknown
  /** The generic body's `metadata` (spec 7.2), when the error has a reason. */
  readonly metadata: Metadata | undefined
  readonly headers: Record<string, string>
}

interface Metadata {
  readonly reason: string
  readonly retryable: boolean
}

const JSON_TYPE = "application/json"

/** The content type and the request's id; on the OpenAI routes under OpenAI's name too (the openai SDK's `requestID`). */
const idHeaders = (family: Family, requestId: string): Record<string, string> =>
  family === "openai"
    ? { "content-type": JSON_TYPE, "request-id": requestId, "x-request-id": requestId }
    : { "content-type": JSON_TYPE, "request-id": requestId }

const headersOf = (error: GatewayError.GatewayError, requestId: string, family: Family): Record<string, string> => {
  const headers = idHeaders(family, requestId)
  if ((error._tag === "RateLimited" || error._tag === "Overloaded") && error.retryAfterMs !== undefined) {
    headers["retry-after"] = String(Math.max(1, Math.ceil(error.retryAfterMs / 1000)))
  }
  if (error._tag === "PayloadTooLarge") headers.connection = "close"
  // The gateway's provider configuration is wrong: sending the request again cannot pass. The SDKs retry every 5xx
  // unless told not to (the Anthropic and openai SDKs read this header).
  if (error._tag === "UpstreamRejected" && error.status === 502) headers["x-should-retry"] = "false"
  if (error._tag === "RateLimited" || error._tag === "BudgetExceeded" || error._tag === "InvalidRequest") {
    QuotaHeaders.add(headers, family, error.quota, Date.now())
  }
  return headers
}

const OPENAI_CODES: Partial<Record<GatewayError.GatewayError["_tag"], string>> = {
  Unauthenticated: "invalid_api_key",
  RateLimited: "rate_limit_exceeded",
  BudgetExceeded: "insufficient_quota"
}

const problemOf = (error: GatewayError.GatewayError, requestId: string, family: Family): Problem => {
  const { status, type } = GatewayError.describe(error)
  return {
    status,
    type,
    message: error.message,
    param: error._tag === "InvalidRequest" ? error.param : undefined,
    openaiCode: OPENAI_CODES[error._tag],
    serviceMetadata: error._tag === "PermissionDenied" && error.pipeline !== undefined
      ? { pipeline: error.pipeline }
      : undefined,
    metadata: metadataOf(error, status),
    headers: headersOf(error, requestId, family)
  }
}

const text = (status: number, headers: Record<string, string>, body: unknown): GatewayResponse => ({
  status,
  headers,
  body: { _tag: "Text", text: JSON.stringify(body) }
})

const messagesBody = (problem: Problem, requestId: string): GatewayResponse =>
  text(problem.status, problem.headers, {
    type: "error",
    error: { type: problem.type, message: problem.message },
    request_id: requestId,
    ...(problem.serviceMetadata === undefined ? {} : { service_metadata: problem.serviceMetadata })
  })

const REASONS: Partial<Record<number, Metadata>> = {
  402: { reason: "budget_exceeded", retryable: false },
  404: { reason: "not_found", retryable: false },
  500: { reason: "internal_error", retryable: true }
}

/** The reason of an error that names its own, else the one of its status (spec 7.2). */
const metadataOf = (error: GatewayError.GatewayError, status: number): Metadata | undefined => {
  switch (error._tag) {
    case "Conflict":
      return { reason: error.reason, retryable: error.retryable }
    case "RequestTimeout":
      return { reason: "timeout", retryable: true }
    case "PermissionDenied":
      return error.reason === undefined ? REASONS[status] : { reason: error.reason, retryable: false }
    case "RateLimited":
      return error.reason === undefined ? REASONS[status] : { reason: error.reason, retryable: true }
    default:
      return REASONS[status]
  }
}

const genericBody = (problem: Problem): GatewayResponse => {
  const metadata = problem.metadata
  return text(problem.status, problem.headers, {
    error: { code: problem.status, message: problem.message, ...(metadata ? { metadata } : {}) }
  })
}

/** The messages-protocol types OpenAI's bodies share; any other becomes `server_error` (5xx) or an invalid request. */
const OPENAI_TYPES = new Set([
  "invalid_request_error",
  "authentication_error",
  "permission_error",
  "not_found_error",
  "rate_limit_error"
])

const openaiType = (problem: Problem): string =>
  OPENAI_TYPES.has(problem.type)
    ? problem.type
    : problem.type === "billing_error"
    ? "insufficient_quota"
    : problem.status >= 500
    ? "server_error"
    : "invalid_request_error"

/** The generic body's metadata, with OpenAI's string code where OpenAI has one for the error. */
const openaiMetadata = (problem: Problem): object | undefined =>
  problem.openaiCode === undefined
    ? problem.metadata
    : Object.assign({}, problem.metadata, { openai_code: problem.openaiCode })

const openaiBody = (problem: Problem): GatewayResponse => {
  const metadata = openaiMetadata(problem)
  return text(problem.status, problem.headers, {
    error: {
      code: problem.status,
      message: problem.message,
      type: openaiType(problem),
      param: problem.param ?? null,
      ...(metadata ? { metadata } : {})
    }
  })
}

const render = (family: Family, problem: Problem, requestId: string): GatewayResponse => {
  switch (family) {
    case "messages":
      return messagesBody(problem, requestId)
    case "generic":
      return genericBody(problem)
    case "openai":
      return openaiBody(problem)
  }
}

/** The messages-style error response (spec 7.1). */
export const messages = (error: GatewayError.GatewayError, requestId: string): GatewayResponse =>
  messagesBody(problemOf(error, requestId, "messages"), requestId)

/** The generic error response (spec 7.2). */
export const generic = (error: GatewayError.GatewayError, requestId: string): GatewayResponse =>
  genericBody(problemOf(error, requestId, "generic"))

/** OpenAI's error response. */
export const openai = (error: GatewayError.GatewayError, requestId: string): GatewayResponse =>
  openaiBody(problemOf(error, requestId, "openai"))

/** The error response of a family. */
export const of = (family: Family): (error: GatewayError.GatewayError, requestId: string) => GatewayResponse => {
  switch (family) {
    case "messages":
      return messages
    case "generic":
      return generic
    case "openai":
      return openai
  }
}

/**
 * The 500 a binding answers when a defect escaped the handler (a bug): the family's body for an `InternalError`, with
 * `requestId` in its `request-id` header (and the messages body's `request_id`), and nothing of the defect.
 */
export const internalError = (family: Family, requestId: string): GatewayResponse =>
  of(family)(new GatewayError.InternalError({ message: "Internal error" }), requestId)

/** A 405 for a known path asked with a method it does not serve, with `Allow` listing those it does. */
export const methodNotAllowed = (
  family: Family,
  method: string,
  path: string,
  allow: string,
  requestId: string
): GatewayResponse =>
  render(family, {
    status: 405,
    type: "invalid_request_error",
    message: `Method ${method} is not allowed on ${path}; allowed: ${allow}`,
    param: undefined,
    openaiCode: undefined,
    serviceMetadata: undefined,
    metadata: undefined,
    headers: Object.assign(idHeaders(family, requestId), { allow })
  }, requestId)
