/**
 * What the OpenAI dialects count of a stream's content as they frame it (`StreamState.generated`): what a stream cut
 * before its upstream told its usage is billed by (see `CutStreams`).
 */
import { describe, expect, it } from "@effect/vitest"
import type { FrameContext, StreamState } from "../../src/execution/Dialect.js"
import type { JsonObject } from "../../src/messages/Wire.js"
import * as OpenAiDialects from "../../src/openai/OpenAiDialects.js"
import type { Attempt } from "../../src/routing/RoutePlanner.js"

const contextOf = (state: StreamState): FrameContext => ({
  attempt: { model: { id: "acme/gpt" }, endpoint: { provider: "acme" } } as unknown as Attempt,
  state,
  charge: () => ({ usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, cost: "0" }),
  pipeline: undefined,
  requestId: "req_1"
})

const calls = { upstream: {} as never, api: "chat" as const, bodyFor: () => ({}) }

/** The characters counted over `events`, framed in order by `frames`. */
const counted = (frames: { frame: (e: JsonObject, c: FrameContext) => string }, events: ReadonlyArray<JsonObject>) => {
  const state: StreamState = { usage: {}, sawEnd: false, generated: 0, errorType: null, failure: undefined }
  const context = contextOf(state)
  for (const event of events) frames.frame(event, context)
  return state.generated
}

const chunk = (delta: JsonObject, finish: string | null = null): JsonObject => ({
  id: "c1",
  object: "chat.completion.chunk",
  model: "gpt",
  choices: [{ index: 0, delta, finish_reason: finish }]
})

describe("chat completions", () => {
  it("counts the text, reasoning, refusal and tool calls' names and arguments; nothing else", () => {
    const frames = OpenAiDialects.chat(calls, { includeUsage: true }).frames
    expect(counted(frames, [
      chunk({ role: "assistant", content: "" }),
      chunk({ content: "Hello" }),
      chunk({ reasoning: "abc" }),
      chunk({ reasoning_content: "de" }),
      chunk({ refusal: "no" }),
      chunk({ tool_calls: [{ index: 0, id: "call_1", function: { name: "get", arguments: "{\"a\":" } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: "1}" } }] }),
      chunk({}, "stop"),
      { id: "c1", object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 5, completion_tokens: 9 } }
    ])).toBe(5 + 3 + 2 + 2 + 3 + 5 + 2)
  })
})

describe("responses", () => {
  it("counts the deltas of text, reasoning and arguments; not audio's bytes or lifecycle events", () => {
    const frames = OpenAiDialects.responses(calls).frames
    expect(counted(frames, [
      { type: "response.created", response: { id: "r1", status: "in_progress" } },
      { type: "response.output_text.delta", item_id: "m1", output_index: 0, content_index: 0, delta: "Hello" },
      { type: "response.reasoning_summary_text.delta", item_id: "r1", delta: "why" },
      { type: "response.function_call_arguments.delta", item_id: "f1", delta: "{\"a\":1}" },
      { type: "response.audio.delta", delta: "UklGRiQAAABXQVZFZm10IBAAAAABAAEA" },
      { type: "response.output_text.done", item_id: "m1", text: "Hello" }
    ])).toBe(5 + 3 + 7)
  })
})
