/**
 * A `node:http` request as the gateway reads it (see `NodeBinding`): its path under the mount, and its body, collected
 * with plain listeners up to a limit, abandoned when it stops arriving, or read ahead of the request's fiber.
 */
import { GatewayError } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import type { IncomingMessage } from "node:http"
import type { GatewayRequest } from "./GatewayHttp.js"
import type { BodyError } from "./HttpTypes.js"

export const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024

/** A body that sends nothing for this long is abandoned: 408, then the connection closes. */
export const BODY_IDLE_MS = 10_000

const stalled = (ms: number) =>
  new GatewayError.RequestTimeout({
    message: `Request body: nothing arrived for ${ms / 1000} s before its end (Content-Length promised more)`
  })

const tooLarge = (limit: number) =>
  new GatewayError.PayloadTooLarge({ message: `Request body exceeds the limit of ${limit} bytes` })

/**
 * Collects a request body with plain listeners: `done` with the whole body, or `failed` once it passes `limit`, stops
 * arriving for `idleMs`, or the request errs. Nothing is called when the request closes before its end. Returns what
 * removes the listeners.
 */
export const collectBody = (
  req: IncomingMessage,
  limit: number,
  idleMs: number,
  done: (body: Uint8Array) => void,
  failed: (error: BodyError) => void
): () => void => {
  const chunks: Array<Buffer> = []
  let size = 0
  // One timer for the whole read, pushed back by each chunk (`refresh` re-arms it without a new allocation).
  const timer = setTimeout(() => {
    cleanup()
    failed(stalled(idleMs))
  }, idleMs)
  const cleanup = () => {
    clearTimeout(timer)
    req.off("data", onData)
    req.off("end", onEnd)
    req.off("error", onError)
    req.off("close", cleanup)
  }
  const onData = (chunk: Buffer) => {
    timer.refresh()
    size += chunk.length
    if (size > limit) {
      cleanup()
      failed(tooLarge(limit))
    } else chunks.push(chunk)
  }
  const onEnd = () => {
    cleanup()
    done(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size))
  }
  const onError = (error: Error) => {
    cleanup()
    failed(new GatewayError.InvalidRequest({ message: `Could not read request body: ${error.message}` }))
  }
  req.on("data", onData)
  req.on("end", onEnd)
  req.on("error", onError)
  req.on("close", cleanup)
  return cleanup
}

export const readBody = (req: IncomingMessage, limit: number, idleMs: number) =>
  Effect.async<Uint8Array, BodyError>((resume) => {
    const declared = Number(req.headers["content-length"])
    if (Number.isFinite(declared) && declared > limit) {
      resume(Effect.fail(tooLarge(limit)))
      return
    }
    return Effect.sync(
      collectBody(req, limit, idleMs, (body) => resume(Effect.succeed(body)), (e) => resume(Effect.fail(e)))
    )
  })

/**
 * The gateway's description of `req`, its path under `options.mountPath`, its body read by `body` and `bodyUpTo`, with
 * the id and the progress the binding made for it, if any.
 */
export const describe = (
  req: IncomingMessage,
  options: { readonly mountPath?: string | undefined },
  body: GatewayRequest["body"],
  bodyUpTo: NonNullable<GatewayRequest["bodyUpTo"]>,
  requestId?: string,
  progress?: GatewayRequest["progress"]
): GatewayRequest => {
  const url = req.url ?? "/"
  const q = url.indexOf("?")
  let path = q === -1 ? url : url.slice(0, q)
  const mount = options.mountPath
  if (mount !== undefined && path.startsWith(mount)) path = path.slice(mount.length) || "/"
  return {
    method: req.method ?? "GET",
    path,
    query: q === -1 ? "" : url.slice(q + 1),
    headers: req.headers,
    body,
    bodyUpTo,
    requestId,
    progress
  }
}

/**
 * A body read already (ahead of the request's fiber), given once, as `GatewayRequest` says a body is read: `body`, or
 * `bodyUpTo` under a route's own limit. The request lives as long as its handler, for a JSON answer the upstream's
 * whole latency, and keeps no bytes that were parsed already (a conversation is often hundreds of KB).
 */
export const readAhead = (
  bytes: Uint8Array
): { readonly body: GatewayRequest["body"]; readonly bodyUpTo: NonNullable<GatewayRequest["bodyUpTo"]> } => {
  let held: Uint8Array | undefined = bytes
  const take = (limit: number): Effect.Effect<Uint8Array, BodyError> =>
    Effect.suspend(() => {
      const out = held
      if (out === undefined) return Effect.dieMessage("a request body is read once")
      held = undefined
      return out.byteLength > limit ? Effect.fail(tooLarge(limit)) : Effect.succeed(out)
    })
  return { body: take(Infinity), bodyUpTo: take }
}
