/** The example: the gateway started from code over an OpenAI-compatible upstream, called with the Anthropic SDK. */
import Anthropic from "@anthropic-ai/sdk"
import { Gateway } from "@model-gateway/server"
import { afterAll, beforeAll, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeOpenAi } from "../../../packages/provider-adapters/test/fakes/index.js"
import { exampleConfig } from "../src/main.js"

let upstream: FakeUpstream
let running: Gateway.RunningServer

beforeAll(async () => {
  upstream = await startFakeOpenAi()
  running = await Gateway.startServer(
    exampleConfig({ UPSTREAM_URL: upstream.url, GATEWAY_API_KEY: "mg-example", UPSTREAM_API_KEY: "sk-local" }),
    {
      port: 0,
      requestLog: false
    }
  )
})
afterAll(async () => {
  await running.close(500)
  await upstream.close()
})

it("answers through the configured upstream, with the upstream's model id", async () => {
  upstream.setReply(() => ({ text: "hello from llama" }))
  const client = new Anthropic({ baseURL: running.url, apiKey: "mg-example" })
  const message = await client.messages.create({
    model: "local/llama",
    max_tokens: 16,
    messages: [{ role: "user", content: "hi" }]
  })
  expect(message.content).toEqual([{ type: "text", text: "hello from llama", citations: [] }])
  expect(message.model).toBe("local/llama")
  expect(upstream.requests[0].body.model).toBe("llama3.2")
})
