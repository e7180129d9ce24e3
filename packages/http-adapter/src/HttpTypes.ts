/**
 * The framework-neutral request and response the routes work on. Bindings (node:http, @effect/platform HttpApp, web
 * fetch) translate to and from them; routes never see a framework.
 */
import type { GatewayError, MessagesService, Progress } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

/** Header values as node gives them: lower-case names. */
export type Headers = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

/** The first value of a header. */
export const header = (headers: Headers, name: string): string | undefined => {
  const value = headers[name]
  return typeof value === "string" ? value : value?.[0]
}

export interface GatewayRequest {
  readonly method: string
  /** Path without the query string. */
  readonly path: string
  /** The query string without its `?` (empty when there is none). */
  readonly query?: string | undefined
  readonly headers: Headers
  /**
   * Reads the body, failing with PayloadTooLarge past the binding's limit, RequestTimeout when it stops arriving,
   * InvalidRequest when it cannot be read. Read only when a route needs it.
   */
  readonly body: Effect.Effect<Uint8Array, BodyError>
  /**
   * Reads the body with a limit of its own instead of the binding's (a route whose bodies may be larger, such as a
   * batch submission): PayloadTooLarge past `maxBytes`. Use it or `body`, once. A binding without it has only its own
   * limit.
   */
  readonly bodyUpTo?: ((maxBytes: number) => Effect.Effect<Uint8Array, BodyError>) | undefined
  /**
   * The request's id, when the binding made it (`newRequestId`): the dispatcher answers with it, so that a binding's
   * last-resort 500 (the handler died) tells the same id. The dispatcher makes one when it is absent.
   */
  readonly requestId?: string | undefined
  /**
   * Where the request has come to, made by a binding that tells of a request whose client went away before its answer
   * (the node binding: see core's `Progress`); the dispatcher and the use cases note in it as they go.
   */
  readonly progress?: Progress.Progress | undefined
}

/** A new request id, as the gateway makes them: `req_` and 32 hex digits (the `request-id` header, `request_id`). */
export const newRequestId = (): string => `req_${globalThis.crypto.randomUUID().replaceAll("-", "")}`

/** Why a request body could not be read. */
export type BodyError = GatewayError.PayloadTooLarge | GatewayError.InvalidRequest | GatewayError.RequestTimeout

export type GatewayBody =
  | { readonly _tag: "Text"; readonly text: string }
  | {
    readonly _tag: "Stream"
    readonly stream: Stream.Stream<string>
    /** The same frames as pulls opened in a scope (see `MessagesService.FramePull`): what the node binding writes. */
    readonly open?: Effect.Effect<MessagesService.FramePull, never, Scope.Scope> | undefined
    /** The same frames without a scope, released by the binding (see `Outcome`'s `claim`). */
    readonly claim?: Effect.Effect<MessagesService.ClaimedFrames> | undefined
  }
  | {
    readonly _tag: "Bytes"
    /**
     * Opens a binary body (raw audio, say) in a scope: each pull gives the next bytes as they arrive, `undefined` at the
     * end. A failure means the body was cut short after it had started: bindings end the answer as broken (the
     * connection dropped, the stream errored), never as a complete body. Closing the scope releases the source.
     */
    readonly open: Effect.Effect<BytePull, never, Scope.Scope>
  }
  | { readonly _tag: "Empty" }

/** The next bytes of a binary body, or `undefined` at its end; a failure cuts it short. */
export type BytePull = Effect.Effect<Uint8Array | undefined, unknown>

/** A binary body as a `Stream`, for bindings that take one (fetch, HttpApp); a failure fails the stream. */
export const bytesOf = (open: Effect.Effect<BytePull, never, Scope.Scope>): Stream.Stream<Uint8Array, unknown> =>
  Stream.unwrapScoped(Effect.map(open, (pull) =>
    Stream.repeatEffectOption(
      Effect.flatMap(
        Effect.mapError(pull, Option.some),
        (bytes) => (bytes === undefined ? Effect.fail(Option.none()) : Effect.succeed(bytes))
      )
    )))

export interface GatewayResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: GatewayBody
}
