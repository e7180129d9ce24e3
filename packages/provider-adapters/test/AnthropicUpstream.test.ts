/**
 * The Anthropic adapter's stream events, against a real `node:http` server on 127.0.0.1 writing Anthropic's SSE
 * frames: a caller that passes events on (`passThrough`) gets the content events unparsed, sent as the upstream's
 * bytes, and the events it reads (`message_start`, `message_delta`, `error`) parsed; any other caller gets every event
 * parsed. A malformed event is refused either way.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "@effect/vitest"
import { type Catalogue, JsonSource, PullUntil, type Upstream, Wire } from "@model-gateway/core"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import * as AnthropicUpstream from "../src/anthropic/AnthropicUpstream.js"
import { type FakeUpstream, startFakeAnthropic } from "./fakes/index.js"
import { afterKeepAlives } from "./KeepAlives.js"

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

/** What a recording server received: each request's headers and body text. */
interface Received {
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly text: string
}

const messageJson = JSON.stringify({
  id: "msg_1",
  type: "message",
  role: "assistant",
  model: "claude-up",
  content: [{ type: "text", text: "hi" }],
  stop_reason: "end_turn",
  stop_sequence: null,
  usage: { input_tokens: 3, output_tokens: 1 }
})

/** A server recording every request, answering a message, or its stream when the body asks for one. */
const recording = Effect.promise(async () => {
  const received: Array<Received> = []
  const server = createServer((req, res) => {
    const parts: Array<Buffer> = []
    req.on("data", (part: Buffer) => parts.push(part))
    req.on("end", () => {
      const text = Buffer.concat(parts).toString("utf8")
      received.push({ headers: req.headers, text })
      if ((JSON.parse(text) as { stream?: unknown }).stream === true) {
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.end(stream.join(""))
      } else {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(messageJson)
      }
    })
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received }
})

/** Sends one call, created or streamed to its end, and gives the body the server received. */
const sent = (body: Wire.JsonObject, options: { readonly stream: boolean; readonly limit?: number }) =>
  Effect.gen(function*() {
    const { baseUrl, received } = yield* recording
    const upstream = yield* AnthropicUpstream.make({ baseUrl, apiKey: "k" })
    const call: Upstream.MessagesCall = {
      endpoint: { ...endpoint, maxCompletionTokens: options.limit },
      body,
      headers: {}
    }
    if (options.stream) {
      const pull = yield* upstream.streamMessage(call)
      while ((yield* pull) !== undefined) {
        // read to the end
      }
    } else {
      yield* upstream.createMessage(call)
    }
    return received[0]!.text
  }).pipe(Effect.scoped)

/** A body parsed from `text` as the HTTP edge parses one of 4 KiB or more: its bytes recorded as its source. */
const parsedLarge = (text: string): Wire.JsonObject => {
  const bytes = new Uint8Array(Buffer.from(text))
  const body = JSON.parse(text) as Wire.JsonObject
  JsonSource.record(body, bytes)
  return body
}

describe("AnthropicUpstream: the output cap (Anthropic requires max_tokens, the spec leaves it optional)", () => {
  const small = { model: "claude-up", messages: [{ role: "user", content: "hi" }] }

  it.effect.each([false, true])(
    "sends the default 4096 when the call sets none (stream %s)",
    (stream) =>
      Effect.gen(function*() {
        const text = yield* sent(small, { stream })
        expect(JSON.parse(text)).toEqual({ ...small, max_tokens: 4096, stream })
      })
  )

  it.effect.each([false, true])(
    "sends the endpoint's own limit instead, where it is known (stream %s)",
    (stream) =>
      Effect.gen(function*() {
        expect(JSON.parse(yield* sent(small, { stream, limit: 1000 })).max_tokens).toBe(1000)
        expect(JSON.parse(yield* sent(small, { stream, limit: 64000 })).max_tokens).toBe(64000)
      })
  )

  it.effect.each([false, true])("sends the call's own cap as it is (stream %s)", (stream) =>
    Effect.gen(function*() {
      expect(JSON.parse(yield* sent({ ...small, max_tokens: 9000 }, { stream, limit: 1000 })).max_tokens).toBe(9000)
    }))

  it.effect.each([false, true])(
    "splices the default into a large body sent as the client's bytes (stream %s)",
    (stream) =>
      Effect.gen(function*() {
        const messages = `[{"role":"user","content":"${"x".repeat(JsonSource.MIN_BYTES)}"}]`
        const body = parsedLarge(`{ "model" : "claude-up",\n  "temperature": 1.0, "messages": ${messages} }`)
        const text = yield* sent(body, { stream })
        expect(text).toContain(`"model" : "claude-up"`)
        expect(text).toContain(`"temperature": 1.0`)
        expect(text).toContain(`"messages": ${messages}`)
        expect(JSON.parse(text)).toEqual({ ...body, max_tokens: 4096, stream })
      })
  )

  it.effect("gives a chat request translated for it the same cap: the endpoint's limit, or 4096", () =>
    Effect.gen(function*() {
      const { baseUrl, received } = yield* recording
      const upstream = yield* AnthropicUpstream.make({ baseUrl, apiKey: "k" })
      for (const limit of [undefined, 1000, 64000]) {
        yield* upstream.createOpenAi!({
          api: "chat",
          endpoint: { ...endpoint, maxCompletionTokens: limit },
          body: { model: "claude-up", messages: [{ role: "user", content: "hi" }] },
          headers: {}
        })
      }
      expect(received.map((r) => JSON.parse(r.text).max_tokens)).toEqual([4096, 1000, 64000])
    }).pipe(Effect.scoped))
})

describe("AnthropicUpstream, an upstream that only pings", () => {
  let fake: FakeUpstream
  beforeAll(async () => {
    fake = await startFakeAnthropic()
  })
  afterAll(() => fake.close())

  const messagesCall = (passThrough: boolean): Upstream.MessagesCall => ({
    endpoint,
    body: { model: "claude-up", max_tokens: 5, messages: [{ role: "user", content: "one two three four" }] },
    headers: {},
    passThrough
  })

  it.effect.each([["passing through", true], ["parsed", false]] as const)(
    "messages, %s: pings and comments alone time the stream out after idleMs, and its request is aborted",
    ([_, passThrough]) =>
      Effect.scoped(Effect.gen(function*() {
        fake.reset()
        const upstream = yield* AnthropicUpstream.make({ baseUrl: fake.url, apiKey: "k", timeouts: { idleMs: 200 } })
        const got = yield* afterKeepAlives(
          fake,
          5,
          upstream.streamMessage(messagesCall(passThrough)),
          (event: Wire.StreamEvent) => event.type === "content_block_delta"
        )
        expect(got.error).toMatchObject({ kind: "timeout" })
        expect(got.elapsed).toBeLessThan(2_000)
        expect(got.values.some((event) => event.type === "content_block_delta")).toBe(true)
        // the pings are passed on as they came, all the same
        expect(got.values.filter((event) => event.type === "ping").length).toBeGreaterThan(1)
        yield* Effect.promise(() => expect.poll(() => fake.aborted()).toBe(1))
      }))
  )

  it.effect("chat completions: the same, the Messages stream pulled until its first content", () =>
    Effect.scoped(Effect.gen(function*() {
      fake.reset()
      const upstream = yield* AnthropicUpstream.make({ baseUrl: fake.url, apiKey: "k", timeouts: { idleMs: 200 } })
      const got = yield* afterKeepAlives(
        fake,
        5,
        upstream.streamOpenAi!({
          api: "chat",
          endpoint,
          body: { model: "m", stream: true, messages: [{ role: "user", content: "one two three four" }] },
          headers: {}
        }),
        (chunk: Wire.JsonObject) => typeof (chunk.choices as any)?.[0]?.delta?.content === "string"
      )
      expect(got.error).toMatchObject({ kind: "timeout" })
      expect(got.elapsed).toBeLessThan(2_000)
      yield* Effect.promise(() => expect.poll(() => fake.aborted()).toBe(1))
    })))

  it.effect("chat completions: an upstream that pings without content times out at firstContentMs, not later", () =>
    Effect.scoped(Effect.gen(function*() {
      fake.reset()
      const upstream = yield* AnthropicUpstream.make({
        baseUrl: fake.url,
        apiKey: "k",
        timeouts: { idleMs: 5_000, firstContentMs: 300 }
      })
      // message_start, content_block_start, then pings: no content
      fake.script({ kind: "keepAliveStall", afterEvents: 2 })
      const started = Date.now()
      const error = yield* Effect.flip(Effect.flatMap(
        upstream.streamOpenAi!({
          api: "chat",
          endpoint,
          body: { model: "m", stream: true, messages: [{ role: "user", content: "hi" }] },
          headers: {}
        }),
        // as the executor pulls: until the first content, again as long as what it gives is not content
        (pull) => Effect.forever(PullUntil.untilOf(pull)!(() => true))
      ))
      expect(error).toMatchObject({ kind: "timeout", message: "upstream sent no content within 300 ms" })
      expect(Date.now() - started).toBeLessThan(2_000)
    })))
})
