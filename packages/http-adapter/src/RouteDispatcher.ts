/**
 * A route table as a request handler. The dispatcher matches the path, answers an unknown path (404) and a wrong
 * method (405, with `Allow`) itself, checks the key against the route's access level, reads what the route declares
 * (the `x-session-id` header, a JSON body), runs the handler, and turns its failures into the error body of the
 * route's family. A request it refuses before any handler runs is recorded in the usage log here; a request that
 * reached a handler is recorded by its use case.
 */
import { GatewayError, JsonSource, JsonText, Keys, UsageLog } from "@model-gateway/core"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ApiKeys from "./ApiKeys.js"
import * as ErrorResponses from "./ErrorResponses.js"
import type { GatewayRequest, GatewayResponse } from "./HttpTypes.js"
import { header, newRequestId } from "./HttpTypes.js"
import * as RequestHeaders from "./RequestHeaders.js"
import * as RouteTable from "./RouteTable.js"

/** What the dispatcher itself needs, besides its routes' requirements. */
export type Requirements = Keys.Keys | UsageLog.UsageLog

/** Refuses what is not UTF-8: a body whose text is exactly its bytes can be forwarded as those bytes (`JsonSource`). */
const strictDecoder = new TextDecoder("utf-8", { fatal: true })
/** A body that is not UTF-8 is still read as JSON parses it elsewhere: each bad sequence a replacement character. */
const decoder = new TextDecoder()

const decode = (bytes: Uint8Array): { readonly text: string; readonly exact: boolean } => {
  try {
    return { text: strictDecoder.decode(bytes), exact: true }
  } catch {
    return { text: decoder.decode(bytes), exact: false }
  }
}

/**
 * From this size a body is parsed in pieces (`JsonText.parse`): its text as one string could exceed V8's 128 KB, from
 * which each string costs fresh pages (a character beyond Latin-1 makes it two bytes a character).
 */
const PIECES_FROM = 64 * 1024

/** A piece's decoder keeps a byte-order mark it meets: stripping one would let a stray mark inside a text pass. */
const pieceDecoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })
const decodePiece: JsonText.Decode = (bytes, start, end) => pieceDecoder.decode(bytes.subarray(start, end))

/** A large object body parsed in pieces, its source recorded; undefined for a text the walk does not follow. */
const inPieces = (bytes: Uint8Array): unknown => {
  try {
    const { fields, value } = JsonText.parse(bytes, decodePiece)
    JsonSource.record(value, bytes, fields, parseAgain)
    return value
  } catch {
    return undefined
  }
}

/**
 * A body's text parsed again as it was the first time, and recorded in turn: for a request that let go of its
 * conversation once sent (`JsonSource.reparser`, core's `Conversation`), when a fallback needs the body. Its bytes
 * were parsed already, so this does not fail.
 */
const parseAgain: JsonSource.Parse = (bytes) => {
  if (bytes.byteLength >= PIECES_FROM) {
    const parsed = inPieces(bytes)
    if (parsed !== undefined) return parsed as object
  }
  const parsed = JSON.parse(strictDecoder.decode(bytes)) as object
  JsonSource.record(parsed, bytes, undefined, parseAgain)
  return parsed
}

/**
 * A JSON request body, parsed; a clear 400 for the wrong content type or malformed JSON. An object's bytes are recorded
 * as its source (`JsonSource`): the body forwarded upstream is then spliced from them rather than serialised again.
 */
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
  const encoding = header(request.headers, "content-encoding")?.trim().toLowerCase()
  if (encoding !== undefined && encoding !== "" && encoding !== "identity") {
    return Either.left(
      new GatewayError.InvalidRequest({
        message: `Content-Encoding ${encoding} is not supported: send the request body uncompressed`
      })
    )
  }
  try {
    if (bytes.byteLength >= PIECES_FROM) {
      const parsed = inPieces(bytes)
      if (parsed !== undefined) return Either.right(parsed)
    }
    const { exact, text } = decode(bytes)
    const parsed: unknown = JSON.parse(text)
    if (exact && typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) {
      JsonSource.record(parsed, bytes, undefined, parseAgain)
    }
    return Either.right(parsed)
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

const invalidKey = () => new GatewayError.Unauthenticated({ message: "Invalid API key" })

const managementOnly = () =>
  new GatewayError.PermissionDenied({ message: "Only management keys can perform this operation" })

/** What is known of a request refused before any handler ran (or answered without a model, see `Recorded`). */
export interface Refused {
  readonly request: GatewayRequest
  readonly requestId: string
  /** Method and pattern, or method and path for an unknown path. */
  readonly route: string
  readonly status: number
  readonly errorType: string | null
  readonly principal: Keys.Principal | undefined
  readonly sessionId: string | undefined
  readonly createdAt: number
  readonly latencyMs: number
}

/** The usage record of a request refused before any handler ran: no model, no tokens, no attempt. */
export const refusal = (
  { createdAt, errorType, latencyMs, principal, request, requestId, route, sessionId, status }: Refused
): UsageLog.UsageRecord => {
  const app = RequestHeaders.app(request.headers)
  return {
    requestId,
    createdAt,
    route,
    keyId: principal?.keyId ?? null,
    workspace: principal?.workspace ?? null,
    model: null,
    provider: null,
    endpointId: null,
    stream: false,
    status,
    errorType,
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    cost: "0",
    latencyMs,
    ttfbMs: null,
    attempts: 0,
    sessionId: sessionId ?? null,
    user: null,
    appReferer: app.referer ?? null,
    appTitle: app.title ?? null,
    appCategories: app.categories ?? null,
    metadata: null
  }
}

/** Past this many characters, the path of an unknown route is cut in its usage record (clients choose it). */
const MAX_RECORDED_PATH = 256

/** A path no route matches, as its usage record (and its line) shows it: cut when long. */
export const recordedPath = (path: string): string =>
  path.length > MAX_RECORDED_PATH ? `${path.slice(0, MAX_RECORDED_PATH)}…` : path

/** A 404 or 405: answered and recorded before any route is chosen. */
const unmatched = <R>(
  table: RouteTable.Table<R>,
  request: GatewayRequest,
  requestId: string,
  entry: RouteTable.PathEntry<R> | undefined
): Effect.Effect<GatewayResponse, never, UsageLog.UsageLog> => {
  const { method, path } = request
  const response = entry === undefined
    ? ErrorResponses.of(table.familyOf(path))(
      new GatewayError.NotFound({ message: `No route for ${method} ${path}` }),
      requestId
    )
    : ErrorResponses.methodNotAllowed(entry.family, method, path, entry.allow, requestId)
  const shown = entry !== undefined ? entry.pattern : recordedPath(path)
  const errorType = entry === undefined ? "not_found_error" : "invalid_request_error"
  return Effect.clockWith((clock) =>
    Effect.flatMap(UsageLog.UsageLog, (log) => {
      const now = clock.unsafeCurrentTimeMillis()
      const record = refusal({
        request,
        requestId,
        route: `${method} ${shown}`,
        status: response.status,
        errorType,
        principal: undefined,
        sessionId: undefined,
        createdAt: now,
        latencyMs: 0
      })
      return Effect.as(log.record(record), response)
    })
  )
}

/** A matched request on its way through the checks to its handler. */
interface Dispatch<R> {
  readonly compiled: RouteTable.Compiled<R>
  readonly family: RouteTable.Family
  readonly request: GatewayRequest
  readonly requestId: string
  readonly params: RouteTable.Params
  readonly services: Context.Context<R | Requirements>
  readonly clock: Clock.Clock
  readonly started: number
}

/** Answers a request refused before its handler, in its route's error body, and records it. */
const refuse = <R>(
  d: Dispatch<R>,
  error: GatewayError.GatewayError,
  principal?: Keys.Principal,
  sessionId?: string
): Effect.Effect<GatewayResponse> => {
  const response = ErrorResponses.of(d.family)(error, d.requestId)
  const record = refusal({
    request: d.request,
    requestId: d.requestId,
    route: d.compiled.name,
    status: response.status,
    errorType: GatewayError.describe(error).type,
    principal,
    sessionId,
    createdAt: d.started,
    latencyMs: d.clock.unsafeCurrentTimeMillis() - d.started
  })
  return Effect.as(Context.get(d.services, UsageLog.UsageLog).record(record), response)
}

/** Runs the handler; its failures become the family's error body (its use case has recorded them). */
const handle = <R>(
  d: Dispatch<R>,
  principal: Keys.Principal | undefined,
  sessionId: string | undefined,
  body: unknown,
  bodyBytes: number
): Effect.Effect<GatewayResponse, never, R> =>
  Effect.catchAll(
    d.compiled.handler({
      request: d.request,
      requestId: d.requestId,
      route: d.compiled.name,
      params: d.params,
      query: RouteTable.parseQuery(d.request.query),
      body,
      bodyBytes,
      sessionId,
      principal,
      services: d.services
    }),
    (error) => Effect.succeed(ErrorResponses.of(d.family)(error, d.requestId))
  )

/** Whether a JSON body gives its own `session_id`, which wins over the `x-session-id` header (spec 2.1, 2.3). */
const hasSessionId = (body: unknown): boolean =>
  body !== null && typeof body === "object" && (body as { session_id?: unknown }).session_id != null

/**
 * After the key: the session id header and the body, when the route reads them, then the handler. A header too long
 * is refused unless the body gives its own session id, which wins: then the header is not read at all.
 */
const serve = <R>(d: Dispatch<R>, principal: Keys.Principal | undefined): Effect.Effect<GatewayResponse, never, R> => {
  const route = d.compiled.route
  let sessionId: string | undefined
  let badHeader: GatewayError.InvalidRequest | undefined
  if (route.session === true) {
    const checked = RequestHeaders.sessionId(d.request.headers)
    if (Either.isLeft(checked)) {
      if (route.body !== "json") return refuse(d, checked.left, principal)
      badHeader = checked.left
    } else sessionId = checked.right
  }
  if (route.body !== "json") return handle(d, principal, sessionId, undefined, 0)
  return Effect.matchEffect(d.request.body, {
    onFailure: (error) => refuse(d, error, principal, sessionId),
    onSuccess: (bytes) => {
      const body = jsonBodyOf(d.request, bytes)
      if (Either.isLeft(body)) return refuse(d, body.left, principal, sessionId)
      if (badHeader !== undefined && !hasSessionId(body.right)) return refuse(d, badHeader, principal)
      return handle(d, principal, sessionId, body.right, bytes.byteLength)
    }
  })
}

/** The key, as the route's access level asks: none, any valid key, or a management key. */
const authorize = <R>(d: Dispatch<R>): Effect.Effect<GatewayResponse, never, R> => {
  const access = d.compiled.route.access
  if (access === "public") return serve(d, undefined)
  const secret = ApiKeys.credential(d.request.headers)
  if (secret === undefined) return refuse(d, missingKey())
  return Effect.flatMap(Context.get(d.services, Keys.Keys).authenticate(ApiKeys.digest(secret)), (principal) => {
    if (Option.isNone(principal)) return refuse(d, invalidKey())
    const progress = d.request.progress
    if (progress !== undefined) progress.principal = principal.value
    if (access === "management" && !principal.value.management) return refuse(d, managementOnly(), principal.value)
    return serve(d, principal.value)
  })
}

/**
 * The request handler of a route table. Each check answers a refusal itself (continuation style, rather than a chain
 * that fails and is caught), so that only a handler's failures go unrecorded here, and the hot path takes no more
 * Effect steps than it needs: one to read the fiber's services and clock, the key look-up, the body, the handler.
 */
export const make = <R>(
  table: RouteTable.Table<R>
): (request: GatewayRequest) => Effect.Effect<GatewayResponse, never, R | Requirements> =>
(request) => {
  const requestId = request.requestId ?? newRequestId()
  const found = table.find(request.path)
  if (found === undefined) return unmatched(table, request, requestId, undefined)
  const entry = found.handler
  const compiled = entry.methods.get(request.method)
  if (compiled === undefined) return unmatched(table, request, requestId, entry)
  // One step for the services and the clock: `Effect.contextWithEffect` inside `Effect.clockWith` takes three.
  return Effect.withFiberRuntime((fiber) => {
    const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    const started = clock.unsafeCurrentTimeMillis()
    if (request.progress !== undefined) request.progress.started = started
    return authorize({
      compiled,
      family: entry.family,
      request,
      requestId,
      params: found.params,
      services: fiber.currentContext as Context.Context<R | Requirements>,
      clock,
      started
    })
  })
}

/**
 * The route family of a request's path: its route's, or for a path no route matches the one its 404 has. For the
 * answer a binding gives when the handler dies (`ErrorResponses.internalError`).
 */
export const familyOf = <R>(table: RouteTable.Table<R>, path: string): RouteTable.Family =>
  table.find(path)?.handler.family ?? table.familyOf(path)
