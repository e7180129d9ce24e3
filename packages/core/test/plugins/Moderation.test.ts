import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { JsonObject } from "../../src/messages/Wire.js"
import { blocked, blocklist, guardrailStep, moderationInput } from "../../src/plugins/Moderation.js"

const flagged = (terms: ReadonlyArray<string>, ...input: Array<string>) =>
  Effect.runSync(blocklist(terms).check(input)).flagged

describe("blocklist", () => {
  it("matches whole words and phrases, case-insensitively", () => {
    const terms = ["badword", "Forbidden Phrase", "c++"]
    expect(flagged(terms, "this has a BadWord in it")).toBe(true)
    expect(flagged(terms, "badword")).toBe(true)
    expect(flagged(terms, "(badword).")).toBe(true)
    expect(flagged(terms, "a forbidden   phrase here")).toBe(true)
    expect(flagged(terms, "a forbidden\nphrase")).toBe(true)
    expect(flagged(terms, "I write C++ daily")).toBe(true)
    expect(flagged(terms, "clean text", "second text with badword")).toBe(true)
  })

  it("does not match inside other words", () => {
    const terms = ["ass", "badword"]
    expect(flagged(terms, "a class assignment")).toBe(false)
    expect(flagged(terms, "badwords")).toBe(false)
    expect(flagged(terms, "notbadword")).toBe(false)
    expect(flagged(terms, "badword_x")).toBe(false)
    expect(flagged(terms, "badword2")).toBe(false)
    expect(flagged(terms, "forbidden phrases")).toBe(false)
  })

  it("normalizes Unicode (NFKC) in input and terms", () => {
    // full-width letters, a ligature, and combining vs precomposed accents
    expect(flagged(["badword"], "ｂａｄｗｏｒｄ")).toBe(true)
    expect(flagged(["ﬁle"], "the FILE")).toBe(true)
    expect(flagged(["café"], "a cafe\u0301 visit")).toBe(true)
    expect(flagged(["café"], "a cafe visit")).toBe(false)
    // a combining mark right after the term is part of the word
    expect(flagged(["cafe"], "a cafe\u0301 visit")).toBe(false)
    expect(flagged(["straße"], "STRASSE")).toBe(false)
    expect(flagged(["ПРИВЕТ"], "привет мир")).toBe(true)
  })

  it("treats regex characters literally and ignores empty terms", () => {
    expect(flagged(["a.b"], "axb")).toBe(false)
    expect(flagged(["a.b"], "say a.b now")).toBe(true)
    expect(flagged(["", "  "], "anything")).toBe(false)
    expect(flagged([], "anything")).toBe(false)
  })

  it("reports the blocklist category without revealing the term", () => {
    const result = Effect.runSync(blocklist(["secretterm"]).check(["secretterm"]))
    expect(result).toEqual({ flagged: true, categories: ["blocklist"], reason: "the input contains a blocked term" })
    expect(Effect.runSync(blocklist(["secretterm"]).check(["fine"]))).toEqual({ flagged: false, categories: [] })
  })
})

describe("moderationInput", () => {
  it("extracts system, message text, tool_result text and text documents, in order", () => {
    const body: JsonObject = {
      model: "m",
      system: [{ type: "text", text: "sys" }],
      messages: [
        { role: "user", content: "hello" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "hidden", signature: "s" },
            { type: "text", text: "answer" },
            { type: "tool_use", id: "t", name: "f", input: { q: "not text" } }
          ]
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "t", content: [{ type: "text", text: "tool out" }] },
            { type: "tool_result", tool_use_id: "u", content: "tool string" },
            { type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } },
            { type: "document", source: { type: "text", media_type: "text/plain", data: "doc text" } },
            { type: "text", text: "" }
          ]
        }
      ]
    }
    expect(moderationInput(body)).toEqual(["sys", "hello", "answer", "tool out", "tool string", "doc text"])
    expect(moderationInput({ model: "m", system: "plain system", messages: null })).toEqual(["plain system"])
  })
})

describe("guardrail reporting", () => {
  it("names the guardrail step and answers 403", () => {
    const result = { flagged: true, categories: ["hate", "violence"], reason: "flagged by the moderation service" }
    expect(guardrailStep(result)).toEqual({
      type: "guardrail",
      name: "moderation",
      summary: "input flagged (hate, violence): flagged by the moderation service; request blocked"
    })
    const error = blocked(result)
    expect(error._tag).toBe("PermissionDenied")
    expect(error.message).toContain("hate, violence")
  })
})
