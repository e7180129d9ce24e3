/**
 * OpenAI chat completions served by an Anthropic-protocol provider: the chat body translated into a Messages request
 * (`ChatRequest`), the message or its stream of events translated back into a `chat.completion` or
 * `chat.completion.chunk`s as each event arrives (`ChatAnswer`). Other OpenAI-protocol APIs (embeddings, responses)
 * are `unsupported` here, so the executor tries the next endpoint.
 */
import { OutputCap, PullUntil, Upstream, type Wire } from "@model-gateway/core"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Scope from "effect/Scope"
import * as ChatTranslate from "./ChatTranslate.js"

/** The Messages calls of an Anthropic adapter. */
export interface MessagesCalls {
  readonly createMessage: (call: Upstream.MessagesCall) => Effect.Effect<Wire.Message, Upstream.UpstreamError>
  readonly streamMessage: (
    call: Upstream.MessagesCall
  ) => Effect.Effect<Upstream.EventPull, Upstream.UpstreamError, Scope.Scope>
}

/**
 * The APIs an Anthropic-protocol provider serves: its own Messages API, and chat completions translated here. The
 * gateway's catalogue gives them to the provider's endpoints (`Endpoint.apis`), so that the route planner leaves them
 * out of the others' plans.
 */
export const APIS: ReadonlyArray<string> = ["messages", "chat"]

const unsupported = (call: Upstream.OpenAiCall) =>
  new Upstream.UpstreamError({
    kind: "unsupported",
    message: `an Anthropic-protocol provider cannot serve the OpenAI ${call.api} API`
  })

const NO_HEADERS: Upstream.ForwardHeaders = {}

/**
 * The client's headers the translated call forwards: its `anthropic-beta` (features such as a longer context), not its
 * `anthropic-version`: the translation, not the client, decides the shape of the Messages request, so the adapter's
 * own version is sent.
 */
const forwarded = (call: Upstream.OpenAiCall): Upstream.ForwardHeaders =>
  call.headers.anthropicBeta === undefined ? NO_HEADERS : { anthropicBeta: call.headers.anthropicBeta }

/** The arrays of a translated request that hold its conversation: made by the translation, shared with nothing. */
const CONVERSATION = ["messages", "tools", "system"] as const

/**
 * The chat call as a Messages call. Once the Messages adapter has made its text, the translation is emptied (it is
 * this adapter's own, held wherever the Messages call is, for as long as the answer is awaited) and the caller is told
 * that the client's body may go too (`OpenAiCall.bodyMade`).
 */
const translated = (call: Upstream.OpenAiCall, stream: boolean) =>
  Either.map(
    ChatTranslate.toMessagesRequest(call.body, {
      upstreamModel: call.endpoint.upstreamModel,
      stream,
      // Anthropic requires `max_tokens`: without the client's, the default the limits reserve.
      defaultMaxTokens: OutputCap.defaultFor(call.endpoint)
    }),
    (body): Upstream.MessagesCall => ({
      endpoint: call.endpoint,
      body,
      headers: forwarded(call),
      bodyMade: () => {
        for (const key of CONVERSATION) {
          const value = body[key]
          if (Array.isArray(value)) value.length = 0
        }
        call.bodyMade?.()
      }
    })
  )

/**
 * The first content of a Messages stream, as the Messages API's callers judge it: what the events before it give a
 * chat client (its role chunk) is not content either.
 */
const isContentEvent = (event: Wire.StreamEvent): boolean =>
  event.type === "content_block_delta" || event.type === "message_stop"

const presentation = (call: Upstream.OpenAiCall) => {
  const reasoning = call.body.reasoning as { exclude?: unknown } | null | undefined
  return {
    model: String(call.body.model ?? call.endpoint.upstreamModel),
    created: Math.floor(Date.now() / 1000),
    includeReasoning: reasoning?.exclude !== true
  }
}

/** `createOpenAi` and `streamOpenAi` over an adapter's Messages calls. */
export const make = (calls: MessagesCalls) => ({
  createOpenAi: (call: Upstream.OpenAiCall): Effect.Effect<Wire.JsonObject, Upstream.UpstreamError> => {
    if (!APIS.includes(call.api)) return Effect.fail(unsupported(call))
    return Effect.flatMap(
      translated(call, false),
      (messagesCall) =>
        Effect.map(
          calls.createMessage(messagesCall),
          (message) => ChatTranslate.toChatCompletion(message, presentation(call))
        )
    )
  },
  streamOpenAi: (call: Upstream.OpenAiCall): Effect.Effect<Upstream.JsonPull, Upstream.UpstreamError, Scope.Scope> => {
    if (!APIS.includes(call.api)) return Effect.fail(unsupported(call))
    // The closures below refer to `shown`, not to `call`: one holding the call would hold its body (the whole
    // conversation) for as long as the stream is open.
    const shown = presentation(call)
    return Effect.flatMap(
      translated(call, true),
      (messagesCall) =>
        Effect.map(calls.streamMessage(messagesCall), (pull) => {
          // The gateway always asks for usage (it bills it); a client that did not ask does not get the usage chunk.
          const translator = ChatTranslate.makeChunkTranslator({
            ...shown,
            id: `chatcmpl-${globalThis.crypto.randomUUID().replaceAll("-", "")}`,
            includeUsage: true
          })
          let ended = false
          const translate = (
            events: Chunk.Chunk<Wire.StreamEvent> | undefined
          ): Effect.Effect<Chunk.Chunk<Wire.JsonObject> | undefined, Upstream.UpstreamError> => {
            if (events === undefined) {
              if (ended) return Effect.succeed(undefined)
              ended = true
              return Either.match(translator.end(), {
                onLeft: Effect.fail,
                onRight: (chunks) => Effect.succeed(chunks.length === 0 ? undefined : Chunk.unsafeFromArray(chunks))
              })
            }
            const out: Array<Wire.JsonObject> = []
            for (const event of events) {
              const chunks = translator.push(event)
              if (Either.isLeft(chunks)) return Effect.fail(chunks.left)
              for (const chunk of chunks.right) out.push(chunk)
            }
            return Effect.succeed(Chunk.unsafeFromArray(out))
          }
          const next: Upstream.JsonPull = Effect.flatMap(pull, translate)
          // Pulled until its first content as the Messages stream is (see `PullUntil`): the stream's deadline for it
          // (`Timeouts.firstContentMs`) and what its idle time-out counts after it (`idleMs`) are the Messages
          // stream's. The chat chunks' own test of content is the caller's, on what this gives.
          const until = PullUntil.untilOf(pull)
          return until === undefined
            ? next
            : PullUntil.withUntil(next, () => Effect.flatMap(until(isContentEvent), translate))
        })
    )
  }
})
