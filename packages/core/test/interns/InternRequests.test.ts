import { assert, describe, it } from "@effect/vitest"
import { InternChatRequest, InternRequests } from "@model-gateway/core"
import { Either } from "effect"

const create = InternRequests.decodeBody(InternRequests.CreateIntern)
const messageOf = (result: Either.Either<unknown, { readonly message: string }>) =>
  Either.isLeft(result) ? result.left.message : "valid"

describe("InternRequests", () => {
  it("validates a create body field by field", () => {
    assert.deepStrictEqual(
      [
        { name: "Ada", description: null, instructions: "Be brief.", model: "m/one", provision: true },
        {},
        { name: "" },
        { name: 3 },
        { name: "x".repeat(129) },
        { name: "ok", description: 5 },
        { name: "ok", instructions: "x".repeat(100_001) },
        { name: "ok", provision: "yes" },
        []
      ].map((body) => messageOf(create(body))),
      [
        "valid",
        "name: is missing",
        "name: must be 1 to 128 characters, got 0",
        "name: Expected string, actual 3",
        "name: must be 1 to 128 characters, got 129",
        "description: Expected string, actual 5",
        "instructions: must be at most 100000 characters, got 100001",
        "provision: Expected boolean, actual \"yes\"",
        "request body: must be a JSON object, got an array"
      ]
    )
  })

  it("fingerprints a create request by its content, not its key order", () => {
    const a = Either.getOrThrow(create({ name: "Ada", instructions: "x", provision: false }))
    const b = Either.getOrThrow(create({ provision: false, instructions: "x", name: "Ada", unknown: 1 }))
    const c = Either.getOrThrow(create({ name: "Ada", instructions: "y" }))
    assert.strictEqual(InternRequests.fingerprint(a), InternRequests.fingerprint(b))
    assert.notStrictEqual(InternRequests.fingerprint(a), InternRequests.fingerprint(c))
  })

  it("reads the list query", () => {
    assert.deepStrictEqual(
      InternRequests.listOptions({ status: ["running,stopped", "running"], limit: "5", starting_after: "intern_1" }),
      Either.right({ statuses: ["running", "stopped"], limit: 5, startingAfter: "intern_1", workspace: undefined })
    )
    assert.deepStrictEqual(
      InternRequests.listOptions({}),
      Either.right({ statuses: [], limit: 20, startingAfter: undefined, workspace: undefined })
    )
    assert.strictEqual(messageOf(InternRequests.listOptions({ limit: "0" })), "limit: must be an integer from 1 to 100")
    assert.strictEqual(messageOf(InternRequests.listOptions({ limit: ["1", "2"] })), "limit: give it once")
    assert.match(messageOf(InternRequests.listOptions({ status: "awake" })), /^status: 'awake' is not a status/)
  })

  it("reads a chat turn: text only, system and developer messages apart", () => {
    const turn = InternChatRequest.chatTurn({
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "Hel" }, { type: "text", text: "lo" }] },
        { role: "assistant", content: "Hi." },
        { role: "developer", content: "Use French." },
        { role: "user", content: "Again" }
      ],
      session_id: "sess_1",
      stream: true
    })
    assert.deepStrictEqual(
      turn,
      Either.right({
        model: undefined,
        sessionId: "sess_1",
        system: ["Be brief.", "Use French."],
        turns: [{ role: "user", content: "Hello" }, { role: "assistant", content: "Hi." }, {
          role: "user",
          content: "Again"
        }]
      })
    )
    const refused = [
      { messages: [{ role: "user", content: "x" }], stream: false },
      { messages: [{ role: "tool", content: "x" }] },
      { messages: [{ role: "user", content: [{ type: "image_url" }] }] },
      { messages: [{ role: "assistant", content: "only me" }] },
      { messages: [{ role: "user", content: "x" }], session_id: "s".repeat(257) }
    ].map((body) => messageOf(InternChatRequest.chatTurn(body)))
    assert.deepStrictEqual(refused.slice(0, 4), [
      "stream: intern chat answers as an event stream only (stream: true)",
      "messages[0].role: intern chat takes no tool messages",
      "messages[0].content[0]: intern chat takes text parts only, got 'image_url'",
      "messages: must hold a user message with text"
    ])
    assert.match(refused[4], /^session_id: /)
  })
})
