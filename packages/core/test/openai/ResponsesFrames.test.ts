/**
 * The Responses dialect's frames: which event a stream commits to (until it, events are held back and a failure can
 * fall back), and its in-band error event.
 */
import { describe, expect, it } from "@effect/vitest"
import * as GatewayError from "../../src/errors/GatewayError.js"
import type { JsonObject } from "../../src/messages/Wire.js"
import * as OpenAiDialects from "../../src/openai/OpenAiDialects.js"
import { frameContext } from "./FrameFixtures.js"

const calls = { upstream: {} as never, api: "responses" as const, bodyFor: () => ({}), headers: {} }
const frames = OpenAiDialects.responses(calls).frames

const event = (type: string, fields: JsonObject = {}): JsonObject => ({ type, sequence_number: 0, ...fields })

describe("content", () => {
  it("holds back the lifecycle and the structure OpenAI sends before the first delta, and a tool call's progress", () => {
    for (
      const held of [
        event("response.created", { response: { id: "r1", status: "in_progress" } }),
        event("response.in_progress", { response: { id: "r1", status: "in_progress" } }),
        event("response.queued", { response: { id: "r1", status: "queued" } }),
        event("response.output_item.added", {
          output_index: 0,
          item: { type: "message", id: "m1", status: "in_progress", role: "assistant", content: [] }
        }),
        event("response.output_item.added", { output_index: 0, item: { type: "reasoning", id: "rs1", summary: [] } }),
        event("response.content_part.added", {
          item_id: "m1",
          output_index: 0,
          content_index: 0,
          part: { type: "output_text", text: "", annotations: [] }
        }),
        event("response.reasoning_summary_part.added", { item_id: "rs1", part: { type: "summary_text", text: "" } }),
        event("response.web_search_call.in_progress", { item_id: "ws1" }),
        event("response.web_search_call.searching", { item_id: "ws1" }),
        event("response.web_search_call.completed", { item_id: "ws1" }),
        event("response.image_generation_call.generating", { item_id: "ig1" }),
        event("response.some_future_event")
      ]
    ) expect([held.type, frames.isContent(held)]).toEqual([held.type, false])
  })

  it("commits to an event that carries generated output, a whole part or item, or the end", () => {
    for (
      const content of [
        event("response.output_text.delta", { item_id: "m1", output_index: 0, content_index: 0, delta: "Hi" }),
        event("response.function_call_arguments.delta", { item_id: "f1", delta: "{\"a\":" }),
        event("response.reasoning_summary_text.delta", { item_id: "rs1", delta: "why" }),
        event("response.reasoning_text.delta", { item_id: "rs1", delta: "why" }),
        event("response.refusal.delta", { item_id: "m1", delta: "no" }),
        event("response.audio.delta", { delta: "UklGRg==" }),
        event("response.audio.transcript.delta", { delta: "hi" }),
        event("response.image_generation_call.partial_image", { item_id: "ig1", partial_image_b64: "iVBOR" }),
        event("response.output_text.done", { item_id: "m1", text: "Hi" }),
        event("response.output_item.done", { output_index: 0, item: { type: "function_call", arguments: "{}" } }),
        event("response.completed", { response: { id: "r1", status: "completed" } }),
        event("response.incomplete", { response: { id: "r1", status: "incomplete" } })
      ]
    ) expect([content.type, frames.isContent(content)]).toEqual([content.type, true])
  })
})

describe("the error event", () => {
  const failure = new GatewayError.InternalError({ message: "upstream stream ended before response.completed" })
  /** The error event's data after `events` were framed. */
  const errorAfter = (events: ReadonlyArray<JsonObject>) => {
    const context = frameContext()
    for (const event of events) frames.frame(event, context)
    const text = frames.error(failure, "req_1", context)
    expect(text.startsWith("event: error\ndata: ")).toBe(true)
    return JSON.parse(text.slice("event: error\ndata: ".length)) as JsonObject
  }

  it("carries OpenAI's fields, numbered one past the last event the client got", () => {
    const told = [
      event("response.created", { sequence_number: 0, response: { id: "r1" } }),
      event("response.in_progress", { sequence_number: 1, response: { id: "r1" } }),
      event("response.output_text.delta", { sequence_number: 2, delta: "Hi" })
    ]
    expect(errorAfter(told)).toEqual({
      type: "error",
      code: "api_error",
      message: "upstream stream ended before response.completed",
      param: null,
      sequence_number: 3,
      status: 500
    })
  })

  it("is numbered 0 before any event, and counts the events an upstream did not number", () => {
    expect(errorAfter([]).sequence_number).toBe(0)
    const unnumbered = [{ type: "response.created", response: { id: "r1" } }, { type: "response.output_text.delta" }]
    expect(errorAfter(unnumbered).sequence_number).toBe(2)
  })
})
