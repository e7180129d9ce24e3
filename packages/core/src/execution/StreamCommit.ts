/**
 * Streamed answers: attempts are opened in order until one has content, its lifecycle events held back until then
 * so that a failure before content can still fall back. Once committed, events are decorated as they come, and a
 * failure, or an end without the dialect's end event, becomes an in-band error frame: never a silent truncation.
 * The same for every API: its dialect says what content, an end and an error frame are.
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as Scope from "effect/Scope"
import * as GatewayError from "../errors/GatewayError.js"
import { closeWithEnclosing, eitherIn } from "../internal/Scopes.js"
import type { Attempt } from "../routing/RoutePlanner.js"
import * as PullUntil from "../upstream/PullUntil.js"
import * as Push from "../upstream/Push.js"
import { nextAttempt, telling, toGatewayError, UpstreamError } from "../upstream/Upstream.js"
import { failureStep, outcomeOf, recordAttempt, recordFailedAttempt, remember, successStep } from "./Attempts.js"
import * as Charging from "./Charging.js"
import {
  type Dialect,
  type FrameContext,
  type FrameDialect,
  type Pull,
  type StreamState,
  streamState
} from "./Dialect.js"
import { type Execution, executionOf, type ExecutionResult, type ExecutorPorts, type Planned } from "./Execution.js"
import { type FramePull, streamOutcome } from "./Outcome.js"
import * as UntoldUsage from "./UntoldUsage.js"

/** The attempt that produced content first, with the events it gave until then. */
interface Committed<E> {
  readonly _tag: "Committed"
  readonly attempt: Attempt
  /** Attempts that failed before this one. */
  readonly index: number
  readonly attemptStart: number
  /** Owns the attempt's upstream request; closed when the stream ends. */
  readonly scope: Scope.CloseableScope
  /** Emptied once written (`framePull`): an open stream no longer holds its first events. */
  held: ReadonlyArray<E>
  /** The attempt's next events; not to be pulled when `done` (its end event is held already). */
  readonly pull: Pull<E>
  readonly done: boolean
  readonly firstContentAt: number
}

type Commitment<E> = Committed<E> | {
  readonly _tag: "Failed"
  readonly error: GatewayError.GatewayError
  readonly tried: number
}

/**
 * The streamed answer of a planned request. The committed attempt's scope lives as long as the returned stream: it
 * owns the upstream request, and closing it writes the records. Until the stream is handed over, a failure or an
 * interruption closes the scope of the attempt being opened (and so aborts its request, and records a committed one),
 * and puts the fiber's context back: one interrupted while an attempt was being opened holds that attempt's (see
 * `eitherIn`).
 */
export const stream = <A, E>(
  ports: ExecutorPorts,
  planned: Planned<A, E>
): Effect.Effect<ExecutionResult<A>, GatewayError.GatewayError> =>
  Effect.withFiberRuntime((fiber) => {
    const opening: Opening = { scope: undefined }
    const context = fiber.currentContext
    return Effect.onExit(
      Effect.flatMap(commit(ports, planned, opening), (committed) => {
        if (committed._tag === "Failed") {
          return Charging.failed(ports.usageLog, planned.run, committed.error, committed.tried)
        }
        planned.run.steps.push(successStep(committed.attempt, committed.index))
        const result = told<A, E>(ports, tellingOf(planned), committed)
        const writes = remember(ports, planned, committed.attempt, storedIn(planned.dialect.frames, committed.held))
        return writes === undefined ? result : Effect.zipLeft(result, writes)
      }),
      (exit) => {
        if (Exit.isSuccess(exit)) return Effect.void
        const restored = FiberRef.set(FiberRef.currentContext, context)
        return opening.scope === undefined ? restored : Effect.zipRight(restored, Scope.close(opening.scope, exit))
      }
    )
  })

/**
 * The id under which the upstream stores a committed stream's answer, from the events held until its first content (a
 * Responses stream's `response.created`, or its `response.completed` when it ended before content).
 */
const storedIn = <E>(frames: FrameDialect<E>, held: ReadonlyArray<E>): string | undefined => {
  const storedAs = frames.storedAs
  if (storedAs === undefined) return undefined
  for (const event of held) {
    const id = storedAs(event)
    if (id !== undefined) return id
  }
  return undefined
}

/** The scope of the attempt being opened, or of the committed one; undefined between two attempts. */
interface Opening {
  scope: Scope.CloseableScope | undefined
}

/**
 * The committed stream's outcome, and its records added to its scope. Apart from `stream`: a closure made there would
 * hold `stream`'s context, and with it the planned execution (see `Telling`), until the stream ends.
 */
const told = <A, E>(
  ports: ExecutorPorts,
  telling: Telling<E>,
  committed: Committed<E>
): Effect.Effect<ExecutionResult<A>> => {
  const state = streamState()
  const pull = framePull(telling, committed, state)
  const open = Effect.as(closeWithEnclosing(committed.scope), pull)
  const claim = Effect.succeed({ pull, release: Scope.close(committed.scope, Exit.void) })
  // The frames as a `Stream` are made when asked for: the node binding claims them instead, and a `Stream` made for
  // every answer would be allocated, and held as long as it streams, for nothing.
  const outcome = streamOutcome(open, claim)
  return Effect.as(
    Scope.addFinalizer(committed.scope, Effect.suspend(() => recordCommitted(ports, telling, committed, state))),
    { outcome, answer: undefined, charge: undefined }
  )
}

/**
 * Opens attempts in order until one produces content, each in a scope of its own (`opening`). Events before the first
 * content are held; a retryable failure before content moves on to the next attempt, closing the failed one.
 */
const commit = <A, E>(ports: ExecutorPorts, planned: Planned<A, E>, opening: Opening) =>
  Effect.gen(function*() {
    const { attempts, dialect, run } = planned
    const { isContent, isEnd } = dialect.frames
    const clock = run.clock
    let last: UpstreamError | undefined
    /** What the client is told if every attempt fails (see `Upstream.telling`). */
    let reported: UpstreamError | undefined
    let tried = 0
    for (let i = 0; i >= 0; i = nextAttempt(attempts, i, last!)) {
      const attempt = attempts[i]
      Charging.attempting(run, attempt, tried + 1)
      const attemptStart = clock.unsafeCurrentTimeMillis()
      const scope = yield* Scope.make()
      opening.scope = scope
      const opened = yield* eitherIn(dialect.open(attempt), scope)
      // An attempt that could not be opened failed as one whose first pull failed.
      const pull: Pull<E> = Either.isRight(opened) ? opened.right : Effect.fail(opened.left)
      // Until the first content: one wait for the events before it where the source can (see `PullUntil`).
      const until = PullUntil.untilOf(pull)
      const toContent = until === undefined ? pull : until(isContent)
      const held: Array<E> = []
      let outcome: "content" | "done" | UpstreamError | undefined
      while (outcome === undefined) {
        const chunk = yield* Effect.either(toContent)
        if (Either.isLeft(chunk)) {
          outcome = chunk.left
        } else if (chunk.right === undefined) {
          outcome = held.some(isEnd)
            ? "done"
            : new UpstreamError({ kind: "transport", message: "upstream stream ended before any content" })
        } else {
          for (const event of chunk.right) {
            held.push(event)
            if (isContent(event)) outcome = "content"
          }
        }
      }
      if (outcome === "content" || outcome === "done") {
        const firstContentAt = clock.unsafeCurrentTimeMillis()
        const done = outcome === "done"
        return {
          _tag: "Committed",
          attempt,
          index: tried,
          attemptStart,
          scope,
          held,
          pull,
          done,
          firstContentAt
        } as Commitment<E>
      }
      last = outcome
      reported = telling(reported, outcome)
      tried++
      yield* Scope.close(scope, Exit.void)
      opening.scope = undefined
      yield* recordFailedAttempt(ports.stats, attempt, attemptStart, clock.unsafeCurrentTimeMillis(), last)
      run.steps.push(failureStep(attempt, last, attempts[nextAttempt(attempts, i, last)]))
    }
    return { _tag: "Failed", error: (dialect.failure ?? toGatewayError)(reported!), tried } as Commitment<E>
  })

/**
 * What a committed stream keeps until it ends: the execution's own fields, and what the dialect tells and bills a
 * stream with. Not the planned execution: through its run and its dialect's calls, that holds the request and its
 * body (a whole conversation, often hundreds of KB), which nothing needs once an attempt has committed. Kept, it
 * would be held as long as the stream is open: a thousand open streams would hold a thousand prompts.
 */
interface Telling<E> {
  readonly run: Execution
  readonly frames: FrameDialect<E>
  readonly streamUsage: Dialect<unknown, E>["streamUsage"]
  /** The dialect's `failure`, or the default. */
  readonly failure: (error: UpstreamError) => GatewayError.GatewayError
}

const tellingOf = <A, E>({ dialect, run }: Planned<A, E>): Telling<E> => ({
  run: executionOf(run),
  frames: dialect.frames,
  streamUsage: dialect.streamUsage,
  failure: dialect.failure ?? toGatewayError
})

const chargeOf = <E>(told: Telling<E>, attempt: Attempt, state: StreamState) =>
  Charging.charge(attempt.endpoint.pricing, told.streamUsage(state.usage), told.run.extra, told.run.context.priceFactor)

/** As `recordCommitted` would bill the stream, were it whole now. */
const billedOf = <E>(told: Telling<E>, attempt: Attempt, state: StreamState) => {
  const { run } = told
  const usage = UntoldUsage.billedUsage(told.streamUsage(state.usage), true, state.generated, run.context.bodyBytes)
  return Charging.charge(attempt.endpoint.pricing, usage, run.extra, run.context.priceFactor)
}

/**
 * The frames as a plain loop of pulls: the held events first, then each upstream chunk decorated as it comes, then
 * the end check. No Stream stages in between: each would cost every chunk a channel's machinery.
 */
const framePull = <E>(told: Telling<E>, committed: Committed<E>, state: StreamState): FramePull => {
  const { frames, run } = told
  const { requestId } = run.context
  const { error: errorFrame, frame, isEnd, trailer, unfinished } = frames
  const context: FrameContext = {
    attempt: committed.attempt,
    state,
    charge: () => chargeOf(told, committed.attempt, state),
    billed: () => billedOf(told, committed.attempt, state),
    pipeline: run.context.metadata ? run.steps : undefined,
    requestId
  }
  const decorate = (event: E): string => {
    if (isEnd(event)) state.sawEnd = true
    return frame(event, context)
  }
  const inBand = (error: GatewayError.GatewayError): ReadonlyArray<string> => {
    state.errorType = GatewayError.describe(error).type
    const text = errorFrame(error, requestId, context)
    return [trailer === "" ? text : text + trailer]
  }
  /** The failure of the committed attempt after content: an in-band error frame, then the end. */
  const failed = (error: UpstreamError): ReadonlyArray<string> => {
    state.failure = error
    return inBand(told.failure(error))
  }
  const ended = (): ReadonlyArray<string> => {
    if (state.errorType !== null) return []
    if (state.sawEnd) return trailer === "" ? [] : [trailer]
    return inBand(new GatewayError.InternalError({ message: unfinished }))
  }
  let position: "held" | "upstream" | "end" | "over" = "held"
  const takeHeld = (): ReadonlyArray<string> => {
    const held = committed.held
    committed.held = []
    return held.map(decorate)
  }
  const next = Effect.match(committed.pull, {
    onFailure: (error) => {
      position = "over"
      return Chunk.unsafeFromArray(failed(error))
    },
    onSuccess: (chunk) => {
      if (chunk !== undefined) return Chunk.map(chunk, decorate)
      position = "over"
      return Chunk.unsafeFromArray(ended())
    }
  })
  const pull: FramePull = Effect.suspend(() => {
    switch (position) {
      case "held":
        position = committed.done ? "end" : "upstream"
        return Effect.succeed(Chunk.unsafeFromArray(takeHeld()))
      case "upstream":
        return next
      case "end":
        position = "over"
        return Effect.succeed(Chunk.unsafeFromArray(ended()))
      case "over":
        return Effect.succeed(undefined)
    }
  })
  const upstream = Push.pushOf(committed.pull)
  if (upstream === undefined) return pull
  // The rest of the frames pushed: each upstream read's events decorated and written in the read's own callback. The
  // held frames and the end's are written without waiting for the writer to resume: a few frames at most.
  const ignore = () => {}
  const push: Push.Push<string, never> = (write) =>
    Effect.suspend(() => {
      if (position === "held") {
        position = committed.done ? "end" : "upstream"
        write(takeHeld(), ignore)
      }
      if (position !== "upstream") {
        if (position === "end") write(ended(), ignore, true)
        position = "over"
        return Effect.void
      }
      // `decorate` notes the dialect's end event as it frames it: the frames that hold it, and any after it, are last.
      return Effect.match(upstream((events, resume) => write(events.map(decorate), resume, state.sawEnd)), {
        onFailure: (error) => {
          position = "over"
          write(failed(error), ignore, true)
        },
        onSuccess: () => {
          position = "over"
          write(ended(), ignore, true)
        }
      })
    })
  return Push.pushable(pull, push)
}

/**
 * The records of a committed attempt, when its scope closes: its statistics and the request's usage, estimated where
 * the upstream did not tell it (a stream cut short: see `UntoldUsage`).
 */
const recordCommitted = <E>(
  ports: ExecutorPorts,
  told: Telling<E>,
  { attempt, attemptStart, firstContentAt, index }: Committed<E>,
  state: StreamState
): Effect.Effect<void> => {
  const { run } = told
  // Billed as told when the upstream told it; estimated for a stream cut short or never told (see `UntoldUsage`).
  const usage = UntoldUsage.billedUsage(
    told.streamUsage(state.usage),
    state.sawEnd,
    state.generated,
    run.context.bodyBytes
  )
  const sum = Charging.charge(attempt.endpoint.pricing, usage, run.extra, run.context.priceFactor)
  const failure = state.failure
  return Effect.zipRight(
    recordAttempt(ports.stats, attempt.endpoint.id, attemptStart, run.clock.unsafeCurrentTimeMillis(), {
      outcome: failure === undefined ? (state.sawEnd ? "ok" : undefined) : outcomeOf(failure),
      ttfbMs: firstContentAt - attemptStart,
      outputTokens: sum.usage.output
    }),
    Charging.record(ports.usageLog, run, {
      attempt,
      attempts: index + 1,
      status: 200,
      errorType: state.errorType,
      charge: sum,
      ttfbMs: firstContentAt - run.started
    })
  )
}
