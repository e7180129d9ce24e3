/**
 * Domain errors that cross the HTTP boundary. `describe` is the one table of their statuses and
 * messages-protocol error types; the http adapter shapes each route family's error body from it.
 */
import * as Schema from "effect/Schema"

const fields = {
  message: Schema.String
}

const Remaining = Schema.Struct({ limit: Schema.Number, remaining: Schema.Number, resetsAt: Schema.Number })

/**
 * What is left of the gateway's own limits of a key or workspace (see `limits/Quotas`), told in response headers: per
 * limit, its size, what remains and when it is whole again (epoch ms); the budget in nano-USD.
 */
export const QuotaStatus = Schema.Struct({
  requests: Schema.optional(Remaining),
  inputTokens: Schema.optional(Remaining),
  outputTokens: Schema.optional(Remaining),
  budget: Schema.optional(Remaining)
})

/** 400: the request is malformed or breaks a rule of the interface. `param` names the offending field path. */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  ...fields,
  param: Schema.optional(Schema.String),
  /** The gateway's limits, when the request can never fit one of them (see `limits/Quotas`). */
  quota: Schema.optional(QuotaStatus)
}) {}

/** 401: missing or unknown credentials. */
export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()("Unauthenticated", fields) {}

/** A step of the routing/guardrail pipeline reported in `service_metadata`. */
export const PipelineStep = Schema.Struct({ type: Schema.String, name: Schema.String, summary: Schema.String })

/** 403: the principal may not do this (management-only operation, a guardrail block). */
export class PermissionDenied extends Schema.TaggedError<PermissionDenied>()("PermissionDenied", {
  ...fields,
  /** The pipeline that blocked the request (e.g. the guardrail step), reported as `service_metadata`. */
  pipeline: Schema.optional(Schema.Array(PipelineStep)),
  /** Why, for the generic body's `metadata.reason` (never retryable). */
  reason: Schema.optional(Schema.String)
}) {}

/** 404: unknown model or resource. */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {}

/** 413: the request body is larger than the configured limit. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields) {}

/** 429: rate limited (by the gateway or by every upstream that was tried). */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  ...fields,
  retryAfterMs: Schema.optional(Schema.Number),
  /** Which limit, for the generic body's `metadata.reason` (always retryable). */
  reason: Schema.optional(Schema.String),
  /** The gateway's limits, when one of them refused. */
  quota: Schema.optional(QuotaStatus)
}) {}

/** 402: the key's or the workspace's spending budget cannot pay for the request (`billing_error`). */
export class BudgetExceeded extends Schema.TaggedError<BudgetExceeded>()("BudgetExceeded", {
  ...fields,
  quota: Schema.optional(QuotaStatus)
}) {}

/** 529: the provider that answered last was overloaded. */
export class Overloaded extends Schema.TaggedError<Overloaded>()("Overloaded", {
  ...fields,
  /** The wait the overloaded provider asked for (its `Retry-After`), passed on to the client. */
  retryAfterMs: Schema.optional(Schema.Number)
}) {}

/** 503: no endpoint could serve the request. */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", fields) {}

/** 504 / timeout_error: the upstream did not answer in time. */
export class UpstreamTimeout extends Schema.TaggedError<UpstreamTimeout>()("UpstreamTimeout", fields) {}

/** An upstream answered with an error that is passed on with its own status (e.g. a 400 it rejected). */
export class UpstreamRejected extends Schema.TaggedError<UpstreamRejected>()("UpstreamRejected", {
  ...fields,
  status: Schema.Number,
  errorType: Schema.optional(Schema.String)
}) {}

/**
 * 502: the provider answered with an error of its own (a 5xx other than 503 and 529, which are `Overloaded`), on the
 * routes whose error table has 502 "provider returned an error" for it (spec 7.2: the OpenAI-compatible routes). It may
 * pass later, so the SDKs are left to retry it: unlike `UpstreamRejected`'s 502 of a provider configuration that is
 * wrong. `/v1/messages` tells the same failure as a 500 `api_error` (spec 7.1 has no 502).
 */
export class ProviderFailed extends Schema.TaggedError<ProviderFailed>()("ProviderFailed", fields) {}

/** 408: the operation did not finish in time (daemon access: the intern runtime did not answer within 10 seconds). */
export class RequestTimeout extends Schema.TaggedError<RequestTimeout>()("RequestTimeout", fields) {}

/**
 * 409: the resource is not in a state that allows the operation (an intern that is not running, a lifecycle move its
 * status forbids). `reason` names the condition (`intern_not_running`, `invalid_state`, ...); `retryable` says whether
 * the same request may succeed later.
 */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", {
  ...fields,
  reason: Schema.String,
  retryable: Schema.Boolean
}) {}

/** 500: a bug or an unexpected infrastructure failure. */
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", fields) {}

/** Every error a gateway use case can fail with. */
export type GatewayError =
  | InvalidRequest
  | Unauthenticated
  | PermissionDenied
  | NotFound
  | PayloadTooLarge
  | RateLimited
  | BudgetExceeded
  | Overloaded
  | Unavailable
  | UpstreamTimeout
  | UpstreamRejected
  | ProviderFailed
  | RequestTimeout
  | Conflict
  | InternalError

/** The HTTP status and messages-protocol error type of each domain error: the one table both bodies use. */
/**
 * Failures that may pass if the same request is sent again later: rate limits, overloads, unavailable or timed-out
 * upstreams, internal errors, and an upstream's own 5xx (`ProviderFailed` too), 408 or 429. Not a 502 from the gateway's provider
 * configuration (its credentials refused, a model id or URL the provider does not know): an operator's matter.
 */
export const mayPass = (error: GatewayError): boolean => {
  switch (error._tag) {
    case "RateLimited":
    case "Overloaded":
    case "Unavailable":
    case "UpstreamTimeout":
    case "RequestTimeout":
    case "InternalError":
    case "ProviderFailed":
      return true
    case "UpstreamRejected":
      return (error.status >= 500 && error.status !== 502) || error.status === 408 || error.status === 429
    default:
      return false
  }
}

export const describe = (error: GatewayError): { readonly status: number; readonly type: string } => {
  switch (error._tag) {
    case "InvalidRequest":
      return { status: 400, type: "invalid_request_error" }
    case "Unauthenticated":
      return { status: 401, type: "authentication_error" }
    case "PermissionDenied":
      return { status: 403, type: "permission_error" }
    case "NotFound":
      return { status: 404, type: "not_found_error" }
    case "PayloadTooLarge":
      return { status: 413, type: "invalid_request_error" }
    case "RateLimited":
      return { status: 429, type: "rate_limit_error" }
    case "BudgetExceeded":
      return { status: 402, type: "billing_error" }
    case "Overloaded":
      return { status: 529, type: "overloaded_error" }
    case "Unavailable":
      return { status: 503, type: "overloaded_error" }
    case "UpstreamTimeout":
      return { status: 504, type: "timeout_error" }
    case "UpstreamRejected":
      return { status: error.status, type: error.errorType ?? "invalid_request_error" }
    case "ProviderFailed":
      return { status: 502, type: "api_error" }
    case "RequestTimeout":
      return { status: 408, type: "timeout_error" }
    case "Conflict":
      return { status: 409, type: "invalid_request_error" }
    case "InternalError":
      return { status: 500, type: "api_error" }
  }
}
