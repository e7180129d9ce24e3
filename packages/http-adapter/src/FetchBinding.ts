/**
 * The web-standard binding: `(Request) => Promise<Response>`, for Hono, Next.js route handlers,
 * Bun, Deno or Workers. An aborted request signal interrupts the handler and so the upstream; one aborted before the
 * answer leaves a log line (499), as with the node binding.
 */
import { GatewayError, Progress } from "@model-gateway/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as ManagedRuntime from "effect/ManagedRuntime"
import * as Runtime from "effect/Runtime"
import * as Stream from "effect/Stream"
import type { GatewayRequest, GatewayResponse, Handler, HandlerRequirements } from "./GatewayHttp.js"
import { internalError } from "./GatewayHttp.js"
import { bytesOf, newRequestId } from "./HttpTypes.js"

export interface FetchOptions {
  /** Largest accepted request body in bytes; default 32 MiB. */
  readonly maxBodyBytes?: number | undefined
  /** A prefix stripped before routing, when the handler is mounted under a path. */
  readonly mountPath?: string | undefined
}

const readBody = (request: Request, limit: number) =>
  Effect.tryPromise({
    try: async () => {
      const declared = Number(request.headers.get("content-length"))
      if (Number.isFinite(declared) && declared > limit) throw "too-large"
      if (request.body === null) return new Uint8Array()
      const reader = request.body.getReader()
      const chunks: Array<Uint8Array> = []
      let size = 0
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        size += value.byteLength
        if (size > limit) {
          await reader.cancel()
          throw "too-large"
        }
        chunks.push(value)
      }
      const out = new Uint8Array(size)
      let offset = 0
      for (const c of chunks) {
        out.set(c, offset)
        offset += c.byteLength
      }
      return out
    },
    catch: (e) =>
      e === "too-large"
        ? new GatewayError.PayloadTooLarge({ message: `Request body exceeds the limit of ${limit} bytes` })
        : new GatewayError.InvalidRequest({ message: `Could not read request body: ${String(e)}` })
  })

/** Adapts a web Request to the gateway's description, with the id and the progress the binding made for it, if any. */
export const toGatewayRequest = (
  request: Request,
  options: FetchOptions = {},
  requestId?: string,
  progress?: GatewayRequest["progress"]
): GatewayRequest => {
  const url = new URL(request.url)
  let path = url.pathname
  if (options.mountPath !== undefined && path.startsWith(options.mountPath)) {
    path = path.slice(options.mountPath.length) || "/"
  }
  const headers: Record<string, string> = {}
  request.headers.forEach((value, key) => {
    headers[key] = value
  })
  return {
    method: request.method,
    path,
    query: url.search.slice(1),
    headers,
    body: readBody(request, options.maxBodyBytes ?? 32 * 1024 * 1024),
    bodyUpTo: (limit) => readBody(request, limit),
    requestId,
    progress
  }
}

const encoder = new TextEncoder()

/** Turns a gateway response into a web Response; streams stay streams. */
export const toResponse = (response: GatewayResponse): Response => {
  switch (response.body._tag) {
    case "Text":
      return new Response(response.body.text, { status: response.status, headers: response.headers })
    case "Empty":
      return new Response(null, { status: response.status, headers: response.headers })
    case "Stream": {
      const body = Stream.toReadableStream(Stream.map(response.body.stream, (frame) => encoder.encode(frame)))
      return new Response(body, { status: response.status, headers: response.headers })
    }
    case "Bytes":
      // A failure errors the body's stream, so the client sees a broken answer; a cancelled body interrupts the pulls.
      return new Response(Stream.toReadableStream(bytesOf(response.body.open)), {
        status: response.status,
        headers: response.headers
      })
  }
}

/**
 * A fetch handler for the gateway, driven by a runtime the caller built once. A defect (the handler cannot fail
 * otherwise) is answered 500 in the error body of the route's family, with the request's id, and logged; an aborted
 * request rejects, as `runPromise` does, and leaves its log line (`handler.abandoned`).
 */
export const makeFetchHandler = <E>(
  runtime: ManagedRuntime.ManagedRuntime<HandlerRequirements, E>,
  handler: Handler,
  options: FetchOptions = {}
) =>
(request: Request): Promise<Response> => {
  const requestId = newRequestId()
  const described = toGatewayRequest(request, options, requestId, new Progress.Progress())
  return runtime.runPromiseExit(Effect.map(handler(described), toResponse), { signal: request.signal }).then(
    (exit) => {
      if (Exit.isSuccess(exit)) return exit.value
      if (Cause.isInterruptedOnly(exit.cause)) {
        if (handler.abandoned !== undefined) runtime.runFork(handler.abandoned(described, requestId))
        throw Runtime.makeFiberFailure(exit.cause)
      }
      runtime.runFork(Effect.logError("request failed", exit.cause))
      return toResponse(internalError(handler, described, requestId))
    }
  )
}
