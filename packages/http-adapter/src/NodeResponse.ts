/**
 * A gateway response written to a `node:http` response (see `NodeBinding`): text whole, stream frames as they come with
 * back-pressure (pulled, or pushed by their source), bytes as they arrive, and a refused upload's lingering close.
 */
import { Push } from "@model-gateway/core"
import type { MessagesService } from "@model-gateway/core"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { GatewayResponse } from "./GatewayHttp.js"
import type * as HttpTypes from "./HttpTypes.js"
import { endAtTurnEnd, writeAtTurnEnd } from "./TurnEnd.js"

/** How long, and how many more bytes at most, a refused upload is read and discarded (`LINGER_MS`, `LINGER_BYTES`). */
export interface LingerOptions {
  readonly lingerMs?: number | undefined
  readonly lingerBytes?: number | undefined
}

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
  return res.write(joined(Chunk.toReadonlyArray(frames)))
    ? next
    : Effect.zipRight(drained(res), next)
}

/** The frames as one text: a loop over the array (`Chunk.join` and `Array.join` copy into a new array first). */
const joined = (frames: ReadonlyArray<string>): string => {
  if (frames.length === 1) return frames[0]!
  let text = ""
  for (let i = 0; i < frames.length; i++) text += frames[i]
  return text
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

/**
 * A writer of pushed frames (see `Push`): one write per chunk of frames; when the socket asks to wait, the source is
 * resumed by its `drain`. The last frames are sent at the end of the turn (`writeAtTurnEnd`), by then most often with
 * the body's end: one system call for both.
 */
const frameWriter = (res: ServerResponse): Push.Writer<string> => (frames, resume, last) => {
  // A response gone is not resumed: its close interrupts the request's fiber, which releases the source.
  if (res.destroyed) return false
  if (frames.length === 0) return true
  const text = joined(frames)
  if (last === true ? writeAtTurnEnd(res, text) : res.write(text)) return true
  res.once("drain", resume)
  return false
}

/**
 * Writes the frames of `pull`, one write per chunk. The first pull gives the frames held until the first content; the
 * rest are pushed when the pull can push, pulled otherwise.
 */
const writeFrames = (res: ServerResponse, pull: MessagesService.FramePull): Effect.Effect<void> => {
  const push = Push.pushOf(pull)
  if (push === undefined) {
    const loop: Effect.Effect<void> = Effect.flatMap(
      pull,
      (frames) => frames === undefined ? Effect.void : writeThen(res, frames, loop)
    )
    return loop
  }
  return Effect.flatMap(
    pull,
    (frames) => frames === undefined ? Effect.void : writeThen(res, frames, push(frameWriter(res)))
  )
}

/** Writes the frames of `open`, and releases them when done (or interrupted). */
const writePulls = (
  res: ServerResponse,
  open: Effect.Effect<MessagesService.FramePull, never, Scope.Scope>
): Effect.Effect<void> => Effect.scoped(Effect.flatMap(open, (pull) => writeFrames(res, pull)))

/** Ends a response whose head was written; one whose head could not be is a defect, answered 500 by `serve`. */
const endIfHeaded = (res: ServerResponse): void => {
  if (res.headersSent) res.end()
}

/**
 * Writes the head and the claimed frames (see `Outcome`'s `claim`), then releases them and ends the response, when done
 * or interrupted: no scope of its own, whose making, providing and closing cost a stream 39 Effect steps and a copy of
 * the runtime's context. The claim is uninterruptible, so that the release is made sure before an interruption can
 * land; the release and the end are one finalizer (two `ensuring`s cost a stream 14 more Effect steps), and a head that
 * cannot be written still releases the frames, and so the upstream request.
 */
const writeClaimed = (
  res: ServerResponse,
  response: GatewayResponse,
  claim: Effect.Effect<MessagesService.ClaimedFrames>
): Effect.Effect<void> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(claim, ({ pull, release }) => {
      const done = Effect.zipRight(release, Effect.sync(() => endIfHeaded(res)))
      return Effect.matchCauseEffect(
        restore(Effect.suspend(() => {
          res.writeHead(response.status, response.headers)
          return writeFrames(res, pull)
        })),
        { onFailure: (cause) => Effect.zipRight(done, Effect.failCause(cause)), onSuccess: () => done }
      )
    })
  )

/**
 * Writes a binary body as its bytes arrive, one write per pull, waiting for the socket to drain when it asks to, then
 * ends it. A failure of a pull (the source was cut short) destroys the response instead: the client sees a broken
 * answer (no terminating chunk), never a complete-looking one.
 */
const writeBytes = (
  res: ServerResponse,
  open: Effect.Effect<HttpTypes.BytePull, never, Scope.Scope>
): Effect.Effect<void> =>
  Effect.scoped(Effect.flatMap(open, (pull) => {
    const loop: Effect.Effect<void> = Effect.matchEffect(pull, {
      onFailure: () => Effect.sync(() => res.destroy()),
      onSuccess: (bytes) => {
        if (bytes === undefined) return Effect.sync(() => res.end())
        if (res.destroyed) return Effect.interrupt
        if (bytes.byteLength === 0) return loop
        return res.write(bytes) ? loop : Effect.zipRight(drained(res), loop)
      }
    })
    return loop
  }))

/** How long, and how many more bytes, a refused upload is read and discarded before its connection closes. */
export const LINGER_MS = 10_000
export const LINGER_BYTES = 128 * 1024 * 1024

/**
 * A lingering close: the answer (with `Connection: close`) is sent whole, then the rest of the request body is read
 * and discarded until it ends, or for at most `LINGER_MS` and `LINGER_BYTES`, and only then the connection closes.
 * Closing at once while the client is still uploading (a body over the limit, answered 413 before it is read) gives
 * the client a broken pipe instead of the answer, and SDKs then send the whole upload again.
 */
const linger = (
  req: IncomingMessage,
  res: ServerResponse,
  response: { readonly status: number; readonly headers: object; readonly text: string },
  limits: { readonly ms: number; readonly bytes: number }
) => {
  const { headers, status, text } = response
  res.writeHead(status, Object.assign({}, headers, { "content-length": Buffer.byteLength(text) }))
  res.write(text)
  let discarded = 0
  const done = () => {
    clearTimeout(timer)
    req.off("data", count)
    req.off("end", done)
    req.off("close", done)
    res.end()
  }
  const count = (chunk: Buffer) => {
    discarded += chunk.length
    if (discarded > limits.bytes) done()
  }
  const timer = setTimeout(done, limits.ms)
  req.on("data", count)
  req.once("end", done)
  req.once("close", done)
  req.resume()
}

/**
 * Writes a gateway response to a node response. With `req`, an answer that closes the connection while the request
 * body is still arriving lingers (see `linger`).
 */
export const writeResponse = (
  res: ServerResponse,
  response: GatewayResponse,
  req?: IncomingMessage,
  options: LingerOptions = {}
): Effect.Effect<void> => {
  switch (response.body._tag) {
    case "Text": {
      const text = response.body.text
      if (req !== undefined && !req.complete && response.status === 408) {
        // A body that stopped arriving: answer, then close; there is nothing to wait for.
        return Effect.sync(() => {
          res.writeHead(408, Object.assign({}, response.headers, { "content-length": Buffer.byteLength(text) }))
          res.end(text, () => req.socket.destroy())
        })
      }
      if (req !== undefined && !req.complete && response.headers.connection === "close") {
        return Effect.sync(() =>
          linger(req, res, { status: response.status, headers: response.headers, text }, {
            ms: options.lingerMs ?? LINGER_MS,
            bytes: options.lingerBytes ?? LINGER_BYTES
          })
        )
      }
      return Effect.sync(() => {
        // Object.assign rather than a spread: a spread object given a new key is slow on V8 11 (Node 20).
        res.writeHead(
          response.status,
          Object.assign({}, response.headers, { "content-length": Buffer.byteLength(text) })
        )
        endAtTurnEnd(res, text)
      })
    }
    case "Empty":
      return Effect.sync(() => {
        res.writeHead(response.status, response.headers)
        res.end()
      })
    case "Stream": {
      const body = response.body
      // A committed stream's first pull gives the frames held until its first content at once: the head goes out
      // with them, in one write, rather than in a write of its own just before.
      if (body.open !== undefined && body.claim !== undefined) return writeClaimed(res, response, body.claim)
      return Effect.suspend(() => {
        res.writeHead(response.status, response.headers)
        if (body.open === undefined) {
          res.flushHeaders()
          return writeStream(res, body.stream)
        }
        return writePulls(res, body.open)
      }).pipe(Effect.ensuring(Effect.sync(() => endIfHeaded(res))))
    }
    case "Bytes": {
      const open = response.body.open
      return Effect.suspend(() => {
        res.writeHead(response.status, response.headers)
        res.flushHeaders()
        return writeBytes(res, open)
      }).pipe(
        // Interrupted before its end (shutdown, a defect): the body is incomplete, and must not look complete.
        Effect.ensuring(Effect.sync(() => {
          if (!res.writableEnded) res.destroy()
        }))
      )
    }
  }
}
