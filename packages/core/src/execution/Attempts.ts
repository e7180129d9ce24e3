/**
 * The attempts of a planned request: each one's pipeline step and EndpointStats record, and the JSON attempts run
 * in order, the next one only after a retryable failure. The same for every API: its dialect calls and tells them.
 */
import * as Effect from "effect/Effect"
import type * as GatewayError from "../errors/GatewayError.js"
import type * as EndpointStats from "../health/EndpointStats.js"
import type * as Cost from "../pricing/Cost.js"
import type { Attempt, PipelineStep } from "../routing/RoutePlanner.js"
import * as SessionAffinity from "../sessions/SessionAffinity.js"
import { nextAttempt, telling, toGatewayError, type UpstreamError } from "../upstream/Upstream.js"
import * as Charging from "./Charging.js"
import type { ExecutionResult, ExecutorPorts, Planned } from "./Execution.js"
import * as UntoldUsage from "./UntoldUsage.js"

/** The EndpointStats outcome of a failure; none for a failure that says nothing of the endpoint's health. */
export const outcomeOf = (error: UpstreamError): EndpointStats.AttemptOutcome | undefined => {
  switch (error.kind) {
    case "rate_limited":
      return "rate_limited"
    case "overloaded":
      return "overloaded"
    case "timeout":
      return "timeout"
    case "invalid_request":
    case "context_length":
    case "content_filter":
    case "unsupported":
      return undefined
    default:
      return "error"
  }
}

/** The pipeline step of a failed attempt, saying which candidate is tried next, if any. */
export const failureStep = (attempt: Attempt, error: UpstreamError, next: Attempt | undefined): PipelineStep => ({
  type: "attempt",
  name: attempt.endpoint.provider,
  summary: `${attempt.model.id} via ${attempt.endpoint.provider} failed: ${error.kind}${
    error.status === undefined ? "" : ` (${error.status})`
  }: ${error.message}${
    next === undefined
      ? ""
      : next.model.id === attempt.model.id
      ? "; trying the next candidate"
      : `; trying the next model, ${next.model.id}`
  }`
})

/** The pipeline step of the attempt that answered, after `index` failed ones. */
export const successStep = (attempt: Attempt, index: number): PipelineStep => ({
  type: "attempt",
  name: attempt.endpoint.provider,
  summary: `${attempt.model.id} via ${attempt.endpoint.provider} answered${
    index > 0 ? ` (fallback after ${index} failed attempt${index === 1 ? "" : "s"})` : ""
  }`
})

/**
 * Records an attempt that ended at `now` (no record without an outcome). Times come from the request's clock, read
 * synchronously: one `Clock` look-up per request rather than an Effect per reading.
 */
export const recordAttempt = (
  stats: EndpointStats.EndpointStatsService,
  endpointId: string,
  startedAt: number,
  now: number,
  fields: {
    readonly outcome: EndpointStats.AttemptOutcome | undefined
    readonly ttfbMs: number | null
    readonly outputTokens: number
    readonly retryAfterMs?: number | undefined
  }
): Effect.Effect<void> =>
  fields.outcome === undefined ? Effect.void : stats.record({
    endpointId,
    at: now,
    ttfbMs: fields.ttfbMs,
    latencyMs: now - startedAt,
    outputTokens: fields.outputTokens,
    outcome: fields.outcome,
    retryAfterMs: fields.retryAfterMs
  })

/** Records a failed attempt with its failure's outcome and `Retry-After`. */
export const recordFailedAttempt = (
  stats: EndpointStats.EndpointStatsService,
  attempt: Attempt,
  startedAt: number,
  now: number,
  error: UpstreamError
): Effect.Effect<void> =>
  recordAttempt(stats, attempt.endpoint.id, startedAt, now, {
    outcome: outcomeOf(error),
    ttfbMs: null,
    outputTokens: 0,
    retryAfterMs: error.retryAfterMs
  })

/**
 * The affinity writes of an answer from `attempt`: the session's endpoint, the continued response's (its idle TTL
 * refreshed) and, when the upstream stored the answer as `storedAs`, that id's (`SessionAffinity.responseKey`), so
 * that a request continuing it goes to the same endpoint. Undefined when there is nothing to write (most requests).
 */
export const remember = <A, E>(
  ports: ExecutorPorts,
  { affinityKey, responseKey, run }: Planned<A, E>,
  attempt: Attempt,
  storedAs: string | undefined
): Effect.Effect<void> | undefined => {
  const endpointId = attempt.endpoint.id
  let writes = affinityKey === undefined ? undefined : ports.affinity.set(affinityKey, endpointId)
  if (responseKey !== undefined) writes = andThen(writes, ports.affinity.set(responseKey, endpointId))
  if (storedAs !== undefined) {
    const stored = SessionAffinity.responseKey(run.context.principal.workspace, storedAs)
    if (stored !== undefined) writes = andThen(writes, ports.affinity.set(stored, endpointId))
  }
  return writes
}

const andThen = (writes: Effect.Effect<void> | undefined, write: Effect.Effect<void>): Effect.Effect<void> =>
  writes === undefined ? write : Effect.zipRight(writes, write)

/** The JSON answer of a planned request: its attempts in order, the next one only after a retryable failure. */
export const json = <A, E>(
  ports: ExecutorPorts,
  planned: Planned<A, E>
): Effect.Effect<ExecutionResult<A>, GatewayError.GatewayError> => attempt(ports, planned, 0, 0, undefined)

/**
 * Attempt `i`, after `tried` failed ones (fewer than `i` when attempts of a refusing model were skipped); `reported` is
 * what the client is told if every attempt fails (see `Upstream.telling`).
 */
const attempt = <A, E>(
  ports: ExecutorPorts,
  planned: Planned<A, E>,
  i: number,
  tried: number,
  reported: UpstreamError | undefined
): Effect.Effect<ExecutionResult<A>, GatewayError.GatewayError> => {
  const { attempts, run } = planned
  const current = attempts[i]
  Charging.attempting(run, current, tried + 1)
  const attemptStart = run.clock.unsafeCurrentTimeMillis()
  return Effect.matchEffect(planned.dialect.json(current), {
    onFailure: (error) => {
      const next = nextAttempt(attempts, i, error)
      const told = telling(reported, error)
      run.steps.push(failureStep(current, error, attempts[next]))
      return Effect.zipRight(
        recordFailedAttempt(ports.stats, current, attemptStart, run.clock.unsafeCurrentTimeMillis(), error),
        next >= 0
          ? attempt(ports, planned, next, tried + 1, told)
          : Charging.failed(ports.usageLog, run, (planned.dialect.failure ?? toGatewayError)(told), tried + 1)
      )
    },
    onSuccess: (answer) => answered(ports, planned, current, tried, attemptStart, answer)
  })
}

/** The answer of attempt `i`, which succeeded: statistics, session, the dialect's finish, then the record and body. */
const answered = <A, E>(
  ports: ExecutorPorts,
  planned: Planned<A, E>,
  attempt: Attempt,
  i: number,
  attemptStart: number,
  upstreamAnswer: A
): Effect.Effect<ExecutionResult<A>> => {
  const { dialect, run } = planned
  run.steps.push(successStep(attempt, i))
  // As told; estimated when the upstream told none (see `UntoldUsage`).
  const told = dialect.usage(upstreamAnswer)
  const usage = UntoldUsage.isTold(told)
    ? told
    : UntoldUsage.billedUsage(told, true, dialect.generated?.(upstreamAnswer) ?? 0, run.context.bodyBytes)
  const end = run.clock.unsafeCurrentTimeMillis()
  const recorded = recordAttempt(ports.stats, attempt.endpoint.id, attemptStart, end, {
    outcome: "ok",
    ttfbMs: end - attemptStart,
    outputTokens: usage.output
  })
  const writes = remember(ports, planned, attempt, dialect.storedAs?.(upstreamAnswer))
  const remembered = writes === undefined ? recorded : Effect.zipRight(recorded, writes)
  const finish = dialect.finish
  return Effect.flatMap(
    remembered,
    () =>
      finish === undefined
        ? respond(ports, planned, attempt, i, end, usage, upstreamAnswer)
        : Effect.flatMap(finish(upstreamAnswer), (answer) => respond(ports, planned, attempt, i, end, usage, answer))
  )
}

const respond = <A, E>(
  ports: ExecutorPorts,
  { dialect, run }: Planned<A, E>,
  attempt: Attempt,
  i: number,
  end: number,
  usage: Cost.BilledUsage,
  answer: A
): Effect.Effect<ExecutionResult<A>> => {
  const charge = Charging.charge(attempt.endpoint.pricing, usage, run.extra, run.context.priceFactor)
  const body = dialect.respond(answer, attempt, charge, run.context.metadata ? run.steps : undefined)
  const result: ExecutionResult<A> = { outcome: { _tag: "Json", body, charge }, answer, charge }
  return Effect.as(
    Charging.record(ports.usageLog, run, {
      attempt,
      attempts: i + 1,
      status: 200,
      errorType: null,
      charge,
      ttfbMs: end - run.started
    }),
    result
  )
}
