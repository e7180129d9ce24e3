import { assert, describe, it } from "@effect/vitest"
import { InternChatChunks } from "@model-gateway/core"

const options = { id: "chatcmpl-1", created: 1_800_000_000, model: "asked/model", sessionId: "sess_1" }
const frame = { id: "chatcmpl-1", object: "chat.completion.chunk", created: 1_800_000_000, model: "anthro/claude" }

const start = {
  type: "message_start",
  message: { model: "anthro/claude", usage: { input_tokens: 10, cache_read_input_tokens: 2, output_tokens: 1 } }
}
const text = (t: string) => ({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: t } })

describe("InternChatChunks", () => {
  it("turns a streamed answer into a role chunk, content deltas, the finish and a last chunk with session and usage", () => {
    const t = InternChatChunks.make(options)
    const chunks = [
      start,
      { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "Hmm." } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
      text("Hel"),
      { type: "ping" },
      text("lo"),
      { type: "content_block_stop", index: 1 },
      { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 5, cost: 0.0012 } },
      { type: "message_stop" }
    ].flatMap((event) => t.push(event))
    assert.deepStrictEqual(chunks, [
      { ...frame, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] },
      { ...frame, choices: [{ index: 0, delta: { reasoning: "Hmm." }, finish_reason: null }] },
      { ...frame, choices: [{ index: 0, delta: { content: "Hel" }, finish_reason: null }] },
      { ...frame, choices: [{ index: 0, delta: { content: "lo" }, finish_reason: null }] },
      { ...frame, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }
    ])
    assert.isTrue(t.completed())
    assert.strictEqual(t.text(), "Hello")
    assert.deepStrictEqual(t.end(), [{
      ...frame,
      choices: [],
      session_id: "sess_1",
      usage: {
        prompt_tokens: 12,
        completion_tokens: 5,
        total_tokens: 17,
        prompt_tokens_details: { cached_tokens: 2 },
        cost: 0.0012
      }
    }])
  })

  it("maps finish reasons", () => {
    assert.deepStrictEqual(
      ["end_turn", "stop_sequence", "max_tokens", "model_context_window_exceeded", "tool_use", "refusal", null].map(
        InternChatChunks.finishReason
      ),
      ["stop", "stop", "length", "length", "tool_calls", "content_filter", null]
    )
  })

  it("an in-band error becomes an error chunk with its reason, and nothing follows but the last chunk", () => {
    const t = InternChatChunks.make(options)
    t.push(start)
    t.push(text("Part"))
    const failed = t.push({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } })
    assert.deepStrictEqual(failed, [{
      ...frame,
      choices: [{ index: 0, delta: {}, finish_reason: "error" }],
      error: { code: 529, message: "Overloaded", metadata: { reason: "turn_failed", retryable: true } }
    }])
    assert.deepStrictEqual(t.push(text("more")), [])
    assert.isFalse(t.completed())
    const end = t.end()
    assert.strictEqual(end.length, 1)
    assert.deepStrictEqual(end[0].choices, [])
  })

  it("an answer cut before message_stop ends with a stream_severed error", () => {
    const t = InternChatChunks.make(options)
    t.push(start)
    t.push(text("Half"))
    const end = t.end()
    assert.deepStrictEqual(end[0].error, {
      code: 502,
      message: "the answer ended before it was complete",
      metadata: { reason: "stream_severed", retryable: true }
    })
    assert.strictEqual(end[1].session_id, "sess_1")
    assert.isFalse(t.completed())
  })

  it("names each error type's code and reason", () => {
    const of = (type: string) => InternChatChunks.chatError(type, "m")
    assert.deepStrictEqual(of("invalid_request_error"), {
      code: 400,
      message: "m",
      metadata: { reason: "bad_request", retryable: false }
    })
    assert.deepStrictEqual(of("rate_limit_error").metadata, { reason: "rate_limited", retryable: true })
    assert.deepStrictEqual(of("timeout_error").code, 504)
    assert.deepStrictEqual(of("api_error").metadata, { reason: "turn_failed", retryable: true })
  })
})
