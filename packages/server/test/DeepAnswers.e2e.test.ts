/**
 * Upstream answers nested thousands of levels deep (pitfall 18 on the way back): `JSON.parse` reads them, but
 * serialising them again overflowed the stack after the status was chosen, a 500 for a JSON answer and an empty 200 for
 * a stream. Such an answer is now refused where it is read, as a malformed one is: the next endpoint is tried before
 * content, an in-band error ends a stream after it. The upstream here is a plain `node:http` server writing the deep
 * texts itself (a fake that serialises its answers could not make them).
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { decode } from "../src/Config.js"
import { type RunningServer, startServer } from "../src/Gateway.js"
import { readEvents } from "./harness.js"

const KEY = "mg-deep-key"
const DEPTH = 100_000
const deepArray = "[".repeat(DEPTH) + "]".repeat(DEPTH)
const deepObject = (n: number) => "{\"a\":".repeat(n) + "1" + "}".repeat(n)

const anthropicMessage = (text: string, extra = "") =>
  `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":${
    JSON.stringify(text)
  }}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":3}${extra}}`

const anthropicFrame = (type: string, data: string) => `event: ${type}\ndata: ${data}\n\n`

const anthropicStream = (text: string, startExtra = "") => [
  anthropicFrame(
    "message_start",
    `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],` +
      `"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}${startExtra}}}`
  ),
  anthropicFrame(
    "content_block_start",
    `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
  ),
  anthropicFrame(
    "content_block_delta",
    `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":${JSON.stringify(text)}}}`
  ),
  anthropicFrame("content_block_stop", `{"type":"content_block_stop","index":0}`),
  anthropicFrame(
    "message_delta",
    `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`
  ),
  anthropicFrame("message_stop", `{"type":"message_stop"}`)
]

const chunk = (delta: string, extra = "", finish = "null") =>
  `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":${delta},` +
  `"finish_reason":${finish}}]${extra}}\n\n`

const chatAnswer = (message: string, extra = "") =>
  `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":${message},` +
  `"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}${extra}}`

/** What the upstream answers for each upstream model: a JSON text, or a stream's frames. */
const answers: Record<string, { readonly json: string; readonly stream: ReadonlyArray<string> }> = {
  // Anthropic protocol
  "good": { json: anthropicMessage("from the backup"), stream: anthropicStream("from the backup") },
  "deep-extra": { json: anthropicMessage("hi", `,"extra":${deepArray}`), stream: anthropicStream("hi") },
  "deep-tool": {
    json: anthropicMessage("hi").replace(
      "\"content\":[",
      `"content":[{"type":"tool_use","id":"toolu_1","name":"t","input":${deepObject(10_000)}},`
    ),
    stream: anthropicStream("hi")
  },
  "deep-start": { json: anthropicMessage("hi"), stream: anthropicStream("hi", `,"extra":${deepArray}`) },
  // OpenAI chat completions protocol
  "chat-deep-extra": {
    json: chatAnswer(`{"role":"assistant","content":"hi"}`, `,"extra":${deepArray}`),
    stream: [
      chunk(`{"role":"assistant","content":"first words"}`),
      chunk(`{"content":" more"}`, `,"extra":${deepArray}`),
      chunk(`{}`, "", "\"stop\""),
      "data: [DONE]\n\n"
    ]
  },
  "chat-deep-arguments": {
    json: chatAnswer(
      `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"t",` +
        `"arguments":${JSON.stringify(deepObject(10_000))}}}]}`
    ),
    stream: []
  }
}

let upstream: Http.Server
let gateway: RunningServer
let base: string

beforeAll(async () => {
  upstream = Http.createServer((req, res) => {
    let text = ""
    req.setEncoding("utf8")
    req.on("data", (c: string) => (text += c))
    req.on("end", () => {
      const body = JSON.parse(text) as { model: string; stream?: boolean }
      const answer = answers[body.model]!
      if (body.stream === true) {
        res.writeHead(200, { "content-type": "text/event-stream" })
        for (const frame of answer.stream) res.write(frame)
        res.end()
      } else {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(answer.json)
      }
    })
  })
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve))
  const port = (upstream.address() as AddressInfo).port
  const endpoint = (provider: string, upstreamModel: string) => ({
    endpoints: [{ provider, upstreamModel, pricing: { prompt: "0.000001", completion: "0.000002" } }]
  })
  const { config } = decode({
    storage: "memory:",
    providers: {
      anthro: { kind: "anthropic", baseUrl: `http://127.0.0.1:${port}`, apiKey: "sk-a" },
      acme: { kind: "openai", baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: "sk-o" }
    },
    models: {
      "a/good": endpoint("anthro", "good"),
      "a/deep-extra": endpoint("anthro", "deep-extra"),
      "a/deep-tool": endpoint("anthro", "deep-tool"),
      "a/deep-start": endpoint("anthro", "deep-start"),
      "o/deep-extra": endpoint("acme", "chat-deep-extra"),
      "o/deep-arguments": endpoint("acme", "chat-deep-arguments")
    },
    keys: [{ key: KEY, management: true }]
  })
  gateway = await startServer(config, { host: "127.0.0.1", port: 0, requestLog: false })
  base = gateway.url
})
afterAll(async () => {
  await gateway.close()
  await new Promise<void>((resolve) => upstream.close(() => resolve()))
})

const call = (path: string, body: Record<string, unknown>) =>
  fetch(`${base}/v1${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
    body: JSON.stringify(body)
  })

const messages = [{ role: "user", content: "hi" }]

describe("an upstream answer nested too deep", () => {
  it("is refused like a malformed answer (503, the messages error body), or the fallback answers", async () => {
    for (const model of ["a/deep-extra", "a/deep-tool"]) {
      const refused = await call("/messages", { model, max_tokens: 10, messages })
      expect(refused.status).toBe(503)
      const error = await refused.json() as any
      expect(error.type).toBe("error")
      expect(error.error.type).toBe("overloaded_error")
      expect(error.error.message).toContain("nested deeper than 256 levels")
      expect(error.request_id).toMatch(/^req_/)

      const fellBack = await call("/messages", { model, max_tokens: 10, messages, fallbacks: [{ model: "a/good" }] })
      expect(fellBack.status).toBe(200)
      const answer = await fellBack.json() as any
      expect(answer.model).toBe("a/good")
      expect(answer.content[0].text).toBe("from the backup")
    }
  })

  it("in a stream's first event, falls back before anything was sent", async () => {
    const response = await call("/messages", {
      model: "a/deep-start",
      max_tokens: 10,
      stream: true,
      messages,
      fallbacks: [{ model: "a/good" }]
    })
    expect(response.status).toBe(200)
    const events = await readEvents(response)
    expect(events.filter((e) => e.event === "message_start")).toHaveLength(1)
    expect(events[0]!.data.message.model).toBe("a/good")
    expect(events.find((e) => e.event === "content_block_delta")!.data.delta.text).toBe("from the backup")
    expect(events.at(-1)!.event).toBe("message_stop")
  })

  it("in a translated stream after content, ends the stream with an in-band error, never a clean end", async () => {
    const response = await call("/messages", { model: "o/deep-extra", max_tokens: 10, stream: true, messages })
    expect(response.status).toBe(200)
    const events = await readEvents(response)
    expect(events.find((e) => e.event === "content_block_delta")!.data.delta.text).toBe("first words")
    expect(events.some((e) => e.event === "message_stop")).toBe(false)
    const last = events.at(-1)!
    expect(last.event).toBe("error")
    expect(last.data.error.message).toContain("nested deeper than 256 levels")
  })

  it("passed through on /chat/completions, is a 503 in the OpenAI error body", async () => {
    const refused = await call("/chat/completions", { model: "o/deep-extra", messages })
    expect(refused.status).toBe(503)
    const error = await refused.json() as any
    expect(error.error.message).toContain("nested deeper than 256 levels")
  })

  it("in a tool call's arguments, keeps them verbatim as `_raw` (a string: nothing recurses into it)", async () => {
    const response = await call("/messages", { model: "o/deep-arguments", max_tokens: 10, messages })
    expect(response.status).toBe(200)
    const answer = await response.json() as any
    expect(answer.content[0].type).toBe("tool_use")
    expect(answer.content[0].input._raw).toBe(deepObject(10_000))
  })
})

describe("a client's tool call arguments nested too deep", () => {
  it("are a 400 when translated for an Anthropic upstream, not a crash when the translation is serialised", async () => {
    const response = await call("/chat/completions", {
      model: "a/good",
      messages: [
        { role: "user", content: "hi" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_1", type: "function", function: { name: "t", arguments: deepObject(10_000) } }]
        },
        { role: "tool", tool_call_id: "call_1", content: "done" }
      ]
    })
    expect(response.status).toBe(400)
    const error = await response.json() as any
    expect(error.error.message).toContain("nested deeper than 128 levels")
  })
})
