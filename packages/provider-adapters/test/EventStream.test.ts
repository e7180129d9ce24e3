/**
 * The transport's server-sent events on their own, against a real `node:http` server on 127.0.0.1 writing bytes in
 * pieces: text is decoded across reads (a character split between two reads arrives whole), a byte order mark
 * opening the body is dropped, and the stream's scope closing before the end aborts the upstream request.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import { createServer, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import * as Transport from "../src/internal/Transport.js"

const servers: Array<Server> = []

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A server answering every request with `write(res)`; `closed` tells whether the last request's socket closed. */
const serve = async (write: (res: ServerResponse) => Promise<void>) => {
  let closed = false
  const server = createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.on("close", () => {
        closed = true
      })
      void write(res)
    })
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}/v1/messages`, closed: () => closed }
}

const call = (url: string): Transport.HttpCall => ({
  url,
  headers: { "content-type": "application/json" },
  body: "{}",
  stream: true,
  describeError: (_body, text) => ({ message: text })
})

/** Each event's data, as the decoder saw it. */
const dataOf: Transport.EventDecoder<string> = {
  event: (message, out) => {
    out.push(message.data)
  },
  end: () => {}
}

/** Every value of the stream, pulled to its end. */
const readAll = (url: string) =>
  Effect.scoped(Effect.gen(function*() {
    const transport = yield* Transport.scopedTransport()
    const pull = yield* Transport.openEventStream(transport, call(url), dataOf)
    const values: Array<string> = []
    for (;;) {
      const chunk = yield* pull
      if (chunk === undefined) return values
      values.push(...Chunk.toReadonlyArray(chunk))
    }
  }))

describe("Transport.openEventStream", () => {
  it.effect("decodes a character split between two reads whole, and drops a byte order mark opening the body", () =>
    Effect.gen(function*() {
      const text = Buffer.from("data: caf\u00e9 \u{1F600}\n\n")
      const split = text.indexOf(0xf0) + 2 // inside the emoji's four bytes
      const upstream = yield* Effect.promise(() =>
        serve(async (res) => {
          res.write(Buffer.from([0xef, 0xbb, 0xbf]))
          await pause(20)
          res.write(text.subarray(0, split))
          await pause(20)
          res.write(text.subarray(split))
          res.end("data: second\n\n")
        })
      )
      const values = yield* readAll(upstream.url)
      expect(values).toEqual(["caf\u00e9 \u{1F600}", "second"])
    }))

  it.effect("a byte order mark alone in the first read, then an event: the event's name is read as such", () =>
    Effect.gen(function*() {
      const upstream = yield* Effect.promise(() =>
        serve(async (res) => {
          res.write("\ufeff")
          await pause(20)
          res.end("event: ping\ndata: {}\n\n")
        })
      )
      const seen: Array<string> = []
      const values = yield* Effect.scoped(Effect.gen(function*() {
        const transport = yield* Transport.scopedTransport()
        const pull = yield* Transport.openEventStream(transport, call(upstream.url), {
          event: (message, out: Array<string>) => {
            seen.push(message.event ?? "")
            out.push(message.data)
          },
          end: () => {}
        })
        const out: Array<string> = []
        for (let chunk = yield* pull; chunk !== undefined; chunk = yield* pull) {
          out.push(...Chunk.toReadonlyArray(chunk))
        }
        return out
      }))
      expect(values).toEqual(["{}"])
      expect(seen).toEqual(["ping"])
    }))

  it.effect("the stream's scope closing before the body's end aborts the upstream request", () =>
    Effect.gen(function*() {
      const upstream = yield* Effect.promise(() =>
        serve(async (res) => {
          res.write("data: first\n\n")
          // never ends by itself
        })
      )
      // The pool outlives the stream (closing a pool would end its connections too): only the abort can close it.
      const transport = Transport.makeTransport()
      const first = yield* Effect.scoped(Effect.flatMap(
        Transport.openEventStream(transport, call(upstream.url), dataOf),
        (pull) => pull
      ))
      expect(first === undefined ? [] : Chunk.toReadonlyArray(first)).toEqual(["first"])
      yield* Effect.promise(async () => {
        for (let i = 0; i < 100 && !upstream.closed(); i++) await pause(10)
      })
      const closed = upstream.closed()
      transport.pool.destroy()
      expect(closed).toBe(true)
    }))
})
