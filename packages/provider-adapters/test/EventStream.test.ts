/**
 * The transport's server-sent events on their own, against a real `node:http` server on 127.0.0.1 writing bytes in
 * pieces: text is decoded across reads (a character split between two reads arrives whole), a byte order mark
 * opening the body is dropped, and the stream's scope closing before the end aborts the upstream request. Pushed
 * (`Push`): each read's values reach the writer as they are decoded, a writer that asks to wait gets nothing until it
 * resumes the source, a failure or a throwing writer ends the push, never the process.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import { PullUntil, Push, Upstream } from "@model-gateway/core"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { createServer, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import * as EventStream from "../src/internal/EventStream.js"
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
const dataOf: EventStream.EventDecoder<string> = {
  event: (message, out) => {
    out.push(message.data)
  },
  end: () => {}
}

/** A server writing `data: <value>` events 20 ms apart, then ending its answer, holding it open, or cutting it. */
const serveEvents = (values: ReadonlyArray<string>, then: "end" | "hold" | "cut") =>
  Effect.promise(() =>
    serve(async (res) => {
      for (const value of values) {
        res.write(`data: ${value}\n\n`)
        await pause(20)
      }
      if (then === "end") res.end()
      else if (then === "cut") res.destroy()
    })
  )

/** Waits (up to a second) for `condition`. */
const until = (condition: () => boolean) =>
  Effect.promise(async () => {
    for (let i = 0; i < 100 && !condition(); i++) await pause(10)
  })

/** A writer that keeps every value in `into` and never asks to wait. */
const keepingIn = (into: Array<string>): Push.Writer<string> => (values) => {
  into.push(...values)
  return true
}

/** Every value of the stream, pulled to its end on `transport` (which outlives it) in a scope of its own. */
const readAllOn = (transport: Transport.Transport, url: string, decoder: EventStream.EventDecoder<string> = dataOf) =>
  Effect.scoped(Effect.gen(function*() {
    const pull = yield* EventStream.openEventStream(transport, call(url), decoder)
    const values: Array<string> = []
    for (;;) {
      const chunk = yield* pull
      if (chunk === undefined) return values
      values.push(...Chunk.toReadonlyArray(chunk))
    }
  }))

/** Every value of the stream, pulled to its end on a pool of its own. */
const readAll = (url: string, decoder: EventStream.EventDecoder<string> = dataOf) =>
  Effect.scoped(Effect.flatMap(Transport.scopedTransport(), (transport) => readAllOn(transport, url, decoder)))

describe("EventStream.openEventStream", () => {
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

  it.effect("lines ended by a bare CR (as SSE allows): every event, the last one too when the body ends on its CR", () =>
    Effect.gen(function*() {
      const upstream = yield* Effect.promise(() =>
        serve(async (res) => {
          res.write("data: first\r\r")
          await pause(20)
          // the body's last byte is the CR that ends the last event: only the body's end says no LF follows
          res.end("event: message_stop\rdata: last\r\r")
        })
      )
      const values = yield* readAll(upstream.url)
      expect(values).toEqual(["first", "last"])
      // an event the body's end cut before its blank line is not sent, CR or not
      const cut = yield* Effect.promise(() =>
        serve(async (res) => {
          res.end("data: first\r\rdata: cut\r")
        })
      )
      expect(yield* readAll(cut.url)).toEqual(["first"])
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
      const values = yield* readAll(upstream.url, {
        event: (message, out: Array<string>) => {
          seen.push(message.event ?? "")
          out.push(message.data)
        },
        end: () => {}
      })
      expect(values).toEqual(["{}"])
      expect(seen).toEqual(["ping"])
    }))

  it.effect("the stream's scope closing before the body's end aborts the upstream request", () =>
    Effect.gen(function*() {
      const upstream = yield* serveEvents(["first"], "hold")
      // The pool outlives the stream (closing a pool would end its connections too): only the abort can close it.
      const transport = Transport.makeTransport()
      const first = yield* Effect.scoped(Effect.flatMap(
        EventStream.openEventStream(transport, call(upstream.url), dataOf),
        (pull) => pull
      ))
      expect(first === undefined ? [] : Chunk.toReadonlyArray(first)).toEqual(["first"])
      yield* until(upstream.closed)
      const closed = upstream.closed()
      transport.pool.destroy()
      expect(closed).toBe(true)
    }))
})

/** Opens a stream on a pool of its own (closed with the scope), pulls once, then pushes the rest to `write`. */
const pullThenPush = (url: string, write: Push.Writer<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const transport = yield* Transport.scopedTransport()
    const pull = yield* EventStream.openEventStream(transport, call(url), dataOf)
    const push = Push.pushOf(pull)
    if (push === undefined) return yield* Effect.die(new Error("the transport's stream cannot push"))
    const first = yield* pull
    return { first: first === undefined ? [] : Chunk.toReadonlyArray(first), pushed: yield* Effect.exit(push(write)) }
  }))

describe("EventStream.openEventStream, pushed", () => {
  it.effect("each read's values reach the writer as they arrive, in order, then the push ends", () =>
    Effect.gen(function*() {
      let arrived = 0
      const upstream = yield* Effect.promise(() =>
        serve(async (res) => {
          res.write("data: one\n\n")
          await pause(20)
          for (const value of ["two", "three", "four"]) {
            res.write(`data: ${value}\n\n`)
            await pause(20)
            // each value was written by the gateway before the upstream wrote the next
            arrived++
          }
          res.end("data: five\n\n")
        })
      )
      const writes: Array<{ values: ReadonlyArray<string>; arrived: number }> = []
      const { first, pushed } = yield* pullThenPush(upstream.url, (values) => {
        writes.push({ values, arrived })
        return true
      })
      expect(first).toEqual(["one"])
      expect(Exit.isSuccess(pushed)).toBe(true)
      expect(writes).toEqual([
        { values: ["two"], arrived: 0 },
        { values: ["three"], arrived: 1 },
        { values: ["four"], arrived: 2 },
        { values: ["five"], arrived: 3 }
      ])
    }))

  it.effect("a writer that asks to wait gets nothing more until it resumes the source; then the rest, and the end", () =>
    Effect.gen(function*() {
      const upstream = yield* serveEvents(["one", "two", "three", "four"], "end")
      const written: Array<string> = []
      let waiting: (() => void) | undefined
      const fiber = yield* Effect.fork(pullThenPush(upstream.url, (values, resume) => {
        written.push(...values)
        if (waiting !== undefined || written.length > 1) return true
        waiting = resume
        return false
      }))
      // the upstream's whole answer has been sent meanwhile: none of it was written
      yield* Effect.promise(() => pause(150))
      expect(written).toEqual(["two"])
      waiting!()
      const { first, pushed } = yield* Fiber.join(fiber)
      expect(first).toEqual(["one"])
      expect(Exit.isSuccess(pushed)).toBe(true)
      expect(written).toEqual(["two", "three", "four"])
    }))

  it.effect("a push begun while the socket waits for a pull (past 64 KiB unread) takes what was read, then the rest", () =>
    Effect.gen(function*() {
      const values = Array.from({ length: 200 }, (_, i) => `${i}`.padStart(4, "0") + "x".repeat(1024))
      const upstream = yield* Effect.promise(() =>
        serve(async (res) => {
          res.write(`data: ${values[0]}\n\n`)
          await pause(50)
          // 200 KiB at once: the transport reads 64 KiB ahead of its reader, then pauses the socket
          for (const value of values.slice(1)) res.write(`data: ${value}\n\n`)
          res.end()
        })
      )
      const written: Array<string> = []
      const pushed = yield* Effect.scoped(Effect.gen(function*() {
        const transport = yield* Transport.scopedTransport()
        const pull = yield* EventStream.openEventStream(transport, call(upstream.url), dataOf)
        const first = yield* pull
        expect(first === undefined ? [] : Chunk.toReadonlyArray(first)).toEqual([values[0]])
        yield* Effect.promise(() => pause(200))
        return yield* Effect.exit(Push.pushOf(pull)!(keepingIn(written)))
      }))
      expect(Exit.isSuccess(pushed)).toBe(true)
      expect(written).toEqual(values.slice(1))
    }))

  it.effect("an upstream cut short fails the push with a transport failure, after the values it sent", () =>
    Effect.gen(function*() {
      const upstream = yield* serveEvents(["one", "two"], "cut")
      const written: Array<string> = []
      const { pushed } = yield* pullThenPush(upstream.url, keepingIn(written))
      expect(written).toEqual(["two"])
      expect(Exit.isFailure(pushed) && Cause.failureOption(pushed.cause)).toMatchObject({
        _tag: "Some",
        value: { kind: "transport" }
      })
    }))

  it.effect("a writer that throws ends the push as a defect (the process goes on), and the upstream is aborted", () =>
    Effect.gen(function*() {
      const upstream = yield* serveEvents(["one", "two"], "hold")
      const broken = new Error("the writer broke")
      const { pushed } = yield* pullThenPush(upstream.url, () => {
        throw broken
      })
      const defect = Exit.isFailure(pushed) ? Cause.dieOption(pushed.cause) : undefined
      expect(defect !== undefined && Option.isSome(defect) && defect.value).toBe(broken)
      yield* until(upstream.closed)
      expect(upstream.closed()).toBe(true)
    }))

  it.effect("an interrupted push, its scope closed, aborts the upstream request", () =>
    Effect.gen(function*() {
      const upstream = yield* serveEvents(["one", "two"], "hold")
      const written: Array<string> = []
      const transport = Transport.makeTransport()
      const fiber = yield* Effect.fork(Effect.scoped(Effect.gen(function*() {
        const pull = yield* EventStream.openEventStream(transport, call(upstream.url), dataOf)
        yield* pull
        yield* Push.pushOf(pull)!(keepingIn(written))
      })))
      yield* until(() => written.length > 0)
      expect(written).toEqual(["two"])
      yield* Fiber.interrupt(fiber)
      yield* until(upstream.closed)
      const closed = upstream.closed()
      transport.pool.destroy()
      expect(closed).toBe(true)
    }))
})

/** Opens a stream on a pool of its own (closed with the scope) and pulls until `stop` once: what that gave, or its exit. */
const pullUntilOnce = (url: string, stop: (value: string) => boolean) =>
  Effect.scoped(Effect.gen(function*() {
    const transport = yield* Transport.scopedTransport()
    const pull = yield* EventStream.openEventStream(transport, call(url), dataOf)
    const until = PullUntil.untilOf(pull)
    if (until === undefined) return yield* Effect.die(new Error("the transport's stream cannot pull until"))
    const got = yield* Effect.exit(until(stop))
    const rest: Array<string> = []
    if (Exit.isSuccess(got) && got.value !== undefined) {
      for (let chunk = yield* Effect.either(pull); chunk._tag === "Right" && chunk.right !== undefined;) {
        rest.push(...Chunk.toReadonlyArray(chunk.right))
        chunk = yield* Effect.either(pull)
      }
    }
    return { got: Exit.map(got, (chunk) => chunk === undefined ? undefined : Chunk.toReadonlyArray(chunk)), rest }
  }))

describe("EventStream.openEventStream, pulled until", () => {
  it.effect("gives nothing until a value satisfies the stop, then every value read so far; the rest is pulled as before", () =>
    Effect.gen(function*() {
      // each value in a read of its own, 20 ms apart: a plain pull would give ["start"] alone
      const upstream = yield* serveEvents(["start", "block", "ping", "delta", "more"], "end")
      const { got, rest } = yield* pullUntilOnce(upstream.url, (value) => value === "delta")
      expect(got).toEqual(Exit.succeed(["start", "block", "ping", "delta"]))
      expect(rest).toEqual(["more"])
    }))

  it.effect("a stream that ends before any value satisfies the stop gives its values, then its end", () =>
    Effect.gen(function*() {
      const upstream = yield* serveEvents(["start", "ping"], "end")
      const { got, rest } = yield* pullUntilOnce(upstream.url, () => false)
      expect(got).toEqual(Exit.succeed(["start", "ping"]))
      expect(rest).toEqual([])
    }))

  it.effect("a stream cut short before a value satisfies the stop gives what it read, then fails on the next pull", () =>
    Effect.gen(function*() {
      const upstream = yield* serveEvents(["start"], "cut")
      const got = yield* Effect.scoped(Effect.gen(function*() {
        const transport = yield* Transport.scopedTransport()
        const pull = yield* EventStream.openEventStream(transport, call(upstream.url), dataOf)
        const first = yield* PullUntil.untilOf(pull)!(() => false)
        return { first: first === undefined ? [] : Chunk.toReadonlyArray(first), next: yield* Effect.exit(pull) }
      }))
      expect(got.first).toEqual(["start"])
      expect(Exit.isFailure(got.next) && Cause.failureOption(got.next.cause)).toMatchObject({
        _tag: "Some",
        value: { kind: "transport" }
      })
    }))

  it.effect("past 64 KiB read ahead without a value satisfying the stop, gives them rather than pausing forever", () =>
    Effect.gen(function*() {
      const values = Array.from({ length: 200 }, (_, i) => `${i}`.padStart(4, "0") + "x".repeat(1024))
      const upstream = yield* Effect.promise(() =>
        serve(async (res) => {
          for (const value of values) res.write(`data: ${value}\n\n`)
          // held open: only the read-ahead limit can end the wait
        })
      )
      const got = yield* Effect.scoped(Effect.gen(function*() {
        const transport = yield* Transport.scopedTransport()
        const pull = yield* EventStream.openEventStream(transport, call(upstream.url), dataOf)
        const first = yield* PullUntil.untilOf(pull)!(() => false).pipe(Effect.timeout("2 seconds"))
        return first === undefined ? [] : Chunk.toReadonlyArray(first)
      }))
      expect(got.length).toBeGreaterThan(0)
      expect(got.length).toBeLessThan(values.length)
      expect(got).toEqual(values.slice(0, got.length))
    }))
})

describe("EventStream.openEventStream, the first content's deadline (firstContentMs)", () => {
  /** A server that starts its answer, then pings every 20 ms, never sending content; `pings` how many it has sent. */
  const servePings = () =>
    Effect.promise(async () => {
      let pings = 0
      const upstream = await serve(async (res) => {
        res.write("data: start\n\n")
        while (!res.destroyed && pings < 500) {
          await pause(20)
          res.write("data: ping\n\n")
          pings++
        }
      })
      return { ...upstream, pings: () => pings }
    })

  it.effect("an upstream that pings without content fails a pull until in time, and its request is aborted", () =>
    Effect.gen(function*() {
      const upstream = yield* servePings()
      const started = Date.now()
      const got = yield* Effect.scoped(Effect.gen(function*() {
        const transport = yield* Transport.scopedTransport({ firstContentMs: 200 })
        const pull = yield* EventStream.openEventStream(transport, call(upstream.url), dataOf)
        const until = PullUntil.untilOf(pull)!
        const values: Array<string> = []
        for (;;) {
          const next = yield* Effect.either(until((value) => value === "delta"))
          if (Either.isLeft(next)) return { values, error: next.left }
          if (next.right === undefined) return { values, error: undefined }
          values.push(...Chunk.toReadonlyArray(next.right))
        }
      }))
      const elapsed = Date.now() - started
      expect(got.error).toMatchObject({ kind: "timeout" })
      expect(got.error?.message).toContain("no content within 200 ms")
      expect(elapsed).toBeGreaterThanOrEqual(190)
      expect(elapsed).toBeLessThan(1_000)
      // aborted at once, not read to its end (the upstream would go on pinging)
      yield* until(upstream.closed)
      expect(upstream.closed()).toBe(true)
      expect(upstream.pings()).toBeLessThan(40)
    }))

  it.effect("content in time ends the deadline: a stream that goes on past it is read to its end", () =>
    Effect.gen(function*() {
      const upstream = yield* serveEvents(["start", "delta", "a", "b", "c", "d", "e", "f"], "end")
      const got = yield* Effect.scoped(Effect.gen(function*() {
        const transport = yield* Transport.scopedTransport({ firstContentMs: 60 })
        const pull = yield* EventStream.openEventStream(transport, call(upstream.url), dataOf)
        const first = yield* PullUntil.untilOf(pull)!((value) => value === "delta")
        const values = first === undefined ? [] : [...Chunk.toReadonlyArray(first)]
        for (;;) {
          const chunk = yield* pull
          if (chunk === undefined) return values
          values.push(...Chunk.toReadonlyArray(chunk))
        }
      }))
      expect(got).toEqual(["start", "delta", "a", "b", "c", "d", "e", "f"])
    }))
})

/** As `dataOf`, but `ping` is a keep-alive passed on (as Anthropic's), `nothing` gives nothing, `end` ends the stream. */
const withKeepAlives: EventStream.EventDecoder<string> = {
  event: (message, out) => {
    if (message.data === "nothing") return
    out.push(message.data)
    if (message.data === "end") return true
    return message.data === "ping" ? EventStream.KEEP_ALIVE : undefined
  },
  end: () => {}
}

/** Keep-alives of every kind: a ping passed on, a comment (which no decoder sees), an event that gives nothing. */
const KEEP_ALIVES = ["data: ping\n\n", ": keep-alive\n\n", "data: nothing\n\n"]

/**
 * A server that answers `start` and `delta` (the first content), then writes `frames` in turn, 20 ms apart, `count` of
 * them, then ends its answer; `sent` how many it wrote.
 */
const serveAfterContent = (frames: ReadonlyArray<string>, count = 200) =>
  Effect.promise(async () => {
    let sent = 0
    const upstream = await serve(async (res) => {
      res.write("data: start\n\n")
      await pause(20)
      res.write("data: delta\n\n")
      while (!res.destroyed && sent < count) {
        await pause(20)
        res.write(frames[sent % frames.length])
        sent++
      }
      if (!res.destroyed) res.end()
    })
    return { ...upstream, sent: () => sent }
  })

/**
 * Pulls until `delta` (the first content, as `StreamCommit` does), then pulls plainly, or pushes (`push`), to the end:
 * the values, and the failure, if any.
 */
const readAfterContent = (url: string, timeouts: Partial<Transport.Timeouts>, push = false) =>
  Effect.scoped(Effect.gen(function*() {
    const transport = yield* Transport.scopedTransport(timeouts)
    const pull = yield* EventStream.openEventStream(transport, call(url), withKeepAlives)
    const first = yield* Effect.either(PullUntil.untilOf(pull)!((value) => value === "delta"))
    if (Either.isLeft(first)) return { values: [], error: first.left }
    const values = first.right === undefined ? [] : [...Chunk.toReadonlyArray(first.right)]
    if (push) {
      const pushed = yield* Effect.either(Push.pushOf(pull)!(keepingIn(values)))
      return { values, error: Either.isLeft(pushed) ? pushed.left : undefined }
    }
    for (;;) {
      const next = yield* Effect.either(pull)
      if (Either.isLeft(next)) return { values, error: next.left }
      if (next.right === undefined) return { values, error: undefined }
      values.push(...Chunk.toReadonlyArray(next.right))
    }
  }))

describe("EventStream.openEventStream, keep-alives after the first content (idleMs)", () => {
  it.effect.each([["pulled", false], ["pushed", true]] as const)(
    "%s: an upstream that sends only keep-alives after content fails the stream in time, and its request is aborted",
    ([_, push]) =>
      Effect.gen(function*() {
        const upstream = yield* serveAfterContent(KEEP_ALIVES)
        const started = Date.now()
        const got = yield* readAfterContent(upstream.url, { idleMs: 150 }, push)
        const elapsed = Date.now() - started
        expect(got.error).toMatchObject({ kind: "timeout" })
        expect(got.error?.message).toContain("no content for 150 ms")
        // the content, then the pings passed on until the time-out
        expect(got.values.slice(0, 2)).toEqual(["start", "delta"])
        expect(got.values.slice(2).every((value) => value === "ping")).toBe(true)
        expect(got.values.length).toBeGreaterThan(2)
        expect(elapsed).toBeGreaterThanOrEqual(150)
        expect(elapsed).toBeLessThan(1_000)
        // aborted at once, not held until the upstream gives up (200 keep-alives, 4 s)
        yield* until(upstream.closed)
        expect(upstream.closed()).toBe(true)
        expect(upstream.sent()).toBeLessThan(40)
      })
  )

  it.effect("content between the keep-alives, each less than idleMs after the last: read to its end", () =>
    Effect.gen(function*() {
      // 1.2 s of keep-alives (8 idle time-outs' length), content every fourth frame (80 ms apart)
      const upstream = yield* serveAfterContent([...KEEP_ALIVES, "data: more\n\n"], 60)
      const got = yield* Effect.scoped(Effect.gen(function*() {
        const transport = yield* Transport.scopedTransport({ idleMs: 150 })
        const pull = yield* EventStream.openEventStream(transport, call(upstream.url), withKeepAlives)
        const values = [...Chunk.toReadonlyArray((yield* PullUntil.untilOf(pull)!((value) => value === "delta"))!)]
        for (;;) {
          const chunk = yield* Effect.either(pull)
          if (Either.isLeft(chunk)) return { values, error: chunk.left }
          if (chunk.right === undefined) return { values, error: undefined }
          values.push(...Chunk.toReadonlyArray(chunk.right))
        }
      }))
      expect(got.error).toBeUndefined()
      expect(got.values.filter((value) => value === "more")).toHaveLength(15)
    }))

  it.effect("before the first content, keep-alives keep the idle time-out from running out: its deadline is firstContentMs", () =>
    Effect.gen(function*() {
      // 400 ms of keep-alives after `start` (idleMs 100), then the content and the end
      const upstream = yield* Effect.promise(() =>
        serve(async (res) => {
          res.write("data: start\n\n")
          for (let i = 0; i < 20 && !res.destroyed; i++) {
            await pause(20)
            res.write(KEEP_ALIVES[i % KEEP_ALIVES.length])
          }
          res.end("data: delta\n\ndata: end\n\n")
        })
      )
      const got = yield* readAfterContent(upstream.url, { idleMs: 100, firstContentMs: 2_000 })
      expect(got.error).toBeUndefined()
      expect(got.values.at(-2)).toBe("delta")
      expect(got.values.at(-1)).toBe("end")
    }))

  it.effect("the last event after keep-alives: the stream ends there, and its body's end is read after it", () =>
    Effect.gen(function*() {
      // keep-alives for less than idleMs, the last event, then the body's end 50 ms later (see `DRAIN_MS`)
      const answers: Array<"ended" | "cut"> = []
      const upstream = yield* Effect.promise(() =>
        serve(async (res) => {
          res.on("close", () => answers.push(res.writableFinished ? "ended" : "cut"))
          res.write("data: start\n\ndata: delta\n\n")
          for (const frame of KEEP_ALIVES) {
            await pause(20)
            res.write(frame)
          }
          res.write("data: end\n\n")
          await pause(50)
          res.end()
        })
      )
      const got = yield* readAfterContent(upstream.url, { idleMs: 200 })
      expect(got).toEqual({ values: ["start", "delta", "ping", "end"], error: undefined })
      yield* until(() => answers.length > 0)
      expect(answers).toEqual(["ended"])
    }))
})

describe("EventStream.openEventStream, pulled until, a stop that throws", () => {
  it.effect("gives the values read, then dies on the next pull: a defect of the stream, never of the process", () =>
    Effect.gen(function*() {
      const upstream = yield* serveEvents(["start", "block"], "end")
      const got = yield* Effect.scoped(Effect.gen(function*() {
        const transport = yield* Transport.scopedTransport()
        const pull = yield* EventStream.openEventStream(transport, call(upstream.url), dataOf)
        const first = yield* PullUntil.untilOf(pull)!((value) => {
          if (value === "block") throw new Error("a broken check")
          return false
        })
        return { first: first === undefined ? [] : Chunk.toReadonlyArray(first), next: yield* Effect.exit(pull) }
      }))
      expect(got.first).toEqual(["start", "block"])
      expect(Exit.isFailure(got.next) && Cause.isDie(got.next.cause)).toBe(true)
    }))
})

/** Each event's data; the event `end` ends the stream, as `message_stop` or `[DONE]` does. */
const endingAtEnd: EventStream.EventDecoder<string> = {
  event: (message, out) => {
    out.push(message.data)
    return message.data === "end"
  },
  end: () => {}
}

/**
 * A server answering each request with events `one` and `end`, then `rest(res)` (what comes after the last event):
 * counts its connections, and tells whether each answer was written to its end or its connection closed before.
 */
const serveLastEvent = async (rest: (res: ServerResponse) => Promise<void>) => {
  let connections = 0
  const answers: Array<"ended" | "cut"> = []
  const server = createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.on("close", () => {
        answers.push(res.writableFinished ? "ended" : "cut")
      })
      res.write("data: one\n\ndata: end\n\n")
      void rest(res)
    })
  })
  server.on("connection", () => {
    connections++
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}/v1/messages`, connections: () => connections, answers }
}

describe("EventStream.openEventStream, the last event before the body's end", () => {
  it.effect("the body's end is read after the stream ended: the connection serves the next request, not a new one", () =>
    Effect.gen(function*() {
      // the end 50 ms after the last event: the stream has ended (and its scope closed) before it comes
      const upstream = yield* Effect.promise(() => serveLastEvent((res) => pause(50).then(() => void res.end())))
      const transport = Transport.makeTransport()
      const pulled = yield* readAllOn(transport, upstream.url, endingAtEnd)
      // the connection back in the pool (the answer's end read), then the next request
      yield* until(() => freeSockets(transport) === 1)
      const written: Array<string> = []
      const pushed = yield* Effect.scoped(Effect.gen(function*() {
        const pull = yield* EventStream.openEventStream(transport, call(upstream.url), endingAtEnd)
        return yield* Effect.exit(Push.pushOf(pull)!(keepingIn(written)))
      }))
      yield* until(() => upstream.answers.length === 2)
      transport.pool.destroy()
      expect(pulled).toEqual(["one", "end"])
      expect(Exit.isSuccess(pushed) && written).toEqual(["one", "end"])
      expect(upstream.answers).toEqual(["ended", "ended"])
      expect(upstream.connections()).toBe(1)
    }))

  it.effect("an in-band error ends the stream the same way; an event that cannot be read aborts the request", () =>
    Effect.gen(function*() {
      // `end` here is an error event: the decoder fails the stream on it, as on Anthropic's `event: error`
      const failingAt = (kind: Upstream.UpstreamFailure): EventStream.EventDecoder<string> => ({
        event: (message, out) => {
          if (message.data === "end") throw new Upstream.UpstreamError({ kind, message: "failed on an event" })
          out.push(message.data)
        },
        end: () => {}
      })
      const upstream = yield* Effect.promise(() => serveLastEvent((res) => pause(50).then(() => void res.end())))
      const transport = Transport.makeTransport()
      const overloaded = yield* Effect.either(readAllOn(transport, upstream.url, failingAt("overloaded")))
      yield* until(() => freeSockets(transport) === 1)
      const malformed = yield* Effect.either(readAllOn(transport, upstream.url, failingAt("transport")))
      yield* until(() => upstream.answers.length === 2)
      transport.pool.destroy()
      expect(Either.isLeft(overloaded) && overloaded.left.kind).toBe("overloaded")
      expect(Either.isLeft(malformed) && malformed.left.kind).toBe("transport")
      // the first answer read to its end on the one connection, then the second cut on it
      expect(upstream.answers).toEqual(["ended", "cut"])
      expect(upstream.connections()).toBe(1)
    }))

  it.effect(`a body whose end does not come within ${EventStream.DRAIN_MS} ms of the stream's end is aborted`, () =>
    Effect.gen(function*() {
      const upstream = yield* Effect.promise(() => serveLastEvent(() => Promise.resolve()))
      const transport = Transport.makeTransport()
      const started = Date.now()
      expect(yield* readAllOn(transport, upstream.url, endingAtEnd)).toEqual(["one", "end"])
      yield* Effect.promise(async () => {
        for (let i = 0; i < 300 && upstream.answers.length === 0; i++) await pause(10)
      })
      const waited = Date.now() - started
      transport.pool.destroy()
      expect(upstream.answers).toEqual(["cut"])
      expect(waited).toBeGreaterThanOrEqual(EventStream.DRAIN_MS - 50)
    }))

  it.effect(`more than ${EventStream.DRAIN_BYTES} bytes after the stream's end: aborted without waiting`, () =>
    Effect.gen(function*() {
      const upstream = yield* Effect.promise(() =>
        serveLastEvent(async (res) => {
          await pause(20)
          // comments, which no reader sees; held open after them
          for (let i = 0; i < 80 && !res.destroyed; i++) res.write(`: ${"x".repeat(1021)}\n`)
        })
      )
      const transport = Transport.makeTransport()
      const started = Date.now()
      expect(yield* readAllOn(transport, upstream.url, endingAtEnd)).toEqual(["one", "end"])
      yield* until(() => upstream.answers.length > 0)
      const waited = Date.now() - started
      transport.pool.destroy()
      expect(upstream.answers).toEqual(["cut"])
      expect(waited).toBeLessThan(EventStream.DRAIN_MS)
    }))
})

const freeSockets = (transport: Transport.Transport): number =>
  Object.values(transport.pool.agent(false).freeSockets).reduce((n, list) => n + (list?.length ?? 0), 0)
