/** The gateway mounted inside a host server, and its fetch and @effect/platform HttpApp bindings. */
import Anthropic from "@anthropic-ai/sdk"
import { HttpApp } from "@effect/platform"
import { Config } from "@model-gateway/server"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeAnthropic } from "../../../packages/provider-adapters/test/fakes/index.js"
import { makeApp } from "../src/main.js"

let upstream: FakeUpstream
let server: Server
let base: string
let app: Awaited<ReturnType<typeof makeApp>>

const KEY = "mg-embed-key"
const body = (stream = false) =>
  JSON.stringify({ model: "anthro/claude", max_tokens: 10, stream, messages: [{ role: "user", content: "hi there" }] })
const headers = { "content-type": "application/json", authorization: `Bearer ${KEY}` }

beforeAll(async () => {
  upstream = await startFakeAnthropic()
  const { config } = Config.decode({
    storage: "memory:",
    providers: { anthro: { kind: "anthropic", baseUrl: upstream.url, apiKey: "sk-up" } },
    models: {
      "anthro/claude": {
        endpoints: [{
          provider: "anthro",
          upstreamModel: "claude-x",
          pricing: { prompt: "0.000001", completion: "0.000002" }
        }]
      }
    },
    keys: [{ key: KEY, management: true }]
  })
  app = await makeApp(config, "/gateway")
  server = createServer(app.listener)
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})

afterAll(async () => {
  await new Promise((r) => server.close(r))
  await app.gateway.dispose()
  await upstream.close()
})

describe("embedded under /gateway in a host server", () => {
  it("serves the host's own routes", async () => {
    const response = await fetch(`${base}/hello`)
    expect(await response.json()).toEqual({ hello: "from the host application" })
    expect((await fetch(`${base}/v1/messages`, { method: "POST", headers, body: body() })).status).toBe(404)
  })

  it("serves the gateway to the Anthropic SDK under the prefix, JSON and streamed", async () => {
    const client = new Anthropic({ baseURL: `${base}/gateway`, apiKey: KEY, maxRetries: 0 })
    const message = await client.messages.create({
      model: "anthro/claude",
      max_tokens: 10,
      messages: [{ role: "user", content: "hi there" }]
    })
    expect(message.content[0]).toMatchObject({ type: "text", text: "Echo: hi there" })
    const streamed = await client.messages.stream({
      model: "anthro/claude",
      max_tokens: 10,
      messages: [{ role: "user", content: "hi there" }]
    }).finalMessage()
    expect(streamed.content[0]).toMatchObject({ type: "text", text: "Echo: hi there" })
  })
})

describe("bindings", () => {
  it("fetch handler: JSON, stream and errors", async () => {
    const ok = await app.gateway.fetch(
      new Request("http://x/gateway/v1/messages", { method: "POST", headers, body: body() })
    )
    expect(ok.status).toBe(200)
    expect(((await ok.json()) as any).content[0].text).toBe("Echo: hi there")
    const streamed = await app.gateway.fetch(
      new Request("http://x/gateway/v1/messages", { method: "POST", headers, body: body(true) })
    )
    expect(streamed.headers.get("content-type")).toContain("text/event-stream")
    const text = await streamed.text()
    expect(text).toContain("event: message_start")
    expect(text.trim().endsWith("data: {\"type\":\"message_stop\"}")).toBe(true)
    const unauthorized = await app.gateway.fetch(
      new Request("http://x/gateway/v1/messages", { method: "POST", body: body() })
    )
    expect(unauthorized.status).toBe(401)
  })

  it("@effect/platform HttpApp", async () => {
    const runtime = await app.gateway.runtime.runtime()
    const handler = HttpApp.toWebHandlerRuntime(runtime)(app.gateway.httpApp)
    const ok = await handler(new Request("http://x/gateway/v1/messages", { method: "POST", headers, body: body() }))
    expect(ok.status).toBe(200)
    expect(((await ok.json()) as any).model).toBe("anthro/claude")
    const streamed = await handler(
      new Request("http://x/gateway/v1/messages", { method: "POST", headers, body: body(true) })
    )
    expect(await streamed.text()).toContain("event: content_block_delta")
  })
})
