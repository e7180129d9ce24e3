/**
 * The plain check of a conversation's common shapes never accepts a message the message schema refuses (it would let
 * an invalid request through), accepts the shapes a coding agent sends (or it would save nothing), and leaves what it
 * does not know to the schema, whose errors stay the same.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import * as fc from "fast-check"
import { CheckedMessage, validate } from "../../src/messages/MessagesRequest.js"
import { isPlainMessage } from "../../src/messages/PlainMessages.js"
import * as Json from "../JsonArbitraries.js"

const schemaAccepts = (message: unknown): boolean => Either.isRight(Schema.decodeUnknownEither(CheckedMessage)(message))

/** Values of every kind, and of the kinds the schemas ask for, to put in any field. */
const anyValue = fc.oneof(
  Json.anyValue,
  fc.constantFrom("ephemeral", "text", "image", "base64", "url", "user", "assistant", "system")
)

const { ABSENT, fields } = Json

/** Mostly `valid`, sometimes absent, sometimes any value: so that plain messages are common, and near misses too. */
const mostly = <A>(valid: fc.Arbitrary<A>) =>
  fc.oneof({ arbitrary: valid, weight: 12 }, { arbitrary: fc.constant(ABSENT), weight: 1 }, {
    arbitrary: anyValue,
    weight: 1
  })

const str = fc.string({ maxLength: 3 })

const cacheControl = mostly(
  fc.oneof(fc.constant(null), fields({ type: mostly(fc.constant("ephemeral")), ttl: mostly(str) }))
)

const source = mostly(fc.oneof(
  fields({ type: mostly(fc.constant("base64")), media_type: mostly(str), data: mostly(str) }),
  fields({ type: mostly(fc.constant("url")), url: mostly(str) }),
  fields({ type: mostly(fc.constantFrom("file", "other")), file_id: mostly(str) })
))

const textBlock = fields({ type: mostly(fc.constant("text")), text: mostly(str), cache_control: cacheControl })
const imageBlock = fields({ type: mostly(fc.constant("image")), source, cache_control: cacheControl })

/** A block of any known or unknown kind, its fields present or not, of the right kind or not. */
const block = mostly(fc.oneof(
  textBlock,
  imageBlock,
  fields({
    type: mostly(fc.constant("tool_use")),
    id: mostly(str),
    name: mostly(str),
    input: anyValue,
    cache_control: cacheControl
  }),
  fields({
    type: mostly(fc.constant("tool_result")),
    tool_use_id: mostly(str),
    content: mostly(fc.oneof(
      str,
      fc.array(mostly(fc.oneof(textBlock, imageBlock, fields({ type: fc.constant("document"), source }))), {
        maxLength: 3
      })
    )),
    is_error: mostly(fc.boolean()),
    cache_control: cacheControl
  }),
  fields({ type: mostly(fc.constant("thinking")), thinking: mostly(str), signature: mostly(str) }),
  fields({ type: mostly(fc.constant("redacted_thinking")), data: mostly(str) }),
  fields({ type: mostly(fc.constantFrom("document", "x")), text: mostly(str), cache_control: cacheControl })
))

const message = mostly(fields({
  role: mostly(fc.constantFrom("user", "assistant", "system", "tool")),
  content: mostly(fc.oneof(str, fc.array(block, { maxLength: 4 }))),
  clear_at: fc.oneof(fc.constant(ABSENT), anyValue),
  output_config: fc.oneof(fc.constant(ABSENT), anyValue),
  extra: fc.oneof(fc.constant(ABSENT), anyValue)
}))

describe("PlainMessages.isPlainMessage", () => {
  it("accepts no message the schema refuses", () => {
    let plain = 0
    fc.assert(
      fc.property(message, (m) => {
        if (!isPlainMessage(m)) return
        plain++
        assert.isTrue(schemaAccepts(m), JSON.stringify(m))
      }),
      { numRuns: 50_000 }
    )
    // The property would hold of a check that accepts nothing: enough messages must have been plain.
    assert.isAbove(plain, 2_000)
  })

  it("accepts what a coding agent sends, as it is", () => {
    const messages = [
      { role: "user", content: "Fix the bug" },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "Reading first.", signature: "c2ln" },
          { type: "text", text: "I will read it." },
          { type: "tool_use", id: "toolu_1", name: "read", input: { path: "a.ts" }, cache_control: null }
        ]
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "code" }], is_error: false },
          { type: "tool_result", tool_use_id: "toolu_2", content: "plain" },
          { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBOR" } },
          { type: "text", text: "go on", cache_control: { type: "ephemeral", ttl: "1h" } }
        ]
      },
      { role: "assistant", content: [{ type: "redacted_thinking", data: "abc" }] }
    ]
    for (const m of messages) assert.isTrue(isPlainMessage(m), JSON.stringify(m))
    const body = { model: "m", max_tokens: 10, messages }
    const decoded = validate(body)
    assert.isTrue(Either.isRight(decoded))
    // Taken as it is: no copy.
    if (Either.isRight(decoded)) assert.strictEqual<unknown>(decoded.right.messages![1], messages[1])
  })

  it("leaves what it does not know, or what is wrong, to the schema and its errors", () => {
    assert.isFalse(isPlainMessage({ role: "user", content: [{ type: "document", source: { type: "text" } }] }))
    const wrong = validate({ model: "m", messages: [{ role: "user", content: [{ type: "text", text: 1 }] }] })
    assert.isTrue(Either.isLeft(wrong))
    if (Either.isLeft(wrong)) {
      assert.strictEqual(wrong.left.message, "messages[0].content[0].text: Expected string, actual 1")
    }
    const hole = [{ type: "text", text: "a" }, , { type: "text", text: "b" }] // eslint-disable-line no-sparse-arrays
    assert.isFalse(isPlainMessage({ role: "user", content: hole }))
  })
})
