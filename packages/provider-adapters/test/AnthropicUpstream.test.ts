/**
 * The Anthropic adapter's stream events, against a real `node:http` server on 127.0.0.1 writing Anthropic's SSE
 * frames: a caller that passes events on (`passThrough`) gets the content events unparsed, sent as the upstream's
 * bytes, and the events it reads (`message_start`, `message_delta`, `error`) parsed; any other caller gets every event
 * parsed. A malformed event is refused either way.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import { type Catalogue, type Upstream, Wire } from "@model-gateway/core"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import * as AnthropicUpstream from "../src/anthropic/AnthropicUpstream.js"

const servers: Array<Server> = []

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

// Escapes and spacing that serialising the parsed event again would change.
const delta =
  "{\"type\":\"content_block_delta\", \"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"caf\\u00e9\"}}"
const start = "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\"," +
  "\"model\":\"claude-up\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}"
const blockStart = "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}"
const messageDelta =
  "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}"

const frame = (type: string, data: string) => `event: ${type}\ndata: ${data}\n\n`

const stream = [
  frame("message_start", start),
  frame("content_block_start", blockStart),
  frame("ping", "{\"type\": \"ping\"}"),
  frame("content_block_delta", delta),
  frame("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}"),
  frame("message_delta", messageDelta),
  frame("message_stop", "{\"type\":\"message_stop\"}")
]

/** A server answering every request with these SSE frames, one write each. */
const serve = (frames: ReadonlyArray<string>) =>
  Effect.promise(async () => {
    const server = createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/event-stream" })
        for (const f of frames) res.write(f)
        res.end()
      })
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })

const endpoint = { id: "m@up", modelId: "m", provider: "up", upstreamModel: "claude-up" } as Catalogue.Endpoint

/** Every event of one streamed call, or the failure. */
const events = (frames: ReadonlyArray<string>, passThrough: boolean | undefined) =>
  Effect.gen(function*() {
    const baseUrl = yield* serve(frames)
    const upstream = yield* AnthropicUpstream.make({ baseUrl, apiKey: "k" })
    const call: Upstream.MessagesCall = {
      endpoint,
      body: { model: "claude-up", max_tokens: 5 },
      headers: {},
      passThrough
    }
    const pull = yield* upstream.streamMessage(call)
    const out: Array<Wire.StreamEvent> = []
    while (true) {
      const chunk = yield* pull
      if (chunk === undefined) return out
      out.push(...Chunk.toReadonlyArray(chunk))
    }
  }).pipe(Effect.scoped)

describe("AnthropicUpstream.streamMessage", () => {
  it.effect("passing through: content events unparsed and sent as they came; the events read, parsed", () =>
    Effect.gen(function*() {
      const got = yield* events(stream, true)
      expect(got.map((e) => e.type)).toEqual([
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop"
      ])
      // unparsed: no field but the type
      for (const i of [1, 2, 3, 4, 6]) expect(Object.keys(got[i])).toEqual(["type"])
      expect(got.map(Wire.sseFrame)).toEqual(stream)
      // parsed: what the gateway rewrites
      expect((got[0].message as Wire.JsonObject).usage).toEqual({ input_tokens: 3, output_tokens: 1 })
      expect(got[5].usage).toEqual({ output_tokens: 2 })
    }))

  it.effect("otherwise every event parsed (what a translating caller reads), still sent as it came", () =>
    Effect.gen(function*() {
      const got = yield* events(stream, undefined)
      expect(got[3].delta).toEqual({ type: "text_delta", text: "café" })
      expect(got[1].content_block).toEqual({ type: "text", text: "" })
      expect(got.map(Wire.sseFrame)).toEqual(stream)
    }))

  it.effect("a malformed event fails the stream, passing through or not; an error event fails it with its error", () =>
    Effect.gen(function*() {
      const malformed = [stream[0], frame("content_block_delta", "{\"type\":\"content_block_delta\",\"delta\":{oops")]
      for (const passThrough of [true, false]) {
        const exit = yield* Effect.exit(events(malformed, passThrough))
        expect(Exit.isFailure(exit) && String(exit.cause)).toContain("malformed stream event")
      }
      const overloaded = "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"
      const exit = yield* Effect.exit(events([stream[0], frame("error", overloaded)], true))
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("Overloaded")
    }))

  it.effect("a stream that ends without message_stop fails, passing through", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(events(stream.slice(0, 5), true))
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("ended before message_stop")
    }))
})
