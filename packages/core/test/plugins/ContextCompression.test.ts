import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import type { JsonObject } from "../../src/messages/Wire.js"
import { estimateTokens, IMAGE_TOKENS, middleOut } from "../../src/plugins/ContextCompression.js"

const filler = (label: string, tokens: number) => `${label} ${"x".repeat(tokens * 4)}`
const user = (text: string): JsonObject => ({ role: "user", content: text })
const assistant = (text: string): JsonObject => ({ role: "assistant", content: [{ type: "text", text }] })
const toolUse = (id: string, size = 10): JsonObject => ({
  role: "assistant",
  content: [{ type: "text", text: filler("calling", size) }, { type: "tool_use", id, name: "look", input: {} }]
})
const toolResult = (id: string, size = 10): JsonObject => ({
  role: "user",
  content: [{ type: "tool_result", tool_use_id: id, content: filler("result", size) }]
})

const messagesOf = (body: JsonObject) => body.messages as Array<JsonObject>
const roles = (body: JsonObject) => messagesOf(body).map((m) => m.role)
const texts = (body: JsonObject) => JSON.stringify(body.messages)

/** Checks the Anthropic rules a compressed conversation must still follow. */
const assertValid = (body: JsonObject) => {
  const messages = messagesOf(body).filter((m) => m.role !== "system")
  expect(messages[0].role).toBe("user")
  for (let i = 1; i < messages.length; i++) expect(messages[i].role).not.toBe(messages[i - 1].role)
  const uses = new Map<string, number>()
  const results = new Map<string, number>()
  messages.forEach((m, i) => {
    if (!Array.isArray(m.content)) return
    for (const block of m.content as Array<JsonObject>) {
      if (block.type === "tool_use") uses.set(block.id as string, i)
      if (block.type === "tool_result") results.set(block.tool_use_id as string, i)
    }
  })
  expect([...uses.keys()].sort()).toEqual([...results.keys()].sort())
  for (const [id, at] of results) expect(uses.get(id)).toBe(at - 1)
}

describe("estimateTokens", () => {
  it("counts JSON characters / 4 and images as a fixed amount, not their data", () => {
    expect(estimateTokens("x".repeat(398))).toBe(100)
    const image = { type: "image", source: { type: "base64", media_type: "image/png", data: "A".repeat(100_000) } }
    const withImage = estimateTokens({ role: "user", content: [image] })
    expect(withImage).toBeGreaterThanOrEqual(IMAGE_TOKENS)
    expect(withImage).toBeLessThan(IMAGE_TOKENS + 20)
    expect(estimateTokens(undefined)).toBe(0)
    expect(estimateTokens("日本語のテキスト")).toBe(9)
    expect(estimateTokens("привет")).toBe(4)
  })
})

describe("middleOut", () => {
  const system = "You are terse. ".repeat(10)

  it("returns the same body when it already fits", () => {
    const body = { model: "m", system, messages: [user("hi")] }
    const result = middleOut(body, 10_000)!
    expect(result.body).toBe(body)
    expect(result.removedMessages).toBe(0)
  })

  it("removes from the middle, keeps system, the first user turn and the last turns, and fits", () => {
    const messages: Array<JsonObject> = [user(filler("FIRST", 100))]
    for (let i = 1; i <= 10; i++) messages.push(assistant(filler(`A${i}`, 100)), user(filler(`U${i}`, 100)))
    const body = { model: "m", system, max_tokens: 100, messages }
    const original = JSON.stringify(body)
    const budget = estimateTokens(body) - 700
    const result = middleOut(body, budget)!
    expect(result).toBeDefined()
    expect(JSON.stringify(body)).toBe(original)
    expect(result.estimatedTokens).toBeLessThanOrEqual(budget)
    expect(result.estimatedTokens).toBe(estimateTokens(result.body))
    expect(result.body.system).toBe(system)
    expect(result.body.max_tokens).toBe(100)
    const out = messagesOf(result.body)
    expect(out.length).toBe(21 - result.removedMessages)
    expect(result.removedMessages).toBeGreaterThanOrEqual(7)
    expect(result.removedMessages).toBeLessThanOrEqual(9)
    expect(out[0]).toBe(messages[0])
    expect(out[out.length - 1]).toBe(messages[20])
    assertValid(result.body)
    // the oldest and the newest turns survive; the middle goes
    expect(texts(result.body)).toContain("A1 ")
    expect(texts(result.body)).toContain("U10 ")
    expect(texts(result.body)).not.toContain("A5 ")
    expect(texts(result.body)).not.toContain("U5 ")
    // nothing fake was inserted: every kept message is one of the originals
    for (const m of out) expect(messages).toContain(m)
  })

  it("never separates a tool_use from its tool_result", () => {
    const messages: Array<JsonObject> = [user(filler("FIRST", 50))]
    for (let i = 1; i <= 6; i++) messages.push(toolUse(`t${i}`, 80), toolResult(`t${i}`, 80))
    messages.push(assistant(filler("answer", 50)), user(filler("LAST", 50)))
    const body = { model: "m", messages }
    for (const cut of [50, 150, 300, 500, 800]) {
      const result = middleOut(body, estimateTokens(body) - cut)!
      expect(result).toBeDefined()
      expect(result.estimatedTokens).toBeLessThanOrEqual(estimateTokens(body) - cut)
      assertValid(result.body)
      expect(texts(result.body)).toContain("FIRST")
      expect(texts(result.body)).toContain("LAST")
    }
  })

  it("keeps the last tool exchange whole when the last user turn is a tool_result", () => {
    const messages: Array<JsonObject> = [user("start")]
    for (let i = 1; i <= 5; i++) messages.push(toolUse(`t${i}`, 100), toolResult(`t${i}`, 100))
    const body = { model: "m", messages }
    const result = middleOut(body, estimateTokens(body) - 400)!
    assertValid(result.body)
    const out = messagesOf(result.body)
    expect(out.slice(-2)).toEqual(messages.slice(-2))
    expect(out[0]).toBe(messages[0])
  })

  it("keeps an assistant prefill after the last user message", () => {
    const messages: Array<JsonObject> = [user("start")]
    for (let i = 1; i <= 4; i++) messages.push(assistant(filler(`A${i}`, 100)), user(filler(`U${i}`, 100)))
    messages.push(assistant("{"))
    const body = { model: "m", messages }
    const result = middleOut(body, estimateTokens(body) - 150)!
    const out = messagesOf(result.body)
    expect(out.slice(-2)).toEqual(messages.slice(-2))
    assertValid(result.body)
  })

  it("merges two turns of one role only when nothing else can restore alternation", () => {
    // user, user (consecutive turns are allowed by Anthropic, which merges them), then one removable assistant turn
    const messages = [user("first"), assistant(filler("middle", 200)), user("last")]
    const body = { model: "m", messages }
    const result = middleOut(body, estimateTokens(body) - 100)!
    expect(result.removedMessages).toBe(1)
    expect(roles(result.body)).toEqual(["user"])
    expect(messagesOf(result.body)[0].content).toEqual([
      { type: "text", text: "first" },
      { type: "text", text: "last" }
    ])
  })

  it("keeps role system messages in place", () => {
    const messages: Array<JsonObject> = [{ role: "system", content: "rules" }, user("first")]
    for (let i = 1; i <= 4; i++) messages.push(assistant(filler(`A${i}`, 100)), user(filler(`U${i}`, 100)))
    const body = { model: "m", messages }
    const result = middleOut(body, estimateTokens(body) - 300)!
    expect(messagesOf(result.body)[0]).toEqual({ role: "system", content: "rules" })
    assertValid(result.body)
  })

  it("is undefined when even removing every removable message is not enough", () => {
    const messages = [user(filler("first", 500)), assistant("short"), user(filler("last", 500))]
    expect(middleOut({ model: "m", messages }, 600)).toBeUndefined()
    expect(middleOut({ model: "m", system: filler("sys", 1000), messages: [user("hi")] }, 100)).toBeUndefined()
    expect(middleOut({ model: "m", messages: null, system: filler("sys", 1000) }, 100)).toBeUndefined()
  })

  it("uses the estimate it is given", () => {
    const messages: Array<JsonObject> = [user("first")]
    for (let i = 1; i <= 5; i++) messages.push(assistant(`a${i}`), user(`u${i}`))
    const body = { model: "m", messages }
    const count = (value: unknown): number => {
      const v = value as { messages?: Array<unknown>; role?: unknown }
      return Array.isArray(v.messages) ? v.messages.length : v.role === undefined ? 0 : 1
    }
    const result = middleOut(body, 5, count)!
    expect(messagesOf(result.body).length).toBeLessThanOrEqual(5)
    expect(result.estimatedTokens).toBeLessThanOrEqual(5)
    assertValid(result.body)
  })
})

describe("middleOut on generated conversations", () => {
  const segment = fc.record({
    tools: fc.integer({ min: 0, max: 2 }),
    assistantSize: fc.integer({ min: 1, max: 200 }),
    userSize: fc.integer({ min: 1, max: 200 })
  })

  const conversation = fc.record({
    segments: fc.array(segment, { maxLength: 12 }),
    prefill: fc.boolean(),
    fraction: fc.double({ min: 0, max: 1, noNaN: true })
  })

  it("either fits the budget with a valid conversation keeping both ends, or is undefined", () => {
    fc.assert(
      fc.property(conversation, ({ fraction, prefill, segments }) => {
        const messages: Array<JsonObject> = [user(filler("FIRST", 30))]
        let id = 0
        segments.forEach((s, i) => {
          if (s.tools === 0) {
            messages.push(assistant(filler(`A${i}`, s.assistantSize)), user(filler(`U${i}`, s.userSize)))
          } else {
            const ids = Array.from({ length: s.tools }, () => `t${id++}`)
            messages.push(
              {
                role: "assistant",
                content: [
                  { type: "text", text: filler(`A${i}`, s.assistantSize) },
                  ...ids.map((t) => ({ type: "tool_use", id: t, name: "f", input: {} }))
                ]
              },
              {
                role: "user",
                content: ids.map((t) => ({ type: "tool_result", tool_use_id: t, content: filler(`U${i}`, s.userSize) }))
              }
            )
          }
        })
        if (prefill) messages.push(assistant("prefill"))
        const body = { model: "m", system: "sys", messages }
        const budget = Math.floor(estimateTokens(body) * fraction)
        const result = middleOut(body, budget)
        if (result === undefined) return
        expect(result.estimatedTokens).toBeLessThanOrEqual(budget)
        expect(result.body.system).toBe("sys")
        assertValid(result.body)
        const out = messagesOf(result.body)
        const merged = out.length + result.removedMessages < messages.length
        if (merged) {
          // the first and last user turns were merged into one: their texts are still there, in order
          const kept = JSON.stringify(out)
          expect(kept.indexOf("FIRST")).toBeGreaterThanOrEqual(0)
          expect(kept).toContain(JSON.stringify(messages[messages.length - 1].content).slice(1, -1))
        } else {
          expect(out[0]).toBe(messages[0])
          expect(out[out.length - 1]).toBe(messages[messages.length - 1])
        }
      }),
      { numRuns: 300 }
    )
  })
})
