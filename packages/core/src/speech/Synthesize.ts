/**
 * The steps of a speech request in order: validation (the request schema and the reference rules), the route (speech
 * models, the capabilities the references need, the planner's preferences, health and stickiness), then the attempts.
 * A request refused before any upstream has its usage record too (no attempt, nothing owed).
 */
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Random from "effect/Random"
import type * as Tracer from "effect/Tracer"
import type * as GatewayError from "../errors/GatewayError.js"
import * as Admission from "../execution/Admission.js"
import * as Quotas from "../limits/Quotas.js"
import type { RequestContext } from "../messages/RequestContext.js"
import * as UsageAccounting from "../messages/UsageAccounting.js"
import * as RoutePlanner from "../routing/RoutePlanner.js"
import * as SessionAffinity from "../sessions/SessionAffinity.js"
import { characters, execute } from "./SpeechExecution.js"
import * as SpeechReferences from "./SpeechReferences.js"
import * as SpeechRequest from "./SpeechRequest.js"
import * as SpeechRouting from "./SpeechRouting.js"
import type { SpeechOutcome, SpeechPorts, SpeechRun } from "./SpeechRun.js"
import * as SpeechTracing from "./SpeechTracing.js"

/** The generation id of a request: `gen-` and the hex digits of its request id. */
export const generationIdOf = (requestId: string): string => `gen-${requestId.replace(/^req_/, "")}`

/** An invalid body, as its usage record tells it: only its model is read, when it is a string. */
const unvalidated = (context: RequestContext, started: number, clock: Clock.Clock, raw: unknown) => ({
  context,
  started,
  clock,
  stream: true,
  modelId: Predicate.isRecord(raw) && typeof raw.model === "string" ? raw.model : null,
  sessionId: context.sessionId,
  user: undefined,
  recordUsage: true
})

const routed = (
  ports: SpeechPorts,
  requested: UsageAccounting.Requested,
  request: SpeechRequest.SpeechRequest,
  span: Tracer.Span
): Effect.Effect<SpeechOutcome, GatewayError.GatewayError> => {
  const { context } = requested
  const key = requested.sessionId === undefined
    ? undefined
    : SessionAffinity.affinityKey(context.principal.workspace, requested.sessionId, request.model)
  const sticky: Effect.Effect<string | undefined> = key === undefined
    ? Effect.succeed(undefined)
    : Effect.map(ports.affinity.get(key), Option.getOrUndefined)
  return Effect.flatMap(
    Effect.all([ports.catalogue.snapshot, ports.stats.snapshot, sticky, Random.nextInt]),
    ([snapshot, health, endpointId, seed]) => {
      const plan = SpeechRouting.plan(request, SpeechReferences.needs(request.references), snapshot, {
        health,
        session: key === undefined ? undefined : { key, endpointId },
        random: RoutePlanner.seededRandom(seed),
        now: requested.clock.unsafeCurrentTimeMillis()
      })
      if (Either.isLeft(plan)) return UsageAccounting.failed(ports.usageLog, requested, plan.left, 0)
      const run: SpeechRun = {
        ...requested,
        request,
        attempts: plan.right.attempts,
        steps: [...plan.right.steps],
        affinityKey: key,
        generationId: generationIdOf(context.requestId)
      }
      const admitted = Admission.admitted(
        ports.quotas,
        ports.usageLog,
        run,
        () => Quotas.demandOf(run.attempts, characters(request.input), undefined, { output: false }),
        (run) => execute(ports, run, (exit) => SpeechTracing.end(span, exit)),
        (outcome, quota): SpeechOutcome => ({ ...outcome, quota })
      )
      return Effect.tap(admitted, (outcome) =>
        Effect.sync(() => {
          span.attribute("gen_ai.response.model", outcome.model)
          span.attribute("gateway.provider", outcome.provider)
          span.attribute("gateway.generation_id", outcome.generationId)
        }))
    }
  )
}

/** The use case's `synthesize`: the audio of a request, or the error its client gets. */
export const synthesize =
  (ports: SpeechPorts) =>
  (context: RequestContext, raw: unknown): Effect.Effect<SpeechOutcome, GatewayError.GatewayError> =>
    Effect.clockWith((clock) => {
      const started = clock.unsafeCurrentTimeMillis()
      const decoded = SpeechRequest.validate(raw)
      if (Either.isLeft(decoded)) {
        return UsageAccounting.failed(ports.usageLog, unvalidated(context, started, clock, raw), decoded.left, 0)
      }
      const request = decoded.right
      const requested: UsageAccounting.Requested = {
        context,
        started,
        clock,
        stream: true,
        modelId: request.model,
        // The body's session id wins over the x-session-id header.
        sessionId: request.sessionId ?? context.sessionId,
        user: request.user,
        recordUsage: true,
        metadata: request.trace === undefined || Object.keys(request.trace.custom).length === 0
          ? undefined
          : request.trace.custom
      }
      const attributes = SpeechTracing.attributesOf({
        requestId: context.requestId,
        model: request.model,
        trace: request.trace,
        sessionId: requested.sessionId,
        user: request.user
      })
      return Effect.flatMap(SpeechTracing.start(request.trace, attributes), (span) =>
        Effect.onExit(
          routed(ports, requested, request, span),
          (exit) => (Exit.isFailure(exit) ? SpeechTracing.end(span, exit) : Effect.void)
        ))
    })
