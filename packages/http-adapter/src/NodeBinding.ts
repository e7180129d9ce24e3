/**
 * The `node:http` binding: a request listener driven by one prebuilt runtime. This is the hot path of the example
 * server: no router framework, no per-request layers, the body read only when a route asks for it (`NodeRequest`), and
 * stream frames written as they come with back-pressure (`NodeResponse`). A client that goes away interrupts the
 * request's fiber, which aborts the upstream request; one that went away before any answer leaves a log line (499).
 */
import { Progress } from "@model-gateway/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import type * as ManagedRuntime from "effect/ManagedRuntime"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { GatewayRequest, Handler, HandlerRequirements } from "./GatewayHttp.js"
import { internalError } from "./GatewayHttp.js"
import { newRequestId } from "./HttpTypes.js"
import { BODY_IDLE_MS, collectBody, DEFAULT_MAX_BODY_BYTES, describe, readAhead, readBody } from "./NodeRequest.js"
import { writeResponse } from "./NodeResponse.js"

export { BODY_IDLE_MS, DEFAULT_MAX_BODY_BYTES } from "./NodeRequest.js"
export { LINGER_BYTES, LINGER_MS, writeResponse } from "./NodeResponse.js"

export interface NodeOptions {
  /** Largest accepted request body in bytes; larger gets 413. Default 32 MiB. */
  readonly maxBodyBytes?: number | undefined
  /** A prefix the embedding server mounts the gateway under, stripped before routing (e.g. `/gateway`). */
  readonly mountPath?: string | undefined
  /** How long a refused upload is read and discarded before its connection closes (default `LINGER_MS`). */
  readonly lingerMs?: number | undefined
  /** How many more bytes of it at most (default `LINGER_BYTES`). */
  readonly lingerBytes?: number | undefined
  /**
   * How long a request body may stop arriving (no byte for this long) before the request is answered 408 and its
   * connection closed (default `BODY_IDLE_MS`).
   */
  readonly bodyIdleMs?: number | undefined
}

/** Adapts node's request to the gateway's description; the body is read when the handler asks for it. */
export const toGatewayRequest = (req: IncomingMessage, options: NodeOptions = {}): GatewayRequest => {
  const idleMs = options.bodyIdleMs ?? BODY_IDLE_MS
  return describe(
    req,
    options,
    readBody(req, options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES, idleMs),
    (limit) => readBody(req, limit, idleMs)
  )
}

/**
 * Bodies up to this size, when their length is declared, are read before the request's fiber starts. That spares
 * the fiber a suspension on the body (an `Effect.async`, a scheduler hop) on every ordinary request. Larger or
 * chunked bodies are read when the handler asks, after the key check, so that an unauthenticated client cannot make
 * the gateway buffer up to the body limit.
 */
const READ_AHEAD_BYTES = 256 * 1024

/**
 * A `node:http` request listener for the gateway. `runtime` is built once by the composition root
 * and provides everything the handler needs.
 */
export const makeListener = <E>(
  runtime: ManagedRuntime.ManagedRuntime<HandlerRequirements, E>,
  handler: Handler,
  options: NodeOptions = {}
) => {
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
  const idleMs = options.bodyIdleMs ?? BODY_IDLE_MS
  const readAheadLimit = Math.min(limit, READ_AHEAD_BYTES)
  const serve = (
    req: IncomingMessage,
    res: ServerResponse,
    body: GatewayRequest["body"],
    bodyUpTo: NonNullable<GatewayRequest["bodyUpTo"]>
  ): void => {
    // The id is made here rather than by the dispatcher, so that the answer to a defect can tell it too.
    const requestId = newRequestId()
    const request = describe(req, options, body, bodyUpTo, requestId, new Progress.Progress())
    const fiber = runtime.runFork(
      Effect.flatMap(handler(request), (response) => writeResponse(res, response, req, options))
    )
    // A defect (the handler cannot fail otherwise) still gets an answer: a 500 in the error body of the route's family,
    // with the request's id. Watched from outside the fiber rather than with `catchAllDefect`, which would add Effect
    // steps to every request for what should never happen. So is an interruption (the client went away): one before
    // any answer leaves its log line, from the request's progress (`handler.abandoned`).
    fiber.addObserver((exit) => {
      if (Exit.isSuccess(exit)) return
      if (Cause.isInterruptedOnly(exit.cause)) {
        if (!res.headersSent && handler.abandoned !== undefined) runtime.runFork(handler.abandoned(request, requestId))
        return
      }
      if (!res.headersSent) {
        const response = internalError(handler, request, requestId)
        res.writeHead(response.status, response.headers)
        res.end(response.body._tag === "Text" ? response.body.text : undefined)
      } else res.destroy()
      runtime.runFork(Effect.logError("request failed", exit.cause))
    })
    res.on("close", () => {
      if (!res.writableFinished) fiber.unsafeInterruptAsFork(FiberId.none)
    })
  }
  return (req: IncomingMessage, res: ServerResponse): void => {
    const declared = req.headers["content-length"]
    const length = declared === undefined ? NaN : Number(declared)
    if (req.method === "POST" && length >= 0 && length <= readAheadLimit) {
      // Read ahead. Nothing is served when the request errs or closes before its end: the client is gone (an error
      // on the request means its socket was destroyed), and there is nobody to answer. A body that stopped arriving
      // is answered (408) by the route, which finds the failure when it reads the body.
      collectBody(
        req,
        readAheadLimit,
        idleMs,
        (bytes) => {
          const { body, bodyUpTo } = readAhead(bytes)
          serve(req, res, body, bodyUpTo)
        },
        (error) => {
          if (error._tag === "RequestTimeout") serve(req, res, Effect.fail(error), () => Effect.fail(error))
        }
      )
    } else {
      serve(req, res, readBody(req, limit, idleMs), (routeLimit) => readBody(req, routeLimit, idleMs))
    }
  }
}
