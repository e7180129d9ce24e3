import { assert, describe, it } from "@effect/vitest"
import { Chunk, Context, Effect, Fiber } from "effect"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import * as Catalogue from "../../src/catalogue/Catalogue.js"
import * as MessagesService from "../../src/messages/MessagesService.js"
import * as Wire from "../../src/messages/Wire.js"
import * as SessionAffinity from "../../src/sessions/SessionAffinity.js"
import { Upstream } from "../../src/upstream/Upstream.js"
import type { Pull } from "./Fakes.js"
import {
  ask,
  endpoint,
  failure,
  gateway,
  model,
  pushFrames,
  readFrames,
  requestContext,
  stores,
  streamed
} from "./Fakes.js"

const models = [
  model("a", endpoint("a", "p1")),
  model("b", endpoint("b", "p2")),
  model("c", endpoint("c", "p3", { pricing: { prompt: "0.00001", completion: "0.00002", request: "0", image: "0" } }))
]
const request = (fallbacks: ReadonlyArray<string> = []) => ({
  model: "a",
  fallbacks: fallbacks.map((m) => ({ model: m })),
  max_tokens: 16,
  stream: true,
  messages: ask("hello")
})
const names = (frames: ReadonlyArray<{ event: string }>) => frames.map((f) => f.event)
const wholeAnswer = [
  "message_start",
  "ping",
  "content_block_start",
  "content_block_delta",
  "content_block_delta",
  "content_block_stop",
  "message_delta",
  "message_stop"
]

describe("stream commitment", () => {
  it.effect("every attempt failing, the last refusing to express the request: the earlier failure is told", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, {
        stream: { "a@p1": failure("overloaded", 529), "b@p2": failure("unsupported") }
      })
      const error = yield* Effect.flip(g.create(request(["b"])))
      assert.strictEqual(error._tag, "Overloaded")
    }))

  it.effect("falls back before the first content: the failed attempts' lifecycle frames are never sent", () =>
    Effect.gen(function*() {
      const [start] = streamed("msg_b", [], 3, 0)
      const g = yield* gateway(models, {
        stream: {
          "a@p1": failure("rate_limited", 429),
          "b@p2": [start, failure("overloaded", 529)],
          "c@p3": streamed("msg_c", ["Hel", "lo"], 10, 5)
        }
      })
      const outcome = yield* g.create(request(["b", "c"]))
      // b's stream was released as soon as it failed, before c's answer is read
      assert.deepStrictEqual(g.stores.attempts.map((a) => [a.endpointId, a.outcome]), [
        ["a@p1", "rate_limited"],
        ["b@p2", "overloaded"]
      ])
      assert.deepStrictEqual(g.upstream.released, ["b@p2"])
      const frames = yield* readFrames(outcome)
      assert.deepStrictEqual(names(frames), wholeAnswer)
      const message = frames[0].data.message as any
      assert.strictEqual(message.id, "msg_c")
      assert.strictEqual(message.model, "c")
      assert.strictEqual(message.provider, "p3")
      assert.deepStrictEqual(
        frames.filter((f) => f.event === "content_block_delta").map((f: any) => f.data.delta.text),
        [
          "Hel",
          "lo"
        ]
      )
      assert.deepStrictEqual(g.upstream.released, ["b@p2", "c@p3"])
      assert.strictEqual(g.stores.usage.length, 1)
      assert.deepInclude(g.stores.usage[0], {
        model: "c",
        provider: "p3",
        endpointId: "c@p3",
        stream: true,
        status: 200,
        errorType: null,
        inputTokens: 10,
        outputTokens: 5,
        // 10 × 0.00001 + 5 × 0.00002, at c's prices only
        cost: "0.0002",
        attempts: 3
      })
      assert.deepStrictEqual(g.stores.attempts.at(-1), {
        endpointId: "c@p3",
        at: 0,
        ttfbMs: 0,
        latencyMs: 0,
        outputTokens: 5,
        outcome: "ok",
        retryAfterMs: undefined
      })
      const delta = frames.find((f) => f.event === "message_delta")!.data as any
      assert.strictEqual(delta.usage.output_tokens, 5)
      assert.strictEqual(delta.usage.cost, 0.0002)
    }))

  it.effect("an attempt that ends before any content falls back like a failure", () =>
    Effect.gen(function*() {
      const [start] = streamed("msg_a", [], 3, 0)
      const g = yield* gateway(models, {
        stream: { "a@p1": [start], "b@p2": streamed("msg_b", ["x"], 1, 1) }
      })
      const frames = yield* readFrames(yield* g.create(request(["b"])))
      assert.deepStrictEqual(frames.filter((f) => f.event === "message_start").map((f: any) => f.data.message.id), [
        "msg_b"
      ])
      assert.deepInclude(g.stores.usage[0], { attempts: 2, endpointId: "b@p2" })
    }))

  it.effect("a failure after content becomes an in-band error frame, and the stream still ends", () =>
    Effect.gen(function*() {
      const [start, deltas] = streamed("msg_a", ["partial"], 3, 0)
      const g = yield* gateway(models, {
        stream: { "a@p1": [start, deltas, failure("transport")], "b@p2": streamed("msg_b", ["x"], 1, 1) }
      })
      const frames = yield* readFrames(yield* g.create(request(["b"])))
      assert.deepStrictEqual(names(frames), [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "error"
      ])
      assert.deepStrictEqual(frames.at(-1)!.data, {
        type: "error",
        error: { type: "overloaded_error", message: "upstream transport" },
        request_id: "req_1"
      })
      // no fallback once content has reached the client
      assert.deepStrictEqual(g.upstream.calls.map((c) => c.endpoint.id), ["a@p1"])
      assert.deepStrictEqual(g.upstream.released, ["a@p1"])
      assert.deepInclude(g.stores.usage[0], { status: 200, errorType: "overloaded_error", attempts: 1 })
      assert.deepStrictEqual(g.stores.attempts.map((a) => [a.endpointId, a.outcome]), [["a@p1", "error"]])
    }))

  it.effect("an upstream that ends without message_stop gets an error frame appended: never a silent truncation", () =>
    Effect.gen(function*() {
      const [start, deltas] = streamed("msg_a", ["partial"], 3, 0)
      const cut: Array<Pull> = [start, deltas, [{ type: "content_block_stop", index: 0 }]]
      const g = yield* gateway(models, { stream: { "a@p1": cut } })
      const frames = yield* readFrames(yield* g.create(request()))
      assert.deepStrictEqual(names(frames).slice(-2), ["content_block_stop", "error"])
      assert.deepStrictEqual((frames.at(-1)!.data as any).error, {
        type: "api_error",
        message: "upstream stream ended before message_stop"
      })
      assert.deepInclude(g.stores.usage[0], { status: 200, errorType: "api_error" })
    }))

  it.effect("a 400-class failure before content is not retried", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, {
        stream: { "a@p1": failure("invalid_request", 400), "b@p2": streamed("msg_b", ["x"], 1, 1) }
      })
      const error = yield* Effect.flip(g.create(request(["b"])))
      assert.strictEqual(error._tag, "UpstreamRejected")
      assert.deepStrictEqual(g.upstream.calls.map((c) => c.endpoint.id), ["a@p1"])
      assert.deepInclude(g.stores.usage[0], { stream: true, status: 400, attempts: 1, provider: null })
    }))

  it.effect("every attempt failing before content: the last failure, nothing streamed, every stream released", () =>
    Effect.gen(function*() {
      const [start] = streamed("msg_a", [], 3, 0)
      const g = yield* gateway(models, {
        stream: { "a@p1": [start, failure("overloaded", 529)], "b@p2": [failure("timeout")] }
      })
      const error = yield* Effect.flip(g.create(request(["b"])))
      assert.strictEqual(error._tag, "UpstreamTimeout")
      assert.deepStrictEqual(g.upstream.released, ["a@p1", "b@p2"])
      assert.strictEqual(g.stores.usage.length, 1)
      assert.deepInclude(g.stores.usage[0], { status: 504, errorType: "timeout_error", attempts: 2 })
    }))
})

describe("what a committed stream is billed", () => {
  // Model a's pricing: $0.000001 an input token, $0.000002 an output token.
  const text = ["a".repeat(40), "b".repeat(20)]

  it.effect("cut short after content: the input its upstream told, the output its content carried (estimated)", () =>
    Effect.gen(function*() {
      const [start, deltas] = streamed("msg_a", text.slice(0, 1), 3, 0)
      // A delta passed on unparsed (as the Anthropic adapter passes most) counts the same.
      const raw = Wire.unparsed(
        "content_block_delta",
        `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"${text[1]}"}}`
      )!
      const g = yield* gateway(models, { stream: { "a@p1": [start, deltas, [raw], failure("transport")] } })
      const frames = yield* readFrames(yield* g.create(request()))
      assert.strictEqual(frames.at(-1)!.event, "error")
      // 60 characters of text: 15 tokens, not the 1 its message_start told.
      assert.deepInclude(g.stores.usage[0], { inputTokens: 3, outputTokens: 15, cost: "0.000033" })
      assert.deepInclude(g.stores.attempts[0], { outputTokens: 15 })
    }))

  it.effect("nothing told of its prompt (an OpenAI-compatible upstream tells it last): estimated from the body", () =>
    Effect.gen(function*() {
      const [start, deltas] = streamed("msg_a", text, 0, 0)
      const cut: Array<Pull> = [start, deltas, [{ type: "content_block_stop", index: 0 }]]
      const g = yield* gateway(models, { stream: { "a@p1": cut } })
      yield* readFrames(yield* g.create(request(), { bodyBytes: 2_000 }))
      assert.deepInclude(g.stores.usage[0], { inputTokens: 500, outputTokens: 15, cost: "0.00053" })
    }))

  it.effect("complete: what its upstream told, not the estimate", () =>
    Effect.gen(function*() {
      const g = yield* gateway(models, { stream: { "a@p1": streamed("msg_a", text, 3, 2) } })
      yield* readFrames(yield* g.create(request(), { bodyBytes: 2_000 }))
      assert.deepInclude(g.stores.usage[0], { inputTokens: 3, outputTokens: 2, cost: "0.000007" })
    }))
})

/**
 * The frames pushed, as `pushFrames` reads them, and the events of each write that had some, with whether the write was
 * told it held the end. The end's own frames (a trailer; none for messages) may come as an empty write: the writer has
 * nothing to send then.
 */
const pushedWrites = (outcome: MessagesService.MessagesOutcome) =>
  Effect.gen(function*() {
    const writes: Array<{ readonly names: Array<string>; readonly last: boolean }> = []
    const frames = yield* pushFrames(outcome, (pushed, _resume, last) => {
      if (pushed.length > 0) writes.push({ names: pushed.map((f) => f.event), last })
      return true
    })
    return { frames, writes }
  })

describe("pushed stream frames (the upstream can push, as the transport's streams can)", () => {
  it.effect("the same frames and records as pulled: the held frames by the first pull, the rest pushed", () =>
    Effect.gen(function*() {
      const script = (pushing: boolean) => ({
        pushing,
        stream: {
          "a@p1": failure("rate_limited", 429),
          "c@p3": streamed("msg_c", ["Hel", "lo", " there"], 10, 5)
        }
      })
      const pulled = yield* gateway(models, script(false))
      const pulledFrames = yield* readFrames(yield* pulled.create(request(["c"])))
      const pushed = yield* gateway(models, script(true))
      const pushedFrames = yield* pushFrames(yield* pushed.create(request(["c"])))
      assert.deepStrictEqual(names(pushedFrames), wholeAnswer.slice(0, 5).concat(wholeAnswer.slice(4)))
      assert.deepStrictEqual(pushedFrames, pulledFrames)
      assert.deepStrictEqual(pushed.stores.usage, pulled.stores.usage)
      assert.deepStrictEqual(pushed.stores.attempts, pulled.stores.attempts)
      assert.deepStrictEqual(pushed.upstream.released, ["c@p3"])
      const delta = pushedFrames.find((f) => f.event === "message_delta")!.data as any
      assert.strictEqual(delta.usage.cost, 0.0002)
    }))

  it.effect("the frames that hold the end are pushed as the last, and only they", () =>
    Effect.gen(function*() {
      const [start, deltas, end] = streamed("msg_a", ["Hel", "lo"], 3, 2)
      const g = yield* gateway(models, { pushing: true, stream: { "a@p1": [start, deltas, deltas, end] } })
      const { writes } = yield* pushedWrites(yield* g.create(request()))
      assert.isAbove(writes.length, 1)
      assert.deepStrictEqual(writes.map((w) => w.last), writes.map((_, i) => i === writes.length - 1))
      assert.include(writes.at(-1)!.names, "message_stop")
    }))

  it.effect("pushed from the start, without a first pull: the held frames first, then the rest", () =>
    Effect.gen(function*() {
      const script = (pushing: boolean) => ({ pushing, stream: { "a@p1": streamed("msg_a", ["Hel", "lo"], 3, 2) } })
      const pulled = yield* gateway(models, script(false))
      const pulledFrames = yield* readFrames(yield* pulled.create(request()))
      const pushed = yield* gateway(models, script(true))
      const pushedFrames = yield* pushFrames(yield* pushed.create(request()), undefined, false)
      assert.deepStrictEqual(names(pushedFrames), wholeAnswer)
      assert.deepStrictEqual(pushedFrames, pulledFrames)
    }))

  it.effect("an answer without content, ended before the commit, pushed: its frames, the same as pulled", () =>
    Effect.gen(function*() {
      const script = (pushing: boolean) => ({ pushing, stream: { "a@p1": streamed("msg_a", [], 3, 0) } })
      const pulled = yield* gateway(models, script(false))
      const pulledFrames = yield* readFrames(yield* pulled.create(request()))
      for (const pullFirst of [true, false]) {
        const pushed = yield* gateway(models, script(true))
        const pushedFrames = yield* pushFrames(yield* pushed.create(request()), undefined, pullFirst)
        assert.deepStrictEqual(names(pushedFrames), names(pulledFrames))
        assert.deepStrictEqual(pushedFrames, pulledFrames)
        assert.deepStrictEqual(pushed.stores.usage, pulled.stores.usage)
      }
      assert.deepStrictEqual(names(pulledFrames).at(-1), "message_stop")
    }))

  it.effect("a failure after content, pushed: the in-band error frame ends the frames, as the last, and is recorded", () =>
    Effect.gen(function*() {
      const [start, deltas] = streamed("msg_a", ["partial"], 3, 0)
      const g = yield* gateway(models, {
        pushing: true,
        stream: { "a@p1": [start, deltas, [{ type: "content_block_delta", index: 0 }], failure("transport")] }
      })
      const { frames, writes } = yield* pushedWrites(yield* g.create(request()))
      assert.deepStrictEqual(writes.at(-1), { names: ["error"], last: true })
      assert.isTrue(writes.slice(0, -1).every((w) => !w.last))
      assert.deepStrictEqual(names(frames).slice(-3), ["content_block_delta", "content_block_delta", "error"])
      assert.deepStrictEqual(frames.at(-1)!.data, {
        type: "error",
        error: { type: "overloaded_error", message: "upstream transport" },
        request_id: "req_1"
      })
      assert.deepInclude(g.stores.usage[0], { status: 200, errorType: "overloaded_error", attempts: 1 })
      assert.deepStrictEqual(g.stores.attempts.map((a) => [a.endpointId, a.outcome]), [["a@p1", "error"]])
    }))

  it.effect("an end without message_stop, pushed: an error frame appended, never a silent truncation", () =>
    Effect.gen(function*() {
      const [start, deltas] = streamed("msg_a", ["partial"], 3, 0)
      const g = yield* gateway(models, {
        pushing: true,
        stream: { "a@p1": [start, deltas, [{ type: "content_block_delta", index: 0 }]] }
      })
      const frames = yield* pushFrames(yield* g.create(request()))
      assert.deepStrictEqual(names(frames).slice(-2), ["content_block_delta", "error"])
      assert.deepStrictEqual((frames.at(-1)!.data as any).error, {
        type: "api_error",
        message: "upstream stream ended before message_stop"
      })
    }))

  it.effect("a source that can pull until: one wait for the events before the first content; the same frames and records", () =>
    Effect.gen(function*() {
      // each lifecycle event in a read of its own, as an upstream may write them; a's fails before any content
      const [start, deltas, end] = streamed("msg_b", ["Hel", "lo"], 3, 2)
      const apart = (events: Pull): Array<Pull> => (Array.isArray(events) ? events.map((e) => [e]) : [events])
      const script = (pullingUntil: boolean) => ({
        pushing: true,
        pullingUntil,
        stream: {
          "a@p1": [...apart(start).slice(0, 2), failure("overloaded", 529)],
          "b@p2": [...apart(start), deltas, end]
        }
      })
      const pulled = yield* gateway(models, script(false))
      const pulledFrames = yield* pushFrames(yield* pulled.create(request(["b"])))
      const until = yield* gateway(models, script(true))
      const untilFrames = yield* pushFrames(yield* until.create(request(["b"])))
      assert.deepStrictEqual(names(untilFrames), wholeAnswer)
      assert.deepStrictEqual(untilFrames, pulledFrames)
      assert.deepStrictEqual(until.stores.usage, pulled.stores.usage)
      assert.deepStrictEqual(until.stores.attempts, pulled.stores.attempts)
      // a: its two events, then its failure; b: its three lifecycle events and its first deltas at once; then pushed
      assert.deepStrictEqual(until.upstream.reads, ["until", "until", "until", "push"])
      assert.deepStrictEqual(pulled.upstream.reads, ["pull", "pull", "pull", "pull", "pull", "pull", "pull", "push"])
    }))

  it.effect("a writer that asks to wait gets nothing more until it resumes the source", () =>
    Effect.gen(function*() {
      const [start, deltas, end] = streamed("msg_a", ["one"], 3, 2)
      const g = yield* gateway(models, {
        pushing: true,
        stream: { "a@p1": [start, deltas, [{ type: "content_block_delta", index: 0, delta: { text: "two" } }], end] }
      })
      const outcome = yield* g.create(request())
      let waiting: (() => void) | undefined
      let writes = 0
      const fiber = yield* Effect.fork(pushFrames(outcome, (_frames, resume) => {
        writes++
        if (writes > 1) return true
        waiting = resume
        return false
      }))
      yield* Effect.yieldNow()
      // the first push wrote the second delta and waits: nothing else was written
      assert.strictEqual(writes, 1)
      assert.isDefined(waiting)
      waiting!()
      const frames = yield* Fiber.join(fiber)
      assert.deepStrictEqual(names(frames), wholeAnswer)
      // then the last events, then the end (nothing more to write: Anthropic's stream has no trailer)
      assert.strictEqual(writes, 3)
    }))

  it.effect("interrupted after the commit, before the stream is handed over: its request released, its usage recorded", () =>
    Effect.gen(function*() {
      let setting = false
      // the session's endpoint is being stored (a database round trip, say) when the client leaves
      const affinity = Context.make(SessionAffinity.SessionAffinity, {
        get: () => Effect.succeedNone,
        set: () => Effect.zipRight(Effect.sync(() => (setting = true)), Effect.never)
      })
      const g = yield* gateway(models, { stream: { "a@p1": streamed("msg_a", ["Hi"], 3, 2) } }, { plugins: affinity })
      const fiber = yield* Effect.fork(g.create({ ...request(), session_id: "s1" }))
      while (!setting) yield* Effect.yieldNow()
      assert.deepStrictEqual(g.upstream.released, [])
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(g.upstream.released, ["a@p1"])
      assert.strictEqual(g.stores.usage.length, 1)
      assert.deepInclude(g.stores.usage[0], { endpointId: "a@p1", stream: true, status: 200 })
    }))
})

describe("the fiber's context, when an attempt's opening fails", () => {
  // An attempt is opened with its scope as its whole context (`eitherIn`): a fiber that unwinds from there must have its
  // own services back before anything up the stack reads one (a route records a failure with its usage log, say).
  class Marker extends Context.Tag("test/Marker")<Marker, string>() {}
  const seenOnExit = (opening: Effect.Effect<never>, interrupt: boolean) =>
    Effect.gen(function*() {
      let opened = false
      const upstream = Context.make(Upstream, {
        createMessage: () => Effect.die("not called"),
        streamMessage: () => Effect.suspend(() => (opened = true, opening))
      })
      const g = yield* gateway(models, {}, { plugins: upstream })
      let seen: string | undefined
      const create = Effect.onExit(g.create(request()), () => Effect.map(Marker, (marker) => (seen = marker)))
      const fiber = yield* Effect.fork(Effect.provideService(create, Marker, "the caller's"))
      if (interrupt) {
        while (!opened) yield* Effect.yieldNow()
        yield* Fiber.interrupt(fiber)
      } else {
        yield* Fiber.await(fiber)
      }
      return seen
    })

  it.effect("a defect in the adapter's open", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* seenOnExit(Effect.die(new Error("boom")), false), "the caller's")
    }))

  it.effect("interrupted while the attempt is being opened", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* seenOnExit(Effect.never, true), "the caller's")
    }))
})

describe("what an open stream holds", () => {
  it.live("its first events no longer, once they are written", () =>
    Effect.gen(function*() {
      setFlagsFromString("--expose-gc")
      const gc = runInNewContext("gc") as () => void
      // An upstream whose first read gives the events up to the first content, made then (nothing else holds them),
      // and whose stream then stays open.
      let first: WeakRef<object> | undefined
      let reads = 0
      const upstream = Context.make(Upstream, {
        createMessage: () => Effect.die("not streamed"),
        streamMessage: () =>
          Effect.succeed(Effect.suspend(() => {
            if (reads++ > 0) return Effect.never
            const [lifecycle, deltas] = streamed("msg_a", ["Hel"], 3, 1)
            const events = [...(lifecycle as ReadonlyArray<object>), ...(deltas as ReadonlyArray<object>)]
            first = new WeakRef(events[0])
            return Effect.succeed(Chunk.fromIterable(events) as any)
          }))
      })
      const ports = Context.make(Catalogue.Catalogue, Catalogue.fromSnapshot(Catalogue.makeSnapshot(models))).pipe(
        Context.merge(upstream),
        Context.merge(stores().context)
      )
      const service = yield* Effect.provide(MessagesService.make(), ports)
      const outcome = yield* service.create(requestContext(), request())
      assert.strictEqual(outcome._tag, "Stream")
      if (outcome._tag !== "Stream" || outcome.claim === undefined) return
      const { pull, release } = yield* outcome.claim
      const held = yield* pull
      assert.strictEqual(held?.length, 4)
      yield* Effect.promise(async () => {
        for (let i = 0; i < 3; i++) {
          gc()
          await new Promise((resolve) => setTimeout(resolve, 10))
        }
      })
      assert.isUndefined(first?.deref(), "the message_start event is still held")
      yield* release
    }))
})
