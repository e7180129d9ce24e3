/**
 * The statuses of failed speech requests (spec 4.2 and 7.2): what a client sees when the last upstream attempt failed
 * and nothing else was left to try. They differ from the messages route's where the generic error table has its own
 * codes: 524 for a time-out, 502 for a provider that answered with an error.
 */
import * as GatewayError from "../errors/GatewayError.js"
import * as Upstream from "../upstream/Upstream.js"
import type { UpstreamError } from "../upstream/Upstream.js"

/** The domain error of a speech request whose last attempt failed with `error`. */
export const toGatewayError = (error: UpstreamError): GatewayError.GatewayError => {
  const message = error.message
  switch (error.kind) {
    case "rate_limited":
      return new GatewayError.RateLimited({ message, retryAfterMs: error.retryAfterMs })
    case "overloaded":
      return new GatewayError.Overloaded({ message })
    case "timeout":
      return new GatewayError.UpstreamRejected({ message, status: 524, errorType: "timeout_error" })
    case "invalid_request":
    case "context_length":
    case "content_filter":
      return new GatewayError.UpstreamRejected({
        message,
        status: error.status === 413 || error.status === 402 ? error.status : 400,
        errorType: error.status === 402 ? "billing_error" : "invalid_request_error"
      })
    case "unsupported":
      return new GatewayError.InvalidRequest({ message })
    case "refused":
      return new GatewayError.PermissionDenied({ message })
    case "auth":
    case "not_found":
      return Upstream.toGatewayError(error)
    case "server_error":
      // A provider's own 5xx may pass later: the SDKs may retry it. A provider that answered 200 with something that
      // is not the audio asked for (another format) would answer it again: a 502 they are told not to retry.
      return error.status !== undefined && error.status >= 500
        ? new GatewayError.ProviderFailed({ message })
        : new GatewayError.UpstreamRejected({ message, status: 502, errorType: "api_error" })
    case "transport":
      return new GatewayError.Unavailable({ message })
  }
}
