/**
 * The route table through the real server over HTTP: unknown paths, wrong methods, health, a trailing slash, and the
 * usage records of requests the dispatcher refuses.
 */
import Anthropic from "@anthropic-ai/sdk"
import { UsageLog } from "@model-gateway/core"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Harness } from "./harness.js"
import { json, KEY, startHarness, TEAM_KEY } from "./harness.js"

let h: Harness
beforeAll(async () => {
  h = await startHarness()
})
afterAll(() => h.close())

const auth = { authorization: `Bearer ${KEY}` }

/** Every usage record stored so far, newest first. */
const usage = () =>
  h.gateway.gateway.runtime.runPromise(
    Effect.flatMap(UsageLog.UsageLog, (log) => Effect.zipRight(log.flush, log.list({ limit: 500 })))
  )

const recordOf = async (response: Response) => {
  const id = response.headers.get("request-id")
  expect(id).toMatch(/^req_/)
  return (await usage()).find((r) => r.requestId === id)
}

describe("routes over HTTP", () => {
  it("answers an unknown path 404 in the family the path belongs to", async () => {
    const messages = await fetch(`${h.url}/v1/messages/nothing`, { method: "POST", headers: auth })
    expect(messages.status).toBe(404)
    expect(await json(messages)).toMatchObject({
      type: "error",
      error: { type: "not_found_error", message: "No route for POST /v1/messages/nothing" }
    })
    const generic = await fetch(`${h.url}/v2/whatever?x=1`, { headers: auth })
    expect(generic.status).toBe(404)
    expect(generic.headers.get("content-type")).toBe("application/json")
    expect(await json(generic)).toEqual({
      error: {
        code: 404,
        message: "No route for GET /v2/whatever",
        metadata: { reason: "not_found", retryable: false }
      }
    })
    expect(h.anthropic.requests).toHaveLength(0)
  })

  it("answers a known path with a wrong method 405 with Allow, in its family, and the SDK sees an API error", async () => {
    for (const method of ["GET", "PUT", "DELETE", "OPTIONS"]) {
      const response = await fetch(`${h.url}/v1/messages`, { method, headers: auth })
      expect(response.status).toBe(405)
      expect(response.headers.get("allow")).toBe("POST")
      const body = await json(response)
      expect(body).toMatchObject({ type: "error", error: { type: "invalid_request_error" } })
      expect(body.request_id).toBe(response.headers.get("request-id"))
    }
    const health = await fetch(`${h.url}/health`, { method: "POST" })
    expect(health.status).toBe(405)
    expect(health.headers.get("allow")).toBe("GET, HEAD")
    expect((await json(health)).error.code).toBe(405)
    const client = new Anthropic({ baseURL: h.url, apiKey: KEY, maxRetries: 0 })
    const error = await client.get("/v1/messages").catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.APIError)
    expect((error as InstanceType<typeof Anthropic.APIError>).status).toBe(405)
  })

  it("serves /health and /v1/health without a key, and POST /v1/messages/ with a trailing slash", async () => {
    for (const path of ["/health", "/v1/health", "/health/"]) {
      const response = await fetch(`${h.url}${path}`)
      expect(response.status).toBe(200)
      expect(await json(response)).toEqual({ status: "ok" })
    }
    expect((await fetch(`${h.url}/health`, { method: "HEAD" })).status).toBe(200)
    const response = await fetch(`${h.url}/v1/messages/?beta=true`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ model: "anthro/claude", max_tokens: 5, messages: [{ role: "user", content: "x" }] })
    })
    expect(response.status).toBe(200)
    expect((await json(response)).content[0].text).toBe("Echo: x")
  })

  it("records the requests it refuses, with no key or a key, and not the ones the use case answered", async () => {
    const unknown = await fetch(`${h.url}/v1/nowhere`, { headers: { "x-openrouter-title": "Scanner" } })
    expect(await recordOf(unknown)).toMatchObject({
      route: "GET /v1/nowhere",
      status: 404,
      errorType: "not_found_error",
      keyId: null,
      workspace: null,
      model: null,
      attempts: 0,
      cost: "0",
      stream: false,
      appTitle: "Scanner"
    })
    const wrongMethod = await fetch(`${h.url}/v1/messages`, { method: "GET", headers: auth })
    expect(await recordOf(wrongMethod)).toMatchObject({ route: "GET /v1/messages", status: 405, keyId: null })
    const missingKey = await fetch(`${h.url}/v1/messages`, { method: "POST", body: "{}" })
    expect(await recordOf(missingKey)).toMatchObject({
      route: "POST /v1/messages",
      status: 401,
      errorType: "authentication_error",
      keyId: null
    })
    const malformed = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${TEAM_KEY}`, "content-type": "application/json" },
      body: "{\"model\": "
    })
    expect(malformed.status).toBe(400)
    expect(await recordOf(malformed)).toMatchObject({
      route: "POST /v1/messages",
      status: 400,
      errorType: "invalid_request_error",
      workspace: "team-b"
    })
    // Answered by the use case, which records them: once each (a success, and a failure after its attempts).
    for (const [model, status] of [["anthro/claude", 200], ["dead/model", 503]] as const) {
      const answered = await fetch(`${h.url}/v1/messages`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ model, max_tokens: 5, messages: [{ role: "user", content: "x" }] })
      })
      expect(answered.status).toBe(status)
      const id = answered.headers.get("request-id")
      const records = (await usage()).filter((r) => r.requestId === id)
      expect(records).toHaveLength(1)
      expect(records[0]).toMatchObject({ route: "POST /v1/messages", status, model })
      expect(records[0].attempts).toBeGreaterThan(0)
    }
  })
})
