/**
 * The `node:http` binding: a request listener driven by one prebuilt runtime. This is the hot path
 * of the example server: no router framework, no per-request layers, the body read only when a
 * route asks for it, and stream frames written as they come with back-pressure. A client that goes
 * away interrupts the request's fiber, which aborts the upstream request.
 */
import { GatewayError } from "@model-gateway/core"
import type { MessagesService } from "@model-gateway/core"
import type { ManagedRuntime } from "effect"
import type { Scope } from "effect"
import { Cause, Chunk, Effect, Exit, FiberId, Stream } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { GatewayRequest, GatewayResponse, Handler, HandlerRequirements } from "./GatewayHttp.js"

export interface NodeOptions {
  /** Largest accepted request body in bytes; larger gets 413. Default 32 MiB. */
  readonly maxBodyBytes?: number | undefined
  /** A prefix the embedding server mounts the gateway under, stripped before routing (e.g. `/gateway`). */
  readonly mountPath?: string | undefined
}

export const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024

const tooLarge = (limit: number) =>
  new GatewayError.PayloadTooLarge({ message: `Request body exceeds the limit of ${limit} bytes` })

/**
 * Collects a request body with plain listeners: `done` with the whole body, or `failed` once it passes `limit` or the
 * request errs. Nothing is called when the request closes before its end. Returns what removes the listeners.
 */
const collectBody = (
  req: IncomingMessage,
  limit: number,
  done: (body: Uint8Array) => void,
  failed: (error: GatewayError.PayloadTooLarge | GatewayError.InvalidRequest) => void
): () => void => {
  const chunks: Array<Buffer> = []
  let size = 0
  const cleanup = () => {
    req.off("data", onData)
    req.off("end", onEnd)
    req.off("error", onError)
    req.off("close", cleanup)
  }
  const onData = (chunk: Buffer) => {
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

const readBody = (req: IncomingMessage, limit: number) =>
  Effect.async<Uint8Array, GatewayError.PayloadTooLarge | GatewayError.InvalidRequest>((resume) => {
    const declared = Number(req.headers["content-length"])
    if (Number.isFinite(declared) && declared > limit) {
      resume(Effect.fail(tooLarge(limit)))
      return
    }
    return Effect.sync(collectBody(req, limit, (body) => resume(Effect.succeed(body)), (e) => resume(Effect.fail(e))))
  })

const drained = (res: ServerResponse) =>
  Effect.async<void>((resume) => {
    const done = () => {
      res.off("drain", done)
      res.off("close", done)
      resume(Effect.void)
    }
    res.on("drain", done)
    res.on("close", done)
  })

/**
 * One write per chunk of frames (the frames of one upstream read), then `next`: at once, unless the socket asks to
 * wait (no Effect step of its own per chunk).
 */
const writeThen = (
  res: ServerResponse,
  frames: Chunk.Chunk<string>,
  next: Effect.Effect<void>
): Effect.Effect<void> => {
  if (res.destroyed) return Effect.interrupt
  if (frames.length === 0) return next
  return res.write(frames.length === 1 ? Chunk.unsafeHead(frames) : Chunk.join(frames, ""))
    ? next
    : Effect.zipRight(drained(res), next)
}

/**
 * Writes every chunk of frames as it comes. Pulling in a loop rather than `Stream.runForEachChunk`: running a stream
 * into a sink costs some 30 µs of Effect channel machinery per chunk more, and a stream of SSE frames is a chunk per
 * upstream read.
 */
const writeStream = (res: ServerResponse, stream: Stream.Stream<string>): Effect.Effect<void> =>
  Effect.scoped(Effect.flatMap(Stream.toPull(stream), (pull) => {
    const loop: Effect.Effect<void> = Effect.matchEffect(pull, {
      // The stream cannot fail: a failure of the pull is its end.
      onFailure: () => Effect.void,
      onSuccess: (frames) => writeThen(res, frames, loop)
    })
    return loop
  }))

/** Writes the frames of `open`, one write per pull, and releases them when done (or interrupted). */
const writePulls = (
  res: ServerResponse,
  open: Effect.Effect<MessagesService.FramePull, never, Scope.Scope>
): Effect.Effect<void> =>
  Effect.scoped(Effect.flatMap(open, (pull) => {
    const loop: Effect.Effect<void> = Effect.flatMap(
      pull,
      (frames) => frames === undefined ? Effect.void : writeThen(res, frames, loop)
    )
    return loop
  }))

/** Writes a gateway response to a node response. */
export const writeResponse = (res: ServerResponse, response: GatewayResponse): Effect.Effect<void> => {
  switch (response.body._tag) {
    case "Text": {
      const text = response.body.text
      return Effect.sync(() => {
        // Object.assign rather than a spread: a spread object given a new key is slow on V8 11 (Node 20).
        res.writeHead(
          response.status,
          Object.assign({}, response.headers, { "content-length": Buffer.byteLength(text) })
        )
        res.end(text)
      })
    }
    case "Empty":
      return Effect.sync(() => {
        res.writeHead(response.status, response.headers)
        res.end()
      })
    case "Stream": {
      const body = response.body
      return Effect.suspend(() => {
        res.writeHead(response.status, response.headers)
        res.flushHeaders()
        return body.open === undefined ? writeStream(res, body.stream) : writePulls(res, body.open)
      }).pipe(Effect.ensuring(Effect.sync(() => res.end())))
    }
  }
}

/** Adapts node's request to the gateway's description; the body is read when the handler asks for it. */
export const toGatewayRequest = (req: IncomingMessage, options: NodeOptions = {}): GatewayRequest =>
  describe(req, options, readBody(req, options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES))

const describe = (
  req: IncomingMessage,
  options: NodeOptions,
  body: GatewayRequest["body"]
): GatewayRequest => {
  const url = req.url ?? "/"
  const q = url.indexOf("?")
  let path = q === -1 ? url : url.slice(0, q)
  const mount = options.mountPath
  if (mount !== undefined && path.startsWith(mount)) path = path.slice(mount.length) || "/"
  return { method: req.method ?? "GET", path, headers: req.headers, body }
}

/**
 * Bodies up to this size, when their length is declared, are read before the request's fiber starts. That spares
 * the fiber a suspension on the body (an `Effect.async`, a scheduler hop) on every ordinary request. Larger or
 * chunked bodies are read when the handler asks, after the key check, so that an unauthenticated client cannot make
 * the gateway buffer up to the body limit.
 */
const READ_AHEAD_BYTES = 256 * 1024

const internalError = JSON.stringify({
  type: "error",
  error: { type: "api_error", message: "Internal error" },
  request_id: null
})

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
  const readAheadLimit = Math.min(limit, READ_AHEAD_BYTES)
  const serve = (req: IncomingMessage, res: ServerResponse, body: GatewayRequest["body"]): void => {
    const fiber = runtime.runFork(
      Effect.flatMap(handler(describe(req, options, body)), (response) => writeResponse(res, response))
    )
    // A defect (the handler cannot fail otherwise) still gets an answer. Watched from outside the fiber rather than
    // with `catchAllDefect`, which would add Effect steps to every request for what should never happen.
    fiber.addObserver((exit) => {
      if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "application/json" })
        res.end(internalError)
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
      // Read ahead. Nothing is served when the request fails or closes before its end: the client is gone (an error
      // on the request means its socket was destroyed), and there is nobody to answer.
      collectBody(req, readAheadLimit, (bytes) => serve(req, res, Effect.succeed(bytes)), () => {})
    } else {
      serve(req, res, readBody(req, limit))
    }
  }
}
