/**
 * Browser clients: CORS is off by default; with allowed origins configured, a preflight from one of them answers 204
 * with the path's methods and the requested headers, and its answers (errors included) carry
 * `Access-Control-Allow-Origin`; any other origin gets no CORS header at all.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { decode } from "../src/Config.js"
import type { Harness } from "./harness.js"
import { KEY, startHarness } from "./harness.js"

const APP = "https://app.example.com"
const OTHER = "https://evil.example.net"

const preflight = (h: Harness, path: string, origin: string, method = "POST") =>
  fetch(`${h.url}${path}`, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": method,
      "access-control-request-headers": "authorization, content-type, x-stainless-os, anthropic-version"
    }
  })

/** The methods of `/v1/interns/{internId}`, in the order the routes are declared. */
const METHODS_OF_AN_INTERN = "GET, PATCH, DELETE"

const message = { model: "anthro/claude", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }

const send = (h: Harness, origin: string, key = KEY) =>
  fetch(`${h.url}/v1/messages`, {
    method: "POST",
    headers: { origin, "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify(message)
  })

const corsHeadersOf = (response: Response) => [...response.headers.keys()].filter((n) => n.startsWith("access-control"))

describe("CORS off (the default)", () => {
  let h: Harness
  beforeAll(async () => {
    h = await startHarness()
  })
  afterAll(() => h.close())

  it("a preflight is not answered as one, and answers carry no CORS header", async () => {
    const pre = await preflight(h, "/v1/messages", APP)
    expect(pre.status).toBe(405)
    expect(pre.headers.get("allow")).toBe("POST")
    expect(corsHeadersOf(pre)).toEqual([])
    await pre.text()
    const answer = await send(h, APP)
    expect(answer.status).toBe(200)
    expect(corsHeadersOf(answer)).toEqual([])
    await answer.text()
  })
})

describe("CORS with allowed origins", () => {
  let h: Harness
  beforeAll(async () => {
    h = await startHarness({ server: { cors: { allowedOrigins: [APP, "http://localhost:3000"], maxAgeSeconds: 120 } } })
  })
  afterAll(() => h.close())

  it("a preflight from an allowed origin is 204 with the path's methods and the requested headers", async () => {
    const pre = await preflight(h, "/v1/messages", APP)
    expect(pre.status).toBe(204)
    expect(pre.headers.get("access-control-allow-origin")).toBe(APP)
    expect(pre.headers.get("access-control-allow-methods")).toBe("POST")
    expect(pre.headers.get("access-control-allow-headers")).toBe(
      "authorization, content-type, x-stainless-os, anthropic-version"
    )
    expect(pre.headers.get("access-control-max-age")).toBe("120")
    expect(pre.headers.get("vary")).toContain("Origin")
    expect(await pre.text()).toBe("")
    // The methods are those of the path asked about.
    const interns = await preflight(h, "/v1/interns/abc", "http://localhost:3000", "DELETE")
    expect(interns.status).toBe(204)
    expect(interns.headers.get("access-control-allow-methods")).toBe(METHODS_OF_AN_INTERN)
  })

  it("a preflight from any other origin gets nothing: no CORS header", async () => {
    for (const origin of [OTHER, "https://app.example.com.evil.net", "null"]) {
      const pre = await preflight(h, "/v1/messages", origin)
      expect(pre.status).toBe(405)
      expect(corsHeadersOf(pre)).toEqual([])
      await pre.text()
    }
  })

  it("answers to an allowed origin carry Access-Control-Allow-Origin, errors included; others none", async () => {
    const ok = await send(h, APP)
    expect(ok.status).toBe(200)
    expect(ok.headers.get("access-control-allow-origin")).toBe(APP)
    expect(ok.headers.get("access-control-expose-headers")).toBe("*")
    expect(ok.headers.get("request-id")).toMatch(/^req_/)
    await ok.text()
    const refused = await send(h, APP, "mg-wrong-key")
    expect(refused.status).toBe(401)
    expect(refused.headers.get("access-control-allow-origin")).toBe(APP)
    expect(((await refused.json()) as { error: { type: string } }).error.type).toBe("authentication_error")
    const other = await send(h, OTHER)
    expect(other.status).toBe(200)
    expect(corsHeadersOf(other)).toEqual([])
    await other.text()
    // Without an Origin (servers, SDKs outside a browser) nothing changes.
    const plain = await fetch(`${h.url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } })
    expect(plain.status).toBe(200)
    expect(corsHeadersOf(plain)).toEqual([])
    await plain.text()
  })

  it("a preflight's requested headers are echoed only when they are a header list", async () => {
    const pre = await fetch(`${h.url}/v1/messages`, {
      method: "OPTIONS",
      headers: { origin: APP, "access-control-request-method": "POST", "access-control-request-headers": "x-a; x-b" }
    })
    expect(pre.status).toBe(204)
    expect(pre.headers.get("access-control-allow-headers")).toBeNull()
  })
})

describe("CORS configuration", () => {
  it("refuses an origin with a path and accepts * and exact origins", () => {
    expect(() => decode({ server: { cors: { allowedOrigins: ["https://app.example.com/ui"] } } })).toThrow(
      /must be an origin/
    )
    expect(decode({ server: { cors: { allowedOrigins: ["*", APP] } } }).config.server.cors?.allowedOrigins).toEqual([
      "*",
      APP
    ])
    expect(decode({}).config.server.cors).toBeUndefined()
  })
})
