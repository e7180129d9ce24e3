/**
 * Hostile input never answers 500: thousands of generated bodies (every field with values of every type, random and
 * mutated bodies, nesting thousands of levels deep; batch submissions too) sent to the real handler, with an upstream
 * that serialises what it is given as the real adapters do. Every answer is a 2xx, or a 4xx with the route's error body.
 */
import { Upstream } from "@model-gateway/core"
import { Effect, Option, Stream } from "effect"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { decode } from "../src/Config.js"
import type { Gateway } from "../src/Gateway.js"
import { makeGateway } from "../src/Gateway.js"

let gateway: Gateway
let internId: string

const message = {
  id: "msg_1",
  type: "message",
  role: "assistant",
  model: "up",
  content: [{ type: "text", text: "ok" }],
  stop_reason: "end_turn",
  stop_sequence: null,
  usage: { input_tokens: 1, output_tokens: 1 }
}

beforeAll(async () => {
  const { config } = decode({
    storage: "memory:",
    providers: { up: { kind: "anthropic", baseUrl: "http://127.0.0.1:9" } },
    models: {
      m: { endpoints: [{ provider: "up", upstreamModel: "up", pricing: { prompt: "0", completion: "0" } }] },
      s: {
        outputModalities: ["audio"],
        endpoints: [{ provider: "up", upstreamModel: "tts", pricing: { prompt: "0", completion: "0" } }]
      }
    },
    keys: [{ key: "mg-hostile", interns: true }]
  })
  // Serialises what it forwards, as the real adapters do: a body that cannot be serialised fails here too.
  const upstream = {
    createMessage: (call: { body: unknown }) => Effect.sync(() => (JSON.stringify(call.body), message)),
    streamMessage: (call: { body: unknown }) => {
      JSON.stringify(call.body)
      return Upstream.pullStream(Stream.make(
        { type: "message_start", message: { ...message, content: [], usage: { input_tokens: 1, output_tokens: 0 } } },
        { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
        { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "ok" } },
        { type: "content_block_stop", index: 0 },
        { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 1 } },
        { type: "message_stop" }
      ) as never)
    },
    createOpenAi: (call: { body: unknown }) =>
      Effect.sync(() => (JSON.stringify(call.body), {
        id: "c",
        object: "chat.completion",
        created: 1,
        model: "up",
        choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
      })),
    speech: (call: { options: unknown }) =>
      Effect.sync(() => {
        JSON.stringify(call.options)
        let sent = false
        return {
          contentType: "audio/mpeg",
          pull: Effect.sync(() => sent ? undefined : (sent = true, new Uint8Array([0xff, 0xfb, 0x90, 0x00])))
        }
      })
  }
  // Interns "provisioned" at once, without daemons.
  const runtime = {
    provision: () => Stream.make({ _tag: "Ready", hostname: "127.0.0.1" } as const),
    suspend: () => Effect.void,
    destroy: () => Effect.void,
    access: () => Effect.succeed(Option.none())
  }
  gateway = await makeGateway(config, {
    upstreams: { up: upstream as never },
    requestLog: false,
    interns: { runtime }
  })
  const created = await send("/v1/interns", JSON.stringify({ name: "chatty", model: "m", provision: true }))
  internId = JSON.parse(created.text).id
  for (let i = 0; i < 50; i++) {
    const got = await gateway.runtime.runPromise(gateway.handler({
      method: "GET",
      path: `/v1/interns/${internId}`,
      headers: { authorization: "Bearer mg-hostile" },
      body: Effect.succeed(new Uint8Array())
    }))
    if (got.body._tag === "Text" && JSON.parse(got.body.text).status === "running") break
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
})
afterAll(() => gateway.dispose())

const send = async (path: string, text: string) => {
  const bytes = Buffer.from(text)
  const response = await gateway.runtime.runPromise(gateway.handler({
    method: "POST",
    path,
    headers: {
      "content-type": "application/json",
      authorization: "Bearer mg-hostile",
      "content-length": String(bytes.length)
    },
    body: Effect.succeed(bytes)
  }))
  // Streamed answers (SSE, audio) are read to their end: a failure while streaming must not escape either.
  if (response.body._tag === "Text") return { status: response.status, text: response.body.text }
  return { status: response.status, text: "" }
}

const deep = (depth: number, leaf: string, array: boolean) =>
  array ? "[".repeat(depth) + leaf + "]".repeat(depth) : "{\"a\":".repeat(depth) + leaf + "}".repeat(depth)

const base: Record<string, unknown> = {
  model: "m",
  max_tokens: 16,
  messages: [{ role: "user", content: "hi" }],
  session_id: "s",
  user: "u",
  stream: false,
  metadata: { user_id: "x" },
  tools: [{ name: "t", input_schema: { type: "object", properties: {} } }],
  top_p: 0.5,
  system: "be brief",
  provider: { sort: "price" },
  plugins: [{ id: "auto-router" }],
  fallbacks: [{ model: "m" }]
}
const speechBase: Record<string, unknown> = {
  model: "s",
  input: "Hello there.",
  voice: "alloy",
  response_format: "mp3",
  speed: 1,
  session_id: "s",
  user: "u",
  provider: { sort: "price", options: { up: { instructions: "calm" } } },
  trace: { span_name: "x", metadata: { a: 1 } },
  input_references: [{ type: "text", text: "hello" }, {
    type: "input_audio",
    input_audio: { data: "AAAA", format: "wav" }
  }],
  fallbacks: [{ model: "s" }]
}

/** Any JSON value, nested a little. */
const value = fc.jsonValue({ maxDepth: 4 })

/** A body with one field replaced by a value of any type, or by a value nested thousands of levels deep. */
const mutated = (base: Record<string, unknown>, extra: ReadonlyArray<string>) => {
  const fields = [...Object.keys(base), "unknown_field", ...extra]
  return fc.oneof(
    fc.record({ field: fc.constantFrom(...fields), value }).map(({ field, value }) =>
      JSON.stringify({ ...base, [field]: value })
    ),
    fc.record({ field: fc.constantFrom(...fields), depth: fc.integer({ min: 100, max: 20_000 }), array: fc.boolean() })
      .map(({ array, depth, field }) => {
        const text = JSON.stringify({ ...base, [field]: "__DEEP__" })
        return text.replace("\"__DEEP__\"", deep(depth, "1", array))
      }),
    fc.record({ field: fc.constantFrom(...fields), length: fc.integer({ min: 250, max: 5000 }) }).map((r) =>
      JSON.stringify({ ...base, [r.field]: Array.from({ length: r.length }, (_, i) => i) })
    ),
    value.map((v) => JSON.stringify(v)),
    fc.string().map((s) => JSON.stringify({ ...base, messages: [{ role: "user", content: s }], input: s }))
  )
}
const internBase: Record<string, unknown> = {
  name: "an intern",
  description: "helps",
  instructions: "be brief",
  model: "m",
  provision: false,
  vault_id: "v",
  workspace_id: "default"
}

const internChatBase: Record<string, unknown> = {
  messages: [{ role: "system", content: "be brief" }, { role: "user", content: [{ type: "text", text: "hi" }] }],
  session_id: "s",
  model: "m",
  stream: true
}

const { model: _model, ...itemBody } = base
const batchBase: Record<string, unknown> = {
  endpoint: "/v1/messages",
  model: "m",
  completion_window: "24h",
  provider: { only: ["up"], allow_fallbacks: false },
  requests: [{ custom_id: "a", body: itemBody }, { custom_id: "b", body: { ...itemBody, model: "m" } }]
}

/** A submission with one field of the submission, or of its first request's body, replaced by any value. */
const batches = fc.oneof(
  mutated(batchBase, ["metadata"]),
  fc.record({ field: fc.constantFrom(...Object.keys(itemBody), "custom_id", "body"), value }).map(({ field, value }) =>
    JSON.stringify({
      ...batchBase,
      requests: [
        field === "custom_id" || field === "body"
          ? { custom_id: "a", body: itemBody, [field]: value }
          : { custom_id: "a", body: { ...itemBody, [field]: value } }
      ]
    })
  )
)

const bodies = {
  batches,
  messages: mutated(base, ["thinking", "tool_choice", "output_config"]),
  speech: mutated(speechBase, ["stream_format"]),
  intern: mutated(internBase, []),
  internChat: mutated(internChatBase, [])
}

describe("hostile input", () => {
  it.each(
    [
      ["/v1/messages", bodies.messages],
      ["/v1/chat/completions", bodies.messages],
      ["/v1/messages/count_tokens", bodies.messages],
      ["/v1/audio/speech", bodies.speech],
      ["/v1/interns", bodies.intern],
      ["/v1/interns/{id}/chat/completions", bodies.internChat],
      ["/v1/batches", bodies.batches]
    ] as const
  )(
    "%s: 2,000 generated bodies, never a 500, always the route's error body",
    async (route, generated) => {
      const path = route.replace("{id}", internId)
      await fc.assert(
        fc.asyncProperty(generated, async (text) => {
          const { status, text: answer } = await send(path, text)
          expect(status, `${status} for ${text.slice(0, 300)}: ${answer.slice(0, 300)}`).toBeLessThan(500)
          if (status >= 400) {
            const body = JSON.parse(answer)
            const error = body.error
            expect(typeof error.message).toBe("string")
            expect(error.message.length).toBeLessThan(2000)
          }
        }),
        { numRuns: 2000 }
      )
    },
    120_000
  )

  it("refuses a body nested deeper than 128 levels with a 400 naming the limit, and accepts 128", async () => {
    const at = (depth: number) =>
      JSON.stringify({ ...base, metadata: "__DEEP__" }).replace("\"__DEEP__\"", deep(depth - 2, "{}", false))
    expect((await send("/v1/messages", at(128))).status).toBe(200)
    const refused = await send("/v1/messages", at(129))
    expect(refused.status).toBe(400)
    expect(JSON.parse(refused.text).error.message).toBe(
      "request body: nested deeper than 128 levels of objects and arrays"
    )
  })
})
