/**
 * In-memory ports for the messages use case's tests: a catalogue, a usage log, endpoint statistics, session
 * affinity and a scripted upstream (JSON answers, and event streams built from arrays of pulls), with no socket.
 */
import { Chunk, Context, Effect, Option } from "effect"
import type { Principal } from "../../src/auth/Keys.js"
import * as Catalogue from "../../src/catalogue/Catalogue.js"
import type { GatewayError } from "../../src/errors/GatewayError.js"
import * as EndpointStats from "../../src/health/EndpointStats.js"
import * as MessagesService from "../../src/messages/MessagesService.js"
import type { JsonObject, Message, StreamEvent } from "../../src/messages/Wire.js"
import * as SessionAffinity from "../../src/sessions/SessionAffinity.js"
import * as PullUntil from "../../src/upstream/PullUntil.js"
import * as Push from "../../src/upstream/Push.js"
import type { EventPull, MessagesCall } from "../../src/upstream/Upstream.js"
import { Upstream, UpstreamError, type UpstreamFailure } from "../../src/upstream/Upstream.js"
import * as UsageLog from "../../src/usage/UsageLog.js"

// -----------------------------------------------------------------------------
// catalogue
// -----------------------------------------------------------------------------

/** An endpoint `${model}@${provider}` whose upstream model id is `${provider}-${model}`. */
export const endpoint = (
  modelId: string,
  provider: string,
  overrides: Partial<Catalogue.Endpoint> = {}
): Catalogue.Endpoint => ({
  id: `${modelId}@${provider}`,
  modelId,
  provider,
  upstreamModel: `${provider}-${modelId}`,
  pricing: { prompt: "0.000001", completion: "0.000002", request: "0", image: "0" },
  zdr: false,
  dataCollection: "allow",
  supportsVoiceCloning: false,
  supportsMultipleAudioReferences: false,
  supportsImageReference: false,
  ...overrides
})

export const model = (id: string, ...endpoints: ReadonlyArray<Catalogue.Endpoint>): Catalogue.Model => ({
  id,
  name: id,
  endpoints
})

// -----------------------------------------------------------------------------
// upstream
// -----------------------------------------------------------------------------

export const failure = (kind: UpstreamFailure, status?: number): UpstreamError =>
  new UpstreamError({ kind, message: `upstream ${kind}`, status })

/** A JSON answer with one text block. */
export const message = (id: string, text: string, input: number, output: number): Message => ({
  id,
  type: "message",
  role: "assistant",
  model: "upstream-model",
  content: [{ type: "text", text }],
  stop_reason: "end_turn",
  stop_sequence: null,
  usage: { input_tokens: input, output_tokens: output }
})

/** One pull of a scripted stream: the events it gives, or the failure it fails with. */
export type Pull = ReadonlyArray<StreamEvent> | UpstreamError

/** The pulls of a whole streamed answer: lifecycle frames, `deltas` text deltas, then the end. */
export const streamed = (id: string, deltas: ReadonlyArray<string>, input: number, output: number): Array<Pull> => [
  [
    {
      type: "message_start",
      message: { ...message(id, "", input, 1), content: [], stop_reason: null }
    },
    { type: "ping" },
    { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }
  ],
  deltas.map((text) => ({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } })),
  [
    { type: "content_block_stop", index: 0 },
    { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: output } },
    { type: "message_stop" }
  ]
]

/** What each endpoint answers, by endpoint id: a message or a failure (JSON), pulls or a failure to open (streams). */
export interface Script {
  readonly json?: Record<string, Message | UpstreamError>
  readonly stream?: Record<string, ReadonlyArray<Pull> | UpstreamError>
  /** The streams can push as well as be pulled, as the transport's can. */
  readonly pushing?: boolean
  /** The streams can be pulled until (see `PullUntil`), as the transport's can. */
  readonly pullingUntil?: boolean
}

export interface FakeUpstream {
  readonly context: Context.Context<Upstream>
  /** Every call, in order. */
  readonly calls: Array<MessagesCall>
  /** Endpoint ids whose stream was released (its scope closed), in order. */
  readonly released: Array<string>
  /** How the streams were read, in order: each pull, each pull until, each push. */
  readonly reads: Array<"pull" | "until" | "push">
}

/**
 * The scripted pulls; with `pushing`, also able to push them (see `Push`): each in turn to the writer, waiting for its
 * `resume` whenever it returns false.
 */
const pullOf = (
  pulls: ReadonlyArray<Pull>,
  script: Script,
  reads: Array<"pull" | "until" | "push">
): EventPull => {
  let next = 0
  let pull: EventPull = Effect.suspend(() => {
    reads.push("pull")
    if (next >= pulls.length) return Effect.succeed(undefined)
    const pull = pulls[next++]
    return pull instanceof UpstreamError ? Effect.fail(pull) : Effect.succeed(Chunk.fromIterable(pull))
  })
  if (script.pullingUntil === true) {
    // The scripted pulls' events together, up to the pull that has one satisfying `stop`, the end, or a failure (given
    // alone when nothing comes before it).
    pull = PullUntil.withUntil(pull, (stop) =>
      Effect.suspend(() => {
        reads.push("until")
        const values: Array<StreamEvent> = []
        while (next < pulls.length) {
          const pull = pulls[next]
          if (pull instanceof UpstreamError) {
            if (values.length > 0) break
            next++
            return Effect.fail(pull)
          }
          next++
          values.push(...pull)
          if (pull.some(stop)) break
        }
        return Effect.succeed(values.length === 0 ? undefined : Chunk.fromIterable(values))
      }))
  }
  if (script.pushing !== true) return pull
  return Push.pushable(pull, (write) =>
    Effect.async((resume) => {
      reads.push("push")
      const run = (): void => {
        while (next < pulls.length) {
          const pull = pulls[next++]
          if (pull instanceof UpstreamError) return resume(Effect.fail(pull))
          if (!write([...pull], run)) return
        }
        resume(Effect.void)
      }
      run()
    }))
}

export const fakeUpstream = (script: Script): FakeUpstream => {
  const calls: Array<MessagesCall> = []
  const released: Array<string> = []
  const reads: Array<"pull" | "until" | "push"> = []
  const missing = () => failure("not_found", 404)
  const context = Context.make(Upstream, {
    createMessage: (call) =>
      Effect.suspend(() => {
        calls.push(call)
        const answer = script.json?.[call.endpoint.id] ?? missing()
        return answer instanceof UpstreamError ? Effect.fail(answer) : Effect.succeed(structuredClone(answer))
      }),
    streamMessage: (call) =>
      Effect.suspend(() => {
        calls.push(call)
        const answer = script.stream?.[call.endpoint.id] ?? missing()
        if (answer instanceof UpstreamError) return Effect.fail(answer)
        return Effect.acquireRelease(
          Effect.succeed(pullOf(answer, script, reads)),
          () => Effect.sync(() => released.push(call.endpoint.id))
        )
      })
  })
  return { context, calls, released, reads }
}

// -----------------------------------------------------------------------------
// stores
// -----------------------------------------------------------------------------

export interface Stores {
  readonly context: Context.Context<UsageLog.UsageLog | EndpointStats.EndpointStats | SessionAffinity.SessionAffinity>
  readonly usage: Array<UsageLog.UsageRecord>
  readonly attempts: Array<EndpointStats.AttemptRecord>
  readonly sessions: Map<string, string>
}

export const stores = (): Stores => {
  const usage: Array<UsageLog.UsageRecord> = []
  const attempts: Array<EndpointStats.AttemptRecord> = []
  const sessions = new Map<string, string>()
  const context = Context.make(UsageLog.UsageLog, {
    record: (record) => Effect.sync(() => void usage.push(record)),
    flush: Effect.void,
    list: () => Effect.sync(() => [...usage].reverse())
  }).pipe(
    Context.add(EndpointStats.EndpointStats, {
      record: (attempt) => Effect.sync(() => void attempts.push(attempt)),
      snapshot: Effect.succeed(EndpointStats.emptySnapshot)
    }),
    Context.add(SessionAffinity.SessionAffinity, {
      get: (key) => Effect.sync(() => Option.fromNullable(sessions.get(key))),
      set: (key, endpointId) => Effect.sync(() => void sessions.set(key, endpointId))
    })
  )
  return { context, usage, attempts, sessions }
}

// -----------------------------------------------------------------------------
// the use case
// -----------------------------------------------------------------------------

export interface Gateway {
  readonly create: (
    body: unknown,
    context?: Partial<MessagesService.RequestContext>
  ) => Effect.Effect<MessagesService.MessagesOutcome, GatewayError>
  readonly upstream: FakeUpstream
  readonly stores: Stores
}

const principal: Principal = { keyId: "key_1", workspace: "ws", management: false, interns: false }

export const requestContext = (
  overrides: Partial<MessagesService.RequestContext> = {}
): MessagesService.RequestContext => ({
  requestId: "req_1",
  route: "POST /v1/messages",
  principal,
  metadata: false,
  headers: {},
  app: {},
  ...overrides
})

/**
 * The use case over these fakes, with optional plugin ports. Given as a `Context` rather than layers: building
 * merged layers forks fibers, which costs a test milliseconds.
 */
export const gateway = (
  models: ReadonlyArray<Catalogue.Model>,
  script: Script,
  options: {
    readonly plugins?: Context.Context<any>
    readonly messages?: MessagesService.MessagesOptions
  } = {}
): Effect.Effect<Gateway> => {
  const upstream = fakeUpstream(script)
  const fakes = stores()
  const ports = Context.make(Catalogue.Catalogue, Catalogue.fromSnapshot(Catalogue.makeSnapshot(models))).pipe(
    Context.merge(upstream.context),
    Context.merge(fakes.context),
    Context.merge(options.plugins ?? Context.empty())
  )
  return Effect.map(
    Effect.provide(MessagesService.make(options.messages), ports),
    (service) => ({
      create: (body, context) => service.create(requestContext(context), body),
      upstream,
      stores: fakes
    })
  )
}

/** One SSE frame as the client reads it. */
export interface Frame {
  readonly event: string
  readonly data: JsonObject
}

const parseFrame = (frame: string): Frame => {
  const match = /^event: (.*)\ndata: (.*)\n\n$/s.exec(frame)
  if (match === null) throw new Error(`not an SSE frame: ${JSON.stringify(frame)}`)
  return { event: match[1], data: JSON.parse(match[2]) }
}

/** Reads a streamed outcome to its end, as a binding does (a loop of pulls in a scope), then closes the scope. */
export const readFrames = (outcome: MessagesService.MessagesOutcome): Effect.Effect<Array<Frame>> => {
  if (outcome._tag !== "Stream") return Effect.die(new Error("expected a stream"))
  return Effect.scoped(Effect.flatMap(outcome.open, (pull) =>
    Effect.gen(function*() {
      const frames: Array<Frame> = []
      for (;;) {
        const chunk = yield* pull
        if (chunk === undefined) return frames
        for (const frame of chunk) frames.push(parseFrame(frame))
      }
    })))
}

/**
 * Reads a streamed outcome as the node binding does when the frames can be pushed: the first pull (the frames held
 * until the first content), then the rest pushed to `write` (by default, one that takes everything at once). With
 * `pullFirst` false, everything is pushed.
 */
export const pushFrames = (
  outcome: MessagesService.MessagesOutcome,
  write: (frames: ReadonlyArray<Frame>, resume: () => void, last: boolean) => boolean = () => true,
  pullFirst = true
): Effect.Effect<Array<Frame>> => {
  if (outcome._tag !== "Stream") return Effect.die(new Error("expected a stream"))
  return Effect.scoped(Effect.flatMap(outcome.open, (pull) =>
    Effect.gen(function*() {
      const push = Push.pushOf(pull)
      if (push === undefined) return yield* Effect.die(new Error("the frames cannot be pushed"))
      const frames: Array<Frame> = []
      if (pullFirst) {
        const first = yield* pull
        if (first === undefined) return frames
        for (const frame of first) frames.push(parseFrame(frame))
      }
      yield* push((chunk, resume, last) => {
        const parsed = chunk.map(parseFrame)
        frames.push(...parsed)
        return write(parsed, resume, last === true)
      })
      return frames
    })))
}

/** A user turn. */
export const ask = (text: string) => [{ role: "user", content: text }]
