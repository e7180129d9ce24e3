/**
 * Chatting with an intern: `POST /interns/{id}/chat/completions`, and what a daemon relays from its terminal. A turn
 * runs through the messages use case with the intern's model and its instructions as the system prompt, over the
 * session's conversation so far (kept in the store per `session_id`; a turn without one starts a session), streamed;
 * the Anthropic events that come back are translated into `chat.completion.chunk` objects as they arrive
 * (`InternChatChunks`). A completed turn (the user's messages and the answer) is appended to the session.
 *
 * `prepare` checks the caller and the request before anything is sent; `run` sends it. A route records the usage of a
 * request refused by `prepare`; the messages use case records that of every request it runs.
 */
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import type * as GatewayError from "../errors/GatewayError.js"
import { Conflict, InternalError, InvalidRequest } from "../errors/GatewayError.js"
import { MessagesService } from "../messages/MessagesService.js"
import type { RequestContext } from "../messages/RequestContext.js"
import type { JsonObject, StreamEvent } from "../messages/Wire.js"
import type { Intern } from "./Intern.js"
import { type InternCaller, visible } from "./InternCaller.js"
import * as InternChatChunks from "./InternChatChunks.js"
import { chatTurn } from "./InternChatRequest.js"
import * as InternIds from "./InternIds.js"
import { InternStore, type Turn } from "./InternStore.js"

/** A chat request: who asks, through which route, for which app. */
export interface ChatContext extends InternCaller {
  /** Method and pattern of the route (or the daemon's name for its relay), for the usage log. */
  readonly route: string
  readonly app: RequestContext["app"]
}

/** A checked turn, ready to send. */
export interface PreparedChat {
  readonly intern: Intern
  readonly sessionId: string
  readonly model: string
  /** The turn's user and assistant messages, appended to the session once answered. */
  readonly turns: ReadonlyArray<Turn>
  /** The Anthropic-shaped body of the messages use case. */
  readonly body: JsonObject
}

export interface InternChatShape {
  readonly prepare: (
    context: ChatContext,
    internId: string,
    body: unknown
  ) => Effect.Effect<PreparedChat, GatewayError.GatewayError>
  /**
   * Sends a prepared turn: the answer's chunks, the last with `session_id` and `usage`. It fails before the first
   * chunk only; a failure after that is an error chunk.
   */
  readonly run: (
    context: ChatContext,
    chat: PreparedChat
  ) => Effect.Effect<Stream.Stream<JsonObject>, GatewayError.GatewayError>
}

/** The intern chat use case. */
export class InternChat extends Context.Tag("@model-gateway/core/InternChat")<InternChat, InternChatShape>() {}

export interface InternChatOptions {
  /** Host names on which intern routes are refused (as for the other intern routes). */
  readonly regionalHostnames?: ReadonlyArray<string> | undefined
  /** `max_tokens` of each turn (default 4096; an endpoint with a lower limit gets its own). */
  readonly maxTokens?: number | undefined
  /** How many earlier turns of the session are sent with a new one (default 200). */
  readonly historyTurns?: number | undefined
}

/** The intern chat error vocabulary's 409: the intern is not running (yet, when it is on its way). */
const notReady = (intern: Intern): Conflict =>
  new Conflict({
    message: `Intern '${intern.id}' is not running (it is ${intern.status.replace("_", " ")}); provision it first`,
    reason: "intern_not_ready",
    retryable: intern.status === "queued" || intern.status === "provisioning"
  })

/** The event of one SSE frame of the messages use case (`event: ...\ndata: {...}\n\n`). */
const eventOf = (frame: string): StreamEvent | undefined => {
  const line = frame.startsWith("data: ") ? 0 : frame.indexOf("\ndata: ") + 1
  if (line === 0 && !frame.startsWith("data: ")) return undefined
  const start = line + "data: ".length
  const end = frame.indexOf("\n", start)
  try {
    return JSON.parse(frame.slice(start, end === -1 ? undefined : end)) as StreamEvent
  } catch {
    return undefined
  }
}

/** Builds the service from its ports. */
export const make = (options: InternChatOptions = {}) =>
  Effect.gen(function*() {
    const store = yield* InternStore
    const messages = yield* MessagesService
    const regional: ReadonlySet<string> = new Set((options.regionalHostnames ?? []).map((h) => h.toLowerCase()))
    const maxTokens = options.maxTokens ?? 4096
    const historyTurns = options.historyTurns ?? 200

    const prepare: InternChatShape["prepare"] = (context, internId, body) =>
      Effect.gen(function*() {
        const intern = yield* visible(store, regional, context, internId)
        if (intern.status !== "running") return yield* Effect.fail(notReady(intern))
        const turn = chatTurn(body)
        if (Either.isLeft(turn)) return yield* Effect.fail(turn.left)
        const model = turn.right.model ?? intern.model
        if (model === null) {
          return yield* Effect.fail(
            new InvalidRequest({
              message: `model: intern '${intern.id}' has no model; set one (PATCH /interns/${intern.id}) or send one`,
              param: "model"
            })
          )
        }
        const sessionId = turn.right.sessionId ?? (yield* InternIds.random("sess_"))
        const history = yield* store.conversation(intern.id, sessionId, historyTurns)
        const system = [intern.instructions ?? "", ...turn.right.system].filter((s) => s !== "").join("\n\n")
        const requestBody: JsonObject = {
          model,
          max_tokens: maxTokens,
          stream: true,
          messages: [...history, ...turn.right.turns].map((t) => ({ role: t.role, content: t.content })),
          session_id: sessionId
        }
        if (system !== "") requestBody.system = system
        return { intern, sessionId, model, turns: turn.right.turns, body: requestBody }
      })

    const run: InternChatShape["run"] = (context, chat) =>
      Effect.gen(function*() {
        const requestContext: RequestContext = {
          requestId: context.requestId,
          route: context.route,
          principal: context.principal,
          metadata: false,
          headers: {},
          app: context.app
        }
        const outcome = yield* messages.create(requestContext, chat.body)
        if (outcome._tag !== "Stream") {
          return yield* Effect.fail(new InternalError({ message: "the messages use case did not stream the answer" }))
        }
        const now = yield* Clock.currentTimeMillis
        const translator = InternChatChunks.make({
          id: `chatcmpl-${context.requestId.replace(/^req_/, "")}`,
          created: Math.floor(now / 1000),
          model: chat.model,
          sessionId: chat.sessionId
        })
        const save = Effect.flatMap(Clock.currentTimeMillis, (at) =>
          store.appendTurns(chat.intern.id, chat.sessionId, [
            ...chat.turns,
            { role: "assistant", content: translator.text() }
          ], at))
        const answer = Stream.mapConcat(outcome.frames, (frame) => {
          const event = eventOf(frame)
          return event === undefined ? [] : translator.push(event)
        })
        const last = Stream.unwrap(Effect.suspend(() => {
          const completed = translator.completed()
          const final = Stream.fromChunk(Chunk.unsafeFromArray([...translator.end()]))
          return completed ? Effect.as(save, final) : Effect.succeed(final)
        }))
        return Stream.concat(answer, last)
      })

    return InternChat.of({ prepare, run })
  })

/** The service, given InternStore and MessagesService. */
export const layer = (options: InternChatOptions = {}) => Layer.effect(InternChat, make(options))
