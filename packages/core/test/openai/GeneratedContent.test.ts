/**
 * What the OpenAI dialects count of an answer's content (`StreamState.generated` as they frame a stream, `generated` of a
 * JSON answer): what an answer whose upstream did not tell its usage is billed by (see `UntoldUsage`), and the tokens
 * then shown.
 */
import { describe, expect, it } from "@effect/vitest"
import { type FrameContext, streamState } from "../../src/execution/Dialect.js"
import type { JsonObject } from "../../src/messages/Wire.js"
import * as OpenAiDialects from "../../src/openai/OpenAiDialects.js"
import { frameContext } from "./FrameFixtures.js"

const calls = { upstream: {} as never, api: "chat" as const, bodyFor: () => ({}), headers: {} }

/** The characters counted over `events`, framed in order by `frames`. */
const counted = (frames: { frame: (e: JsonObject, c: FrameContext) => string }, events: ReadonlyArray<JsonObject>) => {
  const state = streamState()
  const context = frameContext(state)
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

describe("a JSON answer", () => {
  const attempt = frameContext().attempt
  const charge = { usage: { input: 30, output: 4, cacheRead: 0, cacheWrite: 0 }, cost: "0.0001" }

  it("chat: its messages' text, reasoning and tool calls counted; the tokens billed shown when none were told", () => {
    const chat = OpenAiDialects.chat(calls, { includeUsage: false })
    const answer: JsonObject = {
      id: "c1",
      object: "chat.completion",
      choices: [{
        index: 0,
        message: {
          role: "assistant",
          content: "Hello",
          tool_calls: [{ id: "t", type: "function", function: { name: "get", arguments: "{}" } }]
        },
        finish_reason: "tool_calls"
      }]
    }
    expect(chat.generated!(answer)).toBe(5 + 3 + 2)
    expect(chat.respond(answer, attempt, charge, undefined).usage).toEqual({
      prompt_tokens: 30,
      completion_tokens: 4,
      total_tokens: 34,
      cost: 0.0001
    })
    const told = { ...answer, usage: { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 } }
    expect(chat.respond(told, attempt, charge, undefined).usage).toEqual({ ...told.usage, cost: 0.0001 })
  })

  it("responses: its output's texts, reasoning summaries and function arguments counted; the tokens billed shown", () => {
    const responses = OpenAiDialects.responses(calls)
    const answer: JsonObject = {
      id: "r1",
      object: "response",
      output: [
        { type: "reasoning", summary: [{ type: "summary_text", text: "why" }] },
        { type: "message", content: [{ type: "output_text", text: "Hello" }] },
        { type: "function_call", name: "get", arguments: "{\"a\":1}" }
      ]
    }
    expect(responses.generated!(answer)).toBe(3 + 5 + 7)
    expect(responses.respond(answer, attempt, charge, undefined).usage).toEqual({
      input_tokens: 30,
      output_tokens: 4,
      total_tokens: 34,
      cost: 0.0001
    })
  })
})
