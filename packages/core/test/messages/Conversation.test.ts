/**
 * A large request's conversation let go once an attempt's text is made, and its body parsed again from the client's
 * bytes when a later attempt needs it: every body an attempt forwards is the client's, whole, whether it was let go
 * before or not.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Conversation from "../../src/messages/Conversation.js"
import * as JsonSource from "../../src/messages/JsonSource.js"
import * as MessagesRequest from "../../src/messages/MessagesRequest.js"
import { forwardBody } from "../../src/messages/UpstreamBody.js"
import type { JsonObject } from "../../src/messages/Wire.js"
import * as OpenAiBodies from "../../src/openai/OpenAiBodies.js"
import * as OpenAiRequest from "../../src/openai/OpenAiRequest.js"

const encoder = new TextEncoder()
const decoder = new TextDecoder("utf-8", { fatal: true })

const text = JSON.stringify({
  model: "m",
  max_tokens: 10,
  system: [{ type: "text", text: "be brief" }],
  tools: [{ name: "read", description: "reads", input_schema: { type: "object" } }],
  messages: Array.from({ length: 50 }, (_, i) => ({
    role: i % 2 === 0 ? "user" : "assistant",
    content: `turn ${i} ${"x".repeat(100)}`
  })),
  models: ["m2"]
})
const bytes = encoder.encode(text)

/** A parser as the HTTP edge's: records what it parses, with itself to parse it again; counts its parses. */
const parser = () => {
  let parses = 0
  const parse: JsonSource.Parse = (b) => {
    parses++
    const parsed = JSON.parse(decoder.decode(b)) as object
    JsonSource.record(parsed, b, undefined, parse)
    return parsed
  }
  return { parse, parses: () => parses }
}

/** A request as the messages use case holds it: the client's body parsed, validated, and forwarded. */
const requestOf = (parse: JsonSource.Parse | undefined) => {
  const raw = JSON.parse(text) as JsonObject
  JsonSource.record(raw, bytes, undefined, parse)
  const validated = MessagesRequest.validate(raw)
  if (validated._tag === "Left") throw new Error(validated.left.message)
  const forward = forwardBody(raw)
  return { raw, request: validated.right, forward }
}

const expected = forwardBody(JSON.parse(text) as JsonObject)

describe("Conversation", () => {
  it("lets go of the arrays that hold the conversation, in the body and in the validated request", () => {
    const { parse } = parser()
    const { forward, raw, request } = requestOf(parse)
    const conversation = Conversation.make(raw, request, forward, forwardBody)
    expect(conversation.body()).toBe(forward)
    conversation.made()
    for (const holder of [raw, request, forward] as Array<{ readonly [key: string]: unknown }>) {
      expect(holder.messages).toEqual([])
      expect(holder.tools).toEqual([])
      expect(holder.system).toEqual([])
    }
    expect(raw.max_tokens).toBe(10)
  })

  it("gives a later attempt the client's body parsed again, once, and lets that go in turn", () => {
    const counted = parser()
    const { forward, raw, request } = requestOf(counted.parse)
    const conversation = Conversation.make(raw, request, forward, forwardBody)
    conversation.made()
    const second = conversation.body()
    expect(second).not.toBe(forward)
    expect(second).toEqual(expected)
    expect(second).not.toHaveProperty("models")
    expect(conversation.body()).toBe(second)
    expect(counted.parses()).toBe(1)
    // What a fallback forwards is spliced from the client's bytes again.
    expect(JsonSource.of(second)?.bytes).toBe(bytes)
    conversation.made()
    expect(second.messages).toEqual([])
    expect(conversation.body()).toEqual(expected)
    expect(counted.parses()).toBe(2)
  })

  it("is made once per text: a second `made` changes nothing", () => {
    const counted = parser()
    const { forward, raw, request } = requestOf(counted.parse)
    const conversation = Conversation.make(raw, request, forward, forwardBody)
    conversation.made()
    conversation.made()
    expect(conversation.body()).toEqual(expected)
    expect(counted.parses()).toBe(1)
  })

  it("keeps a body that cannot be parsed again: no parser recorded, or not the parsed body itself", () => {
    const { forward, raw, request } = requestOf(undefined)
    const kept = Conversation.make(raw, request, forward, forwardBody)
    kept.made()
    expect(kept.body()).toBe(forward)
    expect(forward).toEqual(expected)

    const other = requestOf(parser().parse)
    const rewritten = { ...other.raw }
    const fromCopy = Conversation.make(rewritten, other.request, forwardBody(rewritten), forwardBody)
    fromCopy.made()
    expect(fromCopy.body()).toEqual(expected)
    expect(other.raw.messages).toHaveLength(50)
  })

  it("does the same with an OpenAI-compatible API's own fields: chat completions' messages and tools", () => {
    const chatText = JSON.stringify({
      model: "m",
      max_tokens: 10,
      stream: true,
      messages: [
        { role: "system", content: "be brief" },
        ...Array.from({ length: 50 }, (_, i) => ({
          role: i % 2 === 0 ? "user" : "assistant",
          content: `turn ${i} ${"x".repeat(100)}`
        }))
      ],
      tools: [{ type: "function", function: { name: "read", parameters: { type: "object" } } }],
      models: ["m2"]
    })
    const chatBytes = encoder.encode(chatText)
    const counted = parser()
    const raw = JSON.parse(chatText) as JsonObject
    JsonSource.record(raw, chatBytes, undefined, counted.parse)
    const validated = OpenAiRequest.validate("chat", raw)
    if (validated._tag === "Left") throw new Error(validated.left.message)
    const forwardOf = (body: JsonObject) => OpenAiBodies.forwardBody("chat", body, true)
    const forward = forwardOf(raw)
    const conversation = Conversation.make(
      raw,
      validated.right.request,
      forward,
      forwardOf,
      Conversation.OPENAI_FIELDS.chat
    )
    conversation.made()
    for (const holder of [raw, validated.right.request, forward] as Array<{ readonly [key: string]: unknown }>) {
      expect(holder.messages).toEqual([])
      expect(holder.tools).toEqual([])
    }
    const second = conversation.body()
    expect(second).toEqual(forwardOf(JSON.parse(chatText) as JsonObject))
    expect(second.stream_options).toEqual({ include_usage: true })
    expect(second).not.toHaveProperty("models")
    expect(JsonSource.of(second)?.bytes).toBe(chatBytes)
    expect(counted.parses()).toBe(1)
  })
})
