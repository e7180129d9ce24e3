import { describe, expect, it } from "@effect/vitest"
import * as TaskClassifier from "../../src/plugins/TaskClassifier.js"

const user = (content: unknown) => [{ role: "user", content }]

describe("TaskClassifier", () => {
  it.each(
    [
      ["code", "Why does this fail?\n```ts\nconst x: number = \"a\"\n```"],
      ["code", "Traceback (most recent call last):\n  File \"main.py\", line 3\nKeyError: 'id'"],
      ["code", "TypeError: Cannot read properties of undefined (reading 'map')"],
      ["code", "Write a python function that reverses a linked list"],
      ["math", "Solve 3x + 5 = 20 for x"],
      ["math", "Prove that there are infinitely many prime numbers"],
      ["math", "What is the integral of x^2 from 0 to 1?"],
      ["math", "What is 1234 * 5678?"],
      ["writing", "Write a short story about a lighthouse keeper"],
      ["writing", "Can you draft an email to my landlord about the broken heater?"],
      ["writing", "Please rewrite this paragraph so it sounds friendlier: we regret to inform you"],
      ["analysis", "Compare the pros and cons of renting versus buying a house"],
      ["analysis", "Summarize the key points of this report"],
      ["analysis", "| region | sales |\n|---|---|\n| north | 10 |\n| south | 12 |\nWhich region grows fastest?"],
      ["chat", "Hi! How are you today?"],
      ["chat", "What's a good name for a cat?"]
    ] as const
  )("classifies as %s: %s", (task, text) => {
    expect(TaskClassifier.classify(user(text), undefined)).toBe(task)
  })

  it("reads the latest user message that has text, skipping tool-result turns", () => {
    const messages = [
      { role: "user", content: "Solve x^2 = 4" },
      { role: "assistant", content: "x = 2 or x = -2" },
      { role: "user", content: [{ type: "text", text: "Now write a poem about it" }] },
      { role: "assistant", content: [{ type: "tool_use", id: "t", name: "n", input: {} }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: "ok" }] }
    ]
    expect(TaskClassifier.latestUserText(messages)).toBe("Now write a poem about it")
    expect(TaskClassifier.classify(messages, undefined)).toBe("writing")
  })

  it("weighs the system prompt at a quarter", () => {
    const system = [{ type: "text", text: "You are a coding assistant for python and typescript code." }]
    expect(TaskClassifier.score(user("hello"), system).code).toBe(0.75)
    expect(TaskClassifier.classify(user("hello"), system)).toBe("chat")
    expect(TaskClassifier.classify(user("fix this bug"), system)).toBe("code")
  })

  it("breaks ties by code, math, analysis, writing", () => {
    expect(TaskClassifier.pick({ code: 2, math: 2, analysis: 2, writing: 2, chat: 0 })).toBe("code")
    expect(TaskClassifier.pick({ code: 0, math: 1, analysis: 1, writing: 1, chat: 0 })).toBe("math")
    expect(TaskClassifier.pick({ code: 0.5, math: 0.75, analysis: 0, writing: 0, chat: 0 })).toBe("chat")
  })

  it("counts a capped word rule per distinct word", () => {
    expect(TaskClassifier.scoreText("compare compare compare").analysis).toBe(1)
    expect(TaskClassifier.scoreText("analyze, compare, summarize, evaluate and assess").analysis).toBe(3)
  })

  it("ignores malformed input", () => {
    expect(TaskClassifier.classify(null, 42)).toBe("chat")
    expect(TaskClassifier.classify([null, { role: "user" }, "x"], [{ type: "image" }])).toBe("chat")
  })
})
