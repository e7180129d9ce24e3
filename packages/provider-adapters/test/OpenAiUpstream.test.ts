/**
 * The OpenAI-compatible adapter's streams against an upstream that only keeps them open after their first content
 * (`: keep-alive` comments, OpenRouter's `: OPENROUTER PROCESSING`, chunks that say nothing): translated for
 * `/v1/messages` or passed through for chat completions, each times out after `idleMs` and its request is aborted.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { Catalogue, Wire } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as OpenAiPassThrough from "../src/openai/OpenAiPassThrough.js"
import * as OpenAiUpstream from "../src/openai/OpenAiUpstream.js"
import { type FakeUpstream, startFakeOpenAi } from "./fakes/index.js"
import { afterKeepAlives } from "./KeepAlives.js"

const endpoint = { id: "m@up", modelId: "m", provider: "up", upstreamModel: "gpt-up" } as Catalogue.Endpoint

describe("OpenAiUpstream, an upstream that only keeps the stream open after content", () => {
  let fake: FakeUpstream
  beforeAll(async () => {
    fake = await startFakeOpenAi()
  })
  afterAll(() => fake.close())

  const messages = [{ role: "user", content: "one two three four five" }]

  it.effect("translated for /v1/messages: times out after idleMs, and its request is aborted", () =>
    Effect.scoped(Effect.gen(function*() {
      fake.reset()
      const upstream = yield* OpenAiUpstream.make({ baseUrl: fake.url, apiKey: "k", timeouts: { idleMs: 200 } })
      const got = yield* afterKeepAlives(
        fake,
        4,
        upstream.streamMessage({ endpoint, body: { model: "m", max_tokens: 20, messages }, headers: {} }),
        (event: Wire.StreamEvent) => event.type === "content_block_delta"
      )
      expect(got.error).toMatchObject({ kind: "timeout" })
      expect(got.elapsed).toBeLessThan(2_000)
      expect(got.values.some((event) => event.type === "content_block_delta")).toBe(true)
      yield* Effect.promise(() => expect.poll(() => fake.aborted()).toBe(1))
    })))

  it.effect("chat completions passed through: the same; the chunks that say nothing are passed on", () =>
    Effect.scoped(Effect.gen(function*() {
      fake.reset()
      const upstream = yield* OpenAiUpstream.make({ baseUrl: fake.url, apiKey: "k", timeouts: { idleMs: 200 } })
      const got = yield* afterKeepAlives(
        fake,
        4,
        upstream.streamOpenAi!({
          api: "chat",
          endpoint,
          body: { model: "gpt-up", stream: true, messages },
          headers: {}
        }),
        (chunk: Wire.JsonObject) => !OpenAiPassThrough.saysNothing(chunk)
      )
      expect(got.error).toMatchObject({ kind: "timeout" })
      expect(got.elapsed).toBeLessThan(2_000)
      expect(got.values.filter(OpenAiPassThrough.saysNothing).length).toBeGreaterThan(1)
      yield* Effect.promise(() => expect.poll(() => fake.aborted()).toBe(1))
    })))
})

describe("OpenAiPassThrough.saysNothing", () => {
  const chunk = (
    choice: Record<string, unknown> | undefined,
    extra: Record<string, unknown> = {}
  ): Wire.JsonObject => ({
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    choices: choice === undefined ? [] : [{ index: 0, logprobs: null, finish_reason: null, ...choice }],
    ...extra
  })

  it("a chunk with no content, no finish_reason and no usage says nothing: a keep-alive", () => {
    expect(OpenAiPassThrough.saysNothing(chunk({ delta: {} }))).toBe(true)
    expect(OpenAiPassThrough.saysNothing(chunk({ delta: { content: "" } }))).toBe(true)
    expect(OpenAiPassThrough.saysNothing(chunk({ delta: { role: "assistant", content: "", refusal: null } }))).toBe(
      true
    )
    expect(OpenAiPassThrough.saysNothing(chunk({ delta: { tool_calls: [] } }))).toBe(true)
    expect(OpenAiPassThrough.saysNothing(chunk(undefined))).toBe(true)
    expect(OpenAiPassThrough.saysNothing(chunk({ delta: {} }, { usage: null }))).toBe(true)
  })

  it("anything else is content: text, reasoning, tool calls, a finish_reason, usage, fields it does not know", () => {
    expect(OpenAiPassThrough.saysNothing(chunk({ delta: { content: "hi" } }))).toBe(false)
    expect(OpenAiPassThrough.saysNothing(chunk({ delta: { reasoning_content: "hm" } }))).toBe(false)
    expect(OpenAiPassThrough.saysNothing(chunk({ delta: { tool_calls: [{ index: 0 }] } }))).toBe(false)
    expect(OpenAiPassThrough.saysNothing(chunk({ delta: {}, finish_reason: "stop" }))).toBe(false)
    expect(OpenAiPassThrough.saysNothing(chunk(undefined, { usage: { prompt_tokens: 1 } }))).toBe(false)
    expect(OpenAiPassThrough.saysNothing(chunk({ delta: { audio: { id: "a" } } }))).toBe(false)
    expect(OpenAiPassThrough.saysNothing({ id: "x" })).toBe(false)
  })
})
