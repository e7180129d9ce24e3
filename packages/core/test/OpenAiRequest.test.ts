/**
 * The chat message check made with plain code accepts exactly what the message schema accepts (a message it takes is
 * taken as it is, without the schema's copy), and what it refuses gets the schema's error, naming the field.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import * as fc from "fast-check"
import { CheckedChatMessage, isPlainChatMessage, validate } from "../src/openai/OpenAiRequest.js"
import { ABSENT, anyValue, fields } from "./JsonArbitraries.js"

const message = fc.oneof(
  { arbitrary: anyValue, weight: 1 },
  {
    arbitrary: fields({
      role: fc.oneof(
        fc.constantFrom("system", "developer", "user", "assistant", "tool", "function", "robot"),
        anyValue
      ),
      content: fc.oneof(
        fc.constant(ABSENT),
        anyValue,
        fc.array(fc.oneof(fc.record({ type: fc.constant("text"), text: fc.string() }), anyValue), { maxLength: 3 })
      ),
      name: fc.oneof(fc.constant(ABSENT), anyValue)
    }),
    weight: 8
  }
)

describe("OpenAiRequest.isPlainChatMessage", () => {
  it("accepts exactly what the message schema accepts", () => {
    let plain = 0
    fc.assert(
      fc.property(message, (m) => {
        const accepted = Either.isRight(Schema.decodeUnknownEither(CheckedChatMessage)(m))
        assert.strictEqual(isPlainChatMessage(m), accepted, JSON.stringify(m))
        if (accepted) plain++
      }),
      { numRuns: 20_000 }
    )
    assert.isAbove(plain, 2_000)
  })

  it("takes a message as it is, and leaves a wrong one to the schema's error", () => {
    const messages = [{ role: "user", content: [{ type: "text", text: "hi" }] }, {
      role: "tool",
      tool_call_id: "c",
      content: "x"
    }]
    const decoded = validate("chat", { model: "m", messages })
    assert.isTrue(Either.isRight(decoded))
    if (Either.isRight(decoded) && decoded.right.api === "chat") {
      assert.strictEqual<unknown>(decoded.right.request.messages[1], messages[1])
    }
    const wrong = validate("chat", { model: "m", messages: [{ role: "user", content: ["text"] }] })
    assert.isTrue(Either.isLeft(wrong))
    if (Either.isLeft(wrong)) assert.match(wrong.left.message, /^messages\[0\]\.content\[0\]: /)
  })
})
