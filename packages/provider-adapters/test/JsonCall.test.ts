/**
 * The transport's JSON calls (`postJson`) against a real `node:http` server on 127.0.0.1: an interrupted wait aborts
 * the upstream request, whether the whole fiber is interrupted (the client went away) or only the call (a timeout
 * around it, the fiber going on), and a fiber that makes many calls keeps nothing of the ones answered.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import * as Transport from "../src/internal/Transport.js"

const servers: Array<Server> = []

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

/** A server that answers `{"ok":true}` at once, or (`hang`) never: it counts the requests whose client went away. */
const serve = (hang: boolean) =>
  Effect.promise(async () => {
    let received = 0
    let aborted = 0
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume()
      req.on("end", () => {
        received++
        res.on("close", () => {
          if (!res.writableEnded) aborted++
        })
        if (!hang) res.end(JSON.stringify({ ok: true }))
      })
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const { port } = server.address() as AddressInfo
    return { url: `http://127.0.0.1:${port}/v1/messages`, received: () => received, aborted: () => aborted }
  })

const call = (url: string): Transport.HttpCall => ({
  url,
  headers: { "content-type": "application/json" },
  body: "{}",
  stream: false,
  describeError: (_body, text) => ({ message: text })
})

/** Waits (up to two seconds) for `condition`. */
const until = (condition: () => boolean) =>
  Effect.promise(async () => {
    for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10))
  })

describe("Transport.postJson", () => {
  it.live("answers the upstream's JSON", () =>
    Effect.gen(function*() {
      const upstream = yield* serve(false)
      const transport = yield* Transport.scopedTransport()
      expect(yield* Transport.postJson(transport, call(upstream.url))).toEqual({ ok: true })
    }).pipe(Effect.scoped))

  it.live("its fiber interrupted while it waits (the client went away): the upstream request is aborted", () =>
    Effect.gen(function*() {
      const upstream = yield* serve(true)
      const transport = yield* Transport.scopedTransport()
      const fiber = yield* Effect.fork(Transport.postJson(transport, call(upstream.url)))
      yield* until(() => upstream.received() === 1)
      yield* Fiber.interrupt(fiber)
      yield* until(() => upstream.aborted() === 1)
      expect(upstream.aborted()).toBe(1)
    }).pipe(Effect.scoped))

  it.live("only the call interrupted (a timeout around it), the fiber going on: the upstream request is aborted", () =>
    Effect.gen(function*() {
      const upstream = yield* serve(true)
      const transport = yield* Transport.scopedTransport()
      const answer = yield* Effect.timeoutOption(Transport.postJson(transport, call(upstream.url)), "100 millis")
      expect(Option.isNone(answer)).toBe(true)
      yield* until(() => upstream.aborted() === 1)
      expect(upstream.aborted()).toBe(1)
    }).pipe(Effect.scoped))

  it.live("a fiber that makes many calls keeps nothing of those answered, and aborts none of them when it ends", () =>
    Effect.gen(function*() {
      const upstream = yield* serve(false)
      const transport = yield* Transport.scopedTransport()
      // Effect's own field (effect 3.x): the fiber's observers, which would grow by one per call were they kept
      const observers = Effect.withFiberRuntime((fiber) =>
        Effect.succeed((fiber as unknown as { readonly _observers: ReadonlyArray<unknown> })._observers.length)
      )
      const calls = Effect.gen(function*() {
        const before = yield* observers
        for (let i = 0; i < 50; i++) yield* Transport.postJson(transport, call(upstream.url))
        return [before, yield* observers]
      })
      const [before, after] = yield* Fiber.join(yield* Effect.fork(calls))
      expect(upstream.received()).toBe(50)
      expect(after).toBe(before)
      expect(upstream.aborted()).toBe(0)
    }).pipe(Effect.scoped))
})
