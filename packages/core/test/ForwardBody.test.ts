import { describe, expect, it } from "@effect/vitest"
import { forwardBody } from "../src/messages/MessagesService.js"

describe("forwardBody", () => {
  it("drops the gateway's own fields and keeps every other field and value, in order", () => {
    const body = JSON.parse(JSON.stringify({
      model: "a/b",
      models: ["x"],
      max_tokens: 10,
      fallbacks: [{ model: "y" }],
      provider: { sort: "price" },
      plugins: [],
      session_id: "s",
      route: "fallback",
      trace: { id: 1 },
      messages: [{ role: "user", content: [{ type: "text", text: "hi", cache_control: { type: "ephemeral" } }] }],
      future_field: { kept: true }
    }))
    const out = forwardBody(body)
    expect(Object.keys(out)).toEqual(["model", "max_tokens", "messages", "future_field"])
    expect(out.messages).toBe(body.messages)
    expect(out.future_field).toEqual({ kept: true })
  })

  it("maps user to metadata.user_id unless metadata is given", () => {
    expect(forwardBody({ user: "u1" })).toEqual({ metadata: { user_id: "u1" } })
    expect(forwardBody({ user: "u1", metadata: { user_id: "other" } })).toEqual({ metadata: { user_id: "other" } })
  })

  it("keeps an own __proto__ key as a plain field, never as the object's prototype", () => {
    const body = JSON.parse("{\"model\":\"m\",\"__proto__\":{\"polluted\":true}}")
    const out = forwardBody(body)
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype)
    expect((out as { polluted?: unknown }).polluted).toBeUndefined()
    expect(JSON.stringify(out)).toBe("{\"model\":\"m\",\"__proto__\":{\"polluted\":true}}")
  })
})
