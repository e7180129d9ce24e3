import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import type { JsonObject } from "../../src/messages/Wire.js"
import { replaceDocuments } from "../../src/plugins/DocumentParser.js"

const pdf = (data: string, extra: JsonObject = {}): JsonObject => ({
  type: "document",
  source: { type: "base64", media_type: "application/pdf", data },
  ...extra
})

const fakeParse = (calls: Array<string>) => (b64: string) =>
  Effect.sync(() => {
    calls.push(b64)
    return `text of ${b64}`
  })

describe("replaceDocuments", () => {
  it.effect("replaces base64 PDFs, also inside tool_result content, copying only what changes", () =>
    Effect.gen(function*() {
      const untouched = { role: "assistant", content: [{ type: "text", text: "ok" }] }
      const body: JsonObject = {
        model: "m",
        system: "sys",
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "read these" },
              pdf("AAAA", { title: "Report", cache_control: { type: "ephemeral" } }),
              pdf("BBBB"),
              { type: "document", source: { type: "text", media_type: "text/plain", data: "plain" } },
              { type: "document", source: { type: "url", url: "https://example.com/a.pdf" } }
            ]
          },
          untouched,
          {
            role: "user",
            content: [{ type: "tool_result", tool_use_id: "t1", content: [pdf("AAAA", { title: "  " })] }]
          }
        ]
      }
      const before = structuredClone(body)
      const calls: Array<string> = []
      const out = yield* replaceDocuments(body, fakeParse(calls))
      expect(body).toEqual(before)
      expect(calls).toEqual(["AAAA", "BBBB"])
      const messages = out.messages as Array<JsonObject>
      expect(messages[1]).toBe(untouched)
      expect(messages[0].content).toEqual([
        { type: "text", text: "read these" },
        { type: "text", text: "Report:\ntext of AAAA", cache_control: { type: "ephemeral" } },
        { type: "text", text: "Document:\ntext of BBBB" },
        { type: "document", source: { type: "text", media_type: "text/plain", data: "plain" } },
        { type: "document", source: { type: "url", url: "https://example.com/a.pdf" } }
      ])
      expect(messages[2].content).toEqual([
        { type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "Document:\ntext of AAAA" }] }
      ])
      expect(out.system).toBe("sys")
    }))

  it.effect("returns the same body when there is no PDF, without parsing", () =>
    Effect.gen(function*() {
      const calls: Array<string> = []
      const body: JsonObject = { model: "m", messages: [{ role: "user", content: "hi" }] }
      expect(yield* replaceDocuments(body, fakeParse(calls))).toBe(body)
      const noMessages: JsonObject = { model: "m" }
      expect(yield* replaceDocuments(noMessages, fakeParse(calls))).toBe(noMessages)
      expect(calls).toEqual([])
    }))

  it.effect("fails with the parser's error", () =>
    Effect.gen(function*() {
      const body: JsonObject = { model: "m", messages: [{ role: "user", content: [pdf("AAAA")] }] }
      const result = yield* Effect.either(replaceDocuments(body, () => Effect.fail("broken" as const)))
      expect(result).toEqual(Either.left("broken"))
    }))
})
