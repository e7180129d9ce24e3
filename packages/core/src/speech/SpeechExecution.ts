/**
 * The attempts of a planned speech request: each is opened in turn until one gives its first audio bytes; a retryable
 * failure before that moves on to the next (after which the client could not be told). Once committed, the bytes are
 * handed on as they arrive; a failure after that cannot change the status any more, and ends the answer abruptly
 * (the binding drops the connection, so that a client never takes truncated audio for a whole answer).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import type * as Scope from "effect/Scope"
import * as Scopes from "effect/Scope"
import * as GatewayError from "../errors/GatewayError.js"
import { failureStep, outcomeOf, recordAttempt, recordFailedAttempt, successStep } from "../execution/Attempts.js"
import { closeWithEnclosing } from "../internal/Scopes.js"
import * as UsageAccounting from "../messages/UsageAccounting.js"
import * as Cost from "../pricing/Cost.js"
import type { Attempt } from "../routing/RoutePlanner.js"
import type { BytePull, SpeechCall } from "../upstream/Upstream.js"
import { nextAttempt, UpstreamError } from "../upstream/Upstream.js"
import { toGatewayError } from "./SpeechFailures.js"
import type { AudioPull, SpeechOutcome, SpeechPorts, SpeechRun } from "./SpeechRun.js"

/** The attempt that gave audio first, with its first bytes. */
interface Committed {
  readonly attempt: Attempt
  readonly index: number
  readonly attemptStart: number
  readonly contentType: string
  readonly first: Uint8Array
  readonly pull: BytePull
  readonly firstByteAt: number
}

type Commitment = Committed | { readonly error: GatewayError.GatewayError; readonly tried: number }

/** What became of the committed attempt; read when its scope closes. */
interface AudioState {
  done: boolean
  bytes: number
  failure: UpstreamError | undefined
}

/** The number of characters (code points) in `s`: what speech is billed by. */
export const characters = (s: string): number => {
  let n = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0xdc00 || c > 0xdfff) n++
  }
  return n
}

/**
 * What a request costs at an endpoint's pricing: the input's characters at the `prompt` price (per character for
 * speech), plus the `request` price. The characters are the usage record's input tokens.
 */
export const charge = (run: SpeechRun, attempt: Attempt): UsageAccounting.Charge => {
  const usage: Cost.BilledUsage = { input: characters(run.request.input), output: 0, cacheRead: 0, cacheWrite: 0 }
  return { usage, cost: Cost.cost(attempt.endpoint.pricing, usage) }
}

const noSpeech = (attempt: Attempt) =>
  new UpstreamError({
    kind: "unsupported",
    message: `provider '${attempt.endpoint.provider}' does not synthesize speech`
  })

const callOf = (run: SpeechRun, attempt: Attempt): SpeechCall => ({
  endpoint: attempt.endpoint,
  input: run.request.input,
  voice: run.request.voice,
  format: run.request.responseFormat,
  speed: run.request.speed,
  references: run.request.references,
  options: run.request.providerOptions.get(attempt.endpoint.provider.toLowerCase())
})

/** The first non-empty bytes of an opened attempt, or why there are none. */
const firstBytes = (pull: BytePull): Effect.Effect<Uint8Array, UpstreamError> =>
  Effect.flatMap(pull, (bytes) =>
    bytes === undefined
      ? Effect.fail(new UpstreamError({ kind: "transport", message: "upstream audio ended before any byte" }))
      : bytes.byteLength === 0
      ? firstBytes(pull)
      : Effect.succeed(bytes))

/** Opens the attempts in order until one gives audio; each failed one is closed, recorded and reported. */
const commit = (ports: SpeechPorts, run: SpeechRun, scope: Scope.CloseableScope) =>
  Effect.gen(function*() {
    const { attempts, clock } = run
    let last: UpstreamError | undefined
    let tried = 0
    for (let i = 0; i >= 0 && i < attempts.length;) {
      tried = tried + 1
      const attempt = attempts[i]
      UsageAccounting.attempting(run, attempt, tried)
      const attemptStart = clock.unsafeCurrentTimeMillis()
      const child = yield* Scopes.fork(scope, ExecutionStrategy.sequential)
      const speech = ports.upstream.speech
      const opened = yield* Effect.either(
        Scopes.extend(
          Effect.flatMap(
            speech === undefined ? Effect.fail(noSpeech(attempt)) : speech(callOf(run, attempt)),
            (audio) => Effect.map(firstBytes(audio.pull), (first) => ({ audio, first }))
          ),
          child
        )
      )
      if (Either.isRight(opened)) {
        const { audio, first } = opened.right
        return {
          attempt,
          index: tried - 1,
          attemptStart,
          contentType: audio.contentType,
          first,
          pull: audio.pull,
          firstByteAt: clock.unsafeCurrentTimeMillis()
        } satisfies Committed as Commitment
      }
      last = opened.left
      yield* Scopes.close(child, Exit.void)
      yield* recordFailedAttempt(ports.stats, attempt, attemptStart, clock.unsafeCurrentTimeMillis(), last)
      const next = nextAttempt(attempts, i, last)
      run.steps.push(failureStep(attempt, last, next < 0 ? undefined : attempts[next]))
      i = next
    }
    return { error: toGatewayError(last!), tried } as Commitment
  })

/** The audio as a pull: the first bytes, then the attempt's as they come; a failure ends it, and is remembered. */
const audioPull = (committed: Committed, state: AudioState): AudioPull => {
  let first: Uint8Array | undefined = committed.first
  state.bytes += first.byteLength
  const next: AudioPull = Effect.matchEffect(committed.pull, {
    onFailure: (error) => {
      state.failure = error
      return Effect.fail(toGatewayError(error))
    },
    onSuccess: (bytes) => {
      if (bytes === undefined) state.done = true
      else state.bytes += bytes.byteLength
      return Effect.succeed(bytes)
    }
  })
  return Effect.suspend(() => {
    if (first !== undefined) {
      const bytes = first
      first = undefined
      return Effect.succeed(bytes)
    }
    return state.done || state.failure !== undefined ? Effect.succeed(undefined) : next
  })
}

/** The records of a committed attempt, when its scope closes: its statistics and the request's usage. */
const recordCommitted = (
  ports: SpeechPorts,
  run: SpeechRun,
  committed: Committed,
  state: AudioState
): Effect.Effect<void> => {
  const { attempt, attemptStart, firstByteAt, index } = committed
  const failure = state.failure
  const errorType = failure === undefined ? null : GatewayError.describe(toGatewayError(failure)).type
  return Effect.zipRight(
    recordAttempt(ports.stats, attempt.endpoint.id, attemptStart, run.clock.unsafeCurrentTimeMillis(), {
      outcome: failure === undefined ? (state.done ? "ok" : undefined) : outcomeOf(failure),
      ttfbMs: firstByteAt - attemptStart,
      outputTokens: 0
    }),
    UsageAccounting.record(ports.usageLog, run, {
      attempt,
      attempts: index + 1,
      status: 200,
      errorType,
      charge: charge(run, attempt),
      ttfbMs: firstByteAt - run.started
    })
  )
}

/**
 * Runs the attempts of a planned request. On success, the outcome's `open` gives the audio in the caller's scope;
 * closing that scope releases the upstream request and writes the records (`onClose` runs then too). On failure,
 * the request's usage record is written and the error of the last attempt returned.
 */
export const execute = (
  ports: SpeechPorts,
  run: SpeechRun,
  onClose: (exit: Exit.Exit<unknown, unknown>) => Effect.Effect<void>
): Effect.Effect<SpeechOutcome, GatewayError.GatewayError> =>
  Effect.gen(function*() {
    const scope = yield* Scopes.make()
    const committed = yield* Effect.onExit(
      commit(ports, run, scope),
      (exit) => (Exit.isSuccess(exit) ? Effect.void : Scopes.close(scope, exit))
    )
    if (!("attempt" in committed)) {
      yield* Scopes.close(scope, Exit.void)
      return yield* UsageAccounting.failed(ports.usageLog, run, committed.error, committed.tried)
    }
    if (run.affinityKey !== undefined) yield* ports.affinity.set(run.affinityKey, committed.attempt.endpoint.id)
    run.steps.push(successStep(committed.attempt, committed.index))
    const state: AudioState = { done: false, bytes: 0, failure: undefined }
    yield* Scopes.addFinalizer(
      scope,
      Effect.suspend(() =>
        Effect.zipRight(
          recordCommitted(ports, run, committed, state),
          onClose(state.failure === undefined ? Exit.void : Exit.fail(state.failure))
        )
      )
    )
    const pull = audioPull(committed, state)
    const open = Effect.as(closeWithEnclosing(scope), pull)
    return {
      contentType: committed.contentType,
      generationId: run.generationId,
      model: committed.attempt.model.id,
      provider: committed.attempt.endpoint.provider,
      steps: run.steps,
      open
    } satisfies SpeechOutcome
  })
