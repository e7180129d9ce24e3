/**
 * The body of `POST /interns/{id}/chat/completions` (what `@openrouter/sdk`'s `interns.chat` sends): chat messages,
 * an optional `session_id` that continues a conversation, an optional `model` for this turn, and `stream: true`.
 * Only text is carried: system and developer messages join the intern's instructions for this turn; user and
 * assistant messages join the session's conversation.
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { InvalidRequest } from "../errors/GatewayError.js"
import { arrayOf, Bool, literal, maxChars, nullable, object, oneOf, optional, Str } from "../internal/RequestSchema.js"
import { decodeBody } from "./InternRequests.js"
import type { Turn } from "./InternStore.js"

const Part = object({ type: Str, text: optional(Str) }, "a content part object")

const ChatMessage = object({
  role: literal("user", "assistant", "system", "developer", "tool"),
  content: optional(nullable(oneOf({ string: Str, array: Schema.Array(Part) }, "a string or an array of parts")))
}, "a message object")

export const MAX_SESSION_ID = 256

const NonEmpty = Str.pipe(Schema.filter((s) => s.length > 0, { message: () => "must not be empty" }))

const InternChatRequest = Schema.Struct({
  messages: arrayOf(ChatMessage, "an array of messages"),
  model: optional(NonEmpty),
  session_id: optional(NonEmpty.pipe(Schema.compose(maxChars(MAX_SESSION_ID)))),
  stream: optional(Bool)
})

/** What a chat turn asks, ready for the intern. */
export interface ChatTurn {
  readonly model: string | undefined
  readonly sessionId: string | undefined
  /** System and developer messages, in order. */
  readonly system: ReadonlyArray<string>
  /** User and assistant messages, in order. */
  readonly turns: ReadonlyArray<Turn>
}

const textOf = (content: typeof ChatMessage.Type["content"], at: string): Either.Either<string, InvalidRequest> => {
  if (content === undefined || content === null) return Either.right("")
  if (typeof content === "string") return Either.right(content)
  const texts: Array<string> = []
  for (const [i, part] of content.entries()) {
    if (part.type !== "text" || part.text === undefined) {
      return Either.left(
        new InvalidRequest({
          message: `${at}.content[${i}]: intern chat takes text parts only, got '${part.type}'`,
          param: `${at}.content[${i}]`
        })
      )
    }
    texts.push(part.text)
  }
  return Either.right(texts.join(""))
}

const decode = decodeBody(InternChatRequest)

/** Validates a chat body. */
export const chatTurn = (body: unknown): Either.Either<ChatTurn, InvalidRequest> =>
  Either.gen(function*() {
    const request = yield* decode(body)
    if (request.stream === false) {
      return yield* Either.left(
        new InvalidRequest({
          message: "stream: intern chat answers as an event stream only (stream: true)",
          param: "stream"
        })
      )
    }
    const system: Array<string> = []
    const turns: Array<Turn> = []
    for (const [i, message] of request.messages.entries()) {
      const at = `messages[${i}]`
      if (message.role === "tool") {
        return yield* Either.left(
          new InvalidRequest({ message: `${at}.role: intern chat takes no tool messages`, param: `${at}.role` })
        )
      }
      const text = yield* textOf(message.content, at)
      if (message.role === "system" || message.role === "developer") {
        if (text !== "") system.push(text)
      } else {
        turns.push({ role: message.role, content: text })
      }
    }
    if (!turns.some((turn) => turn.role === "user" && turn.content !== "")) {
      return yield* Either.left(
        new InvalidRequest({ message: "messages: must hold a user message with text", param: "messages" })
      )
    }
    return { model: request.model, sessionId: request.session_id, system, turns }
  })
