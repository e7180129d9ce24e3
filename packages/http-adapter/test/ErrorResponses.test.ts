import { assert, describe, it } from "@effect/vitest"
import { GatewayError } from "@model-gateway/core"
import * as ErrorResponses from "../src/ErrorResponses.js"
import type { GatewayResponse } from "../src/HttpTypes.js"

// The three families' bodies for the same errors: one status table (core's `GatewayError.describe`), three shapes.

const json = (response: GatewayResponse) => response.body._tag === "Text" ? JSON.parse(response.body.text) : undefined

describe("ErrorResponses", () => {
  it("gives a field error a 400 in each family, naming the parameter where the body has room for it", () => {
    const error = new GatewayError.InvalidRequest({ message: "temperature: must be at most 2", param: "temperature" })
    for (const family of ["messages", "generic", "openai"] as const) {
      const response = ErrorResponses.of(family)(error, "req_1")
      assert.strictEqual(response.status, 400)
      assert.strictEqual(response.headers["request-id"], "req_1")
      assert.strictEqual(response.headers["content-type"], "application/json")
    }
    assert.deepStrictEqual(json(ErrorResponses.messages(error, "req_1")), {
      type: "error",
      error: { type: "invalid_request_error", message: "temperature: must be at most 2" },
      request_id: "req_1"
    })
    assert.deepStrictEqual(json(ErrorResponses.generic(error, "req_1")), {
      error: { code: 400, message: "temperature: must be at most 2" }
    })
    assert.deepStrictEqual(json(ErrorResponses.openai(error, "req_1")), {
      error: {
        code: 400,
        message: "temperature: must be at most 2",
        type: "invalid_request_error",
        param: "temperature"
      }
    })
  })

  it("uses the status as code, OpenAI's types, and OpenAI's string code in metadata, with Retry-After", () => {
    const overloaded = ErrorResponses.openai(new GatewayError.Overloaded({ message: "busy" }), "req_2")
    assert.strictEqual(overloaded.status, 529)
    assert.deepStrictEqual(json(overloaded).error, { code: 529, message: "busy", type: "server_error", param: null })
    const internal = ErrorResponses.openai(new GatewayError.InternalError({ message: "bug" }), "req_2")
    assert.deepStrictEqual(json(internal).error, {
      code: 500,
      message: "bug",
      type: "server_error",
      param: null,
      metadata: { reason: "internal_error", retryable: true }
    })
    const limited = ErrorResponses.openai(new GatewayError.RateLimited({ message: "slow", retryAfterMs: 1500 }), "r")
    assert.strictEqual(limited.status, 429)
    assert.strictEqual(limited.headers["retry-after"], "2")
    assert.deepStrictEqual(json(limited).error, {
      code: 429,
      message: "slow",
      type: "rate_limit_error",
      param: null,
      metadata: { openai_code: "rate_limit_exceeded" }
    })
    const unauthenticated = ErrorResponses.openai(new GatewayError.Unauthenticated({ message: "Invalid API key" }), "r")
    assert.deepStrictEqual(json(unauthenticated).error, {
      code: 401,
      message: "Invalid API key",
      type: "authentication_error",
      param: null,
      metadata: { openai_code: "invalid_api_key" }
    })
    const rejected = new GatewayError.UpstreamRejected({ message: "no", status: 422, errorType: "weird_error" })
    assert.strictEqual(json(ErrorResponses.openai(rejected, "r")).error.type, "invalid_request_error")
  })

  it("keeps the messages body's service_metadata and the generic body's reasons", () => {
    const pipeline = [{ type: "guardrail", name: "moderation", summary: "blocked" }]
    const blocked = ErrorResponses.messages(new GatewayError.PermissionDenied({ message: "blocked", pipeline }), "r")
    assert.deepStrictEqual(json(blocked).service_metadata, { pipeline })
    const internal = ErrorResponses.generic(new GatewayError.InternalError({ message: "bug" }), "r")
    assert.deepStrictEqual(json(internal).error.metadata, { reason: "internal_error", retryable: true })
    const tooLarge = ErrorResponses.generic(new GatewayError.PayloadTooLarge({ message: "big" }), "r")
    assert.strictEqual(tooLarge.status, 413)
    assert.strictEqual(tooLarge.headers.connection, "close")
  })

  it("tells the limits in the headers of a 400 that can never fit them, and of a 402, in each family's names", () => {
    const quota = {
      outputTokens: { limit: 1000, remaining: 900, resetsAt: Date.now() + 30_000 },
      budget: { limit: 5_000_000, remaining: 4_000_000, resetsAt: Date.UTC(2030, 0, 1) }
    }
    const never = new GatewayError.InvalidRequest({ message: "max_tokens (1001) ...", param: "max_tokens", quota })
    const messages = ErrorResponses.messages(never, "r").headers
    assert.strictEqual(messages["anthropic-ratelimit-output-tokens-limit"], "1000")
    assert.strictEqual(messages["anthropic-ratelimit-output-tokens-remaining"], "900")
    assert.strictEqual(messages["x-service-budget-remaining"], "0.004")
    const openai = ErrorResponses.openai(never, "r").headers
    assert.strictEqual(openai["x-ratelimit-remaining-output-tokens"], "900")
    assert.match(openai["x-ratelimit-reset-output-tokens"], /^\d+s$/)
    assert.isUndefined(openai["retry-after"])
    const dear = ErrorResponses.generic(new GatewayError.BudgetExceeded({ message: "dear", quota }), "r")
    assert.strictEqual(dear.status, 402)
    assert.strictEqual(dear.headers["x-service-budget-limit"], "0.005")
    // A field error is not about the limits: no headers.
    const plain = ErrorResponses.messages(new GatewayError.InvalidRequest({ message: "bad" }), "r").headers
    assert.deepStrictEqual(Object.keys(plain).sort(), ["content-type", "request-id"])
  })

  it("answers a defect 500 in each family's body, with the request id", () => {
    assert.deepStrictEqual(json(ErrorResponses.internalError("messages", "req_9")), {
      type: "error",
      error: { type: "api_error", message: "Internal error" },
      request_id: "req_9"
    })
    assert.deepStrictEqual(json(ErrorResponses.internalError("openai", "req_9")).error, {
      code: 500,
      message: "Internal error",
      type: "server_error",
      param: null,
      metadata: { reason: "internal_error", retryable: true }
    })
    const generic = ErrorResponses.internalError("generic", "req_9")
    assert.strictEqual(generic.headers["request-id"], "req_9")
    assert.deepStrictEqual(json(generic).error, {
      code: 500,
      message: "Internal error",
      metadata: { reason: "internal_error", retryable: true }
    })
  })

  it("answers a wrong method 405 with Allow in each family", () => {
    const messages = ErrorResponses.methodNotAllowed("messages", "GET", "/v1/messages", "POST", "r")
    assert.strictEqual(messages.status, 405)
    assert.strictEqual(messages.headers.allow, "POST")
    assert.deepStrictEqual(json(messages), {
      type: "error",
      error: { type: "invalid_request_error", message: "Method GET is not allowed on /v1/messages; allowed: POST" },
      request_id: "r"
    })
    assert.deepStrictEqual(
      json(ErrorResponses.methodNotAllowed("generic", "PUT", "/v1/batches/b", "GET, DELETE", "r")),
      {
        error: { code: 405, message: "Method PUT is not allowed on /v1/batches/b; allowed: GET, DELETE" }
      }
    )
    assert.deepStrictEqual(json(ErrorResponses.methodNotAllowed("openai", "GET", "/v1/embeddings", "POST", "r")), {
      error: {
        code: 405,
        message: "Method GET is not allowed on /v1/embeddings; allowed: POST",
        type: "invalid_request_error",
        param: null
      }
    })
  })
})
