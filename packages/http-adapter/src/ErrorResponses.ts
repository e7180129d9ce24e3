/**
 * Error bodies: the messages-style body of spec 7.1 for `/v1/messages`, the generic
 * `{error:{code,message,metadata}}` body of spec 7.2 elsewhere. Statuses come from the one table in
 * core (`GatewayError.describe`).
 */
import { GatewayError } from "@model-gateway/core"
import type { GatewayResponse } from "./GatewayHttp.js"

const JSON_TYPE = "application/json"

const extraHeaders = (error: GatewayError.GatewayError, requestId: string): Record<string, string> => {
  const headers: Record<string, string> = { "content-type": JSON_TYPE, "request-id": requestId }
  if (error._tag === "RateLimited" && error.retryAfterMs !== undefined) {
    headers["retry-after"] = String(Math.max(1, Math.ceil(error.retryAfterMs / 1000)))
  }
  if (error._tag === "PayloadTooLarge") headers.connection = "close"
  return headers
}

/** The messages-style error response. */
export const messages = (error: GatewayError.GatewayError, requestId: string): GatewayResponse => {
  const { status, type } = GatewayError.describe(error)
  return {
    status,
    headers: extraHeaders(error, requestId),
    body: {
      _tag: "Text",
      text: JSON.stringify({
        type: "error",
        error: { type, message: error.message },
        request_id: requestId,
        ...(error._tag === "PermissionDenied" && error.pipeline !== undefined
          ? { service_metadata: { pipeline: error.pipeline } }
          : {})
      })
    }
  }
}

const REASONS: Partial<Record<number, { reason: string; retryable: boolean }>> = {
  404: { reason: "not_found", retryable: false },
  500: { reason: "internal_error", retryable: true }
}

/** The generic error response of spec 7.2. */
export const generic = (error: GatewayError.GatewayError, requestId: string): GatewayResponse => {
  const { status } = GatewayError.describe(error)
  const metadata = REASONS[status]
  return {
    status,
    headers: extraHeaders(error, requestId),
    body: {
      _tag: "Text",
      text: JSON.stringify({ error: { code: status, message: error.message, ...(metadata ? { metadata } : {}) } })
    }
  }
}

export const methodNotAllowed = (allow: string, requestId: string): GatewayResponse => ({
  status: 405,
  headers: { "content-type": JSON_TYPE, allow, "request-id": requestId },
  body: { _tag: "Text", text: JSON.stringify({ error: { code: 405, message: `Method not allowed; use ${allow}` } }) }
})
