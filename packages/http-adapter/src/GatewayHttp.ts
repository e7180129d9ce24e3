/**
 * The gateway's routes as Effects over a small framework-neutral request/response description.
 * Bindings (node:http, @effect/platform HttpApp, web fetch) translate to and from it; the routes
 * never see a framework. Everything that can be built once is built in `makeHandler`.
 */
import { GatewayError, Keys, type MessagesService as MessagesServiceModule } from "@model-gateway/core"
import { MessagesService } from "@model-gateway/core"
import type { Scope, Stream } from "effect"
import { Context, Effect, Either, Option } from "effect"
import * as ErrorResponses from "./ErrorResponses.js"

/** Header values as node gives them: lower-case names. */
export type Headers = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

export interface GatewayRequest {
  readonly method: string
  /** Path without the query string. */
  readonly path: string
  readonly headers: Headers
  /** Reads the body, failing with PayloadTooLarge past the binding's limit. Read only when a route needs it. */
  readonly body: Effect.Effect<Uint8Array, GatewayError.PayloadTooLarge | GatewayError.InvalidRequest>
}

export type GatewayBody =
  | { readonly _tag: "Text"; readonly text: string }
  | {
    readonly _tag: "Stream"
    readonly stream: Stream.Stream<string>
    /** The same frames as pulls opened in a scope (see `MessagesService.FramePull`): what the node binding writes. */
    readonly open?: Effect.Effect<MessagesServiceModule.FramePull, never, Scope.Scope> | undefined
  }
  | { readonly _tag: "Empty" }

export interface GatewayResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: GatewayBody
}

export interface HandlerOptions {
  /** Path prefix of the API, `/v1` by default. */
  readonly basePath?: string | undefined
}

export type Handler = (request: GatewayRequest) => Effect.Effect<GatewayResponse, never, HandlerRequirements>
export type HandlerRequirements = Keys.Keys | MessagesService.MessagesService

const header = (headers: Headers, name: string): string | undefined => {
  const value = headers[name]
  return typeof value === "string" ? value : value?.[0]
}

/** The API key from `Authorization: Bearer <key>` or `x-api-key: <key>`. */
export const credential = (headers: Headers): string | undefined => {
  const authorization = header(headers, "authorization")
  if (authorization !== undefined) {
    const match = /^Bearer\s+(.+)$/i.exec(authorization.trim())
    if (match !== null) return match[1].trim()
  }
  const apiKey = header(headers, "x-api-key")
  return apiKey === undefined || apiKey.trim() === "" ? undefined : apiKey.trim()
}

const METADATA_HEADERS = ["x-service-metadata", "x-service-experimental-metadata", "x-openrouter-metadata"]

const wantsMetadata = (headers: Headers): boolean =>
  METADATA_HEADERS.some((name) => header(headers, name)?.toLowerCase() === "enabled")

const newRequestId = (): string => `req_${globalThis.crypto.randomUUID().replaceAll("-", "")}`

const JSON_HEADERS = { "content-type": "application/json" } as const

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  "x-accel-buffering": "no"
} as const

const decoder = new TextDecoder()

/** A JSON request body, parsed; a clear 400 for the wrong content type or malformed JSON. */
export const jsonBodyOf = (
  request: GatewayRequest,
  bytes: Uint8Array
): Either.Either<unknown, GatewayError.InvalidRequest> => {
  const contentType = header(request.headers, "content-type")
  if (contentType === undefined || !/^application\/([\w.+-]*\+)?json\b/i.test(contentType.trim())) {
    return Either.left(
      new GatewayError.InvalidRequest({
        message: `Content-Type must be application/json (got ${contentType ?? "none"})`
      })
    )
  }
  try {
    return Either.right(JSON.parse(decoder.decode(bytes)) as unknown)
  } catch (e) {
    return Either.left(
      new GatewayError.InvalidRequest({ message: `Malformed JSON in request body: ${(e as Error).message}` })
    )
  }
}

const missingKey = () =>
  new GatewayError.Unauthenticated({
    message: "Missing API key: send Authorization: Bearer <key> or x-api-key: <key>"
  })

const authenticateWith = (keys: Keys.Keys["Type"], headers: Headers) => {
  const secret = credential(headers)
  if (secret === undefined) return Effect.fail(missingKey())
  return Effect.flatMap(keys.authenticate(secret), (principal) =>
    Option.isSome(principal)
      ? Effect.succeed(principal.value)
      : Effect.fail(new GatewayError.Unauthenticated({ message: "Invalid API key" })))
}

/** Authenticates the request's key. */
export const authenticate = (headers: Headers) => Effect.flatMap(Keys.Keys, (keys) => authenticateWith(keys, headers))

/** The use case's context for a request: who asked, and what the headers say. */
const contextOf = (
  request: GatewayRequest,
  requestId: string,
  principal: Keys.Principal,
  sessionId: string | undefined,
  bytes: Uint8Array
): MessagesServiceModule.RequestContext => ({
  requestId,
  principal,
  sessionId,
  bodyBytes: bytes.byteLength,
  metadata: wantsMetadata(request.headers),
  headers: {
    anthropicVersion: header(request.headers, "anthropic-version"),
    anthropicBeta: header(request.headers, "anthropic-beta")
  },
  app: {
    referer: header(request.headers, "http-referer") ?? header(request.headers, "referer"),
    title: header(request.headers, "x-openrouter-title") ?? header(request.headers, "x-title"),
    categories: header(request.headers, "x-openrouter-categories")
  }
})

// Literals rather than `{ ...JSON_HEADERS, ...headers }`: a spread object given new keys is slow on V8 11 (Node 20).
const responseOf = (outcome: MessagesServiceModule.MessagesOutcome, requestId: string): GatewayResponse =>
  outcome._tag === "Json"
    ? {
      status: 200,
      headers: { "content-type": JSON_HEADERS["content-type"], "request-id": requestId },
      body: { _tag: "Text", text: JSON.stringify(outcome.body) }
    }
    : {
      status: 200,
      headers: {
        "content-type": SSE_HEADERS["content-type"],
        "cache-control": SSE_HEADERS["cache-control"],
        "x-accel-buffering": SSE_HEADERS["x-accel-buffering"],
        "request-id": requestId
      },
      body: { _tag: "Stream", stream: outcome.frames, open: outcome.open }
    }

// Key, session id, body, use case, in that order. A chain of flatMaps rather than `Effect.gen`, whose generator and
// adapter cost a few µs per request on this path; both services are taken from one read of the context.
const messages = (request: GatewayRequest, requestId: string) =>
  Effect.contextWithEffect((services: Context.Context<HandlerRequirements>) =>
    Effect.flatMap(authenticateWith(Context.get(services, Keys.Keys), request.headers), (principal) => {
      const sessionId = header(request.headers, "x-session-id")
      if (sessionId !== undefined && [...sessionId].length > 256) {
        return Effect.fail(
          new GatewayError.InvalidRequest({
            message: `x-session-id: must be at most 256 characters, got ${[...sessionId].length}`,
            param: "x-session-id"
          })
        )
      }
      return Effect.flatMap(request.body, (bytes) => {
        const body = jsonBodyOf(request, bytes)
        if (Either.isLeft(body)) return Effect.fail(body.left)
        const context = contextOf(request, requestId, principal, sessionId, bytes)
        return Effect.map(
          Context.get(services, MessagesService.MessagesService).create(context, body.right),
          (outcome) => responseOf(outcome, requestId)
        )
      })
    })
  ).pipe(
    Effect.catchAll((error) => Effect.succeed(ErrorResponses.messages(error, requestId)))
  )

/** Builds the gateway's request handler. */
export const makeHandler = (options: HandlerOptions = {}): Handler => {
  const base = (options.basePath ?? "/v1").replace(/\/+$/, "")
  const messagesPath = `${base}/messages`
  return (request) => {
    const requestId = newRequestId()
    const path = request.path.length > 1 && request.path.endsWith("/") ? request.path.slice(0, -1) : request.path
    if (path === messagesPath) {
      if (request.method !== "POST") return Effect.succeed(ErrorResponses.methodNotAllowed("POST", requestId))
      return messages(request, requestId)
    }
    if (path === "/health" || path === `${base}/health`) {
      return Effect.succeed({
        status: 200,
        headers: JSON_HEADERS,
        body: { _tag: "Text", text: "{\"status\":\"ok\"}" }
      })
    }
    return Effect.succeed(
      ErrorResponses.generic(
        new GatewayError.NotFound({ message: `No route for ${request.method} ${path}` }),
        requestId
      )
    )
  }
}
