/**
 * The steps of a messages request in order: validation, the preflight plugins, the model choice, then fusion or the
 * execution of the route. A request refused before any upstream has its usage record too (zero tokens, no attempt).
 */
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"
import type * as GatewayError from "../errors/GatewayError.js"
import * as Fusion from "../plugins/Fusion.js"
import * as ModelChoice from "../plugins/ModelChoice.js"
import * as Preflight from "../plugins/Preflight.js"
import { enabledPlugins } from "../plugins/RequestPlugins.js"
import * as GatewayFields from "../routing/GatewayFields.js"
import type { PipelineStep } from "../routing/RoutePlanner.js"
import { execute, routesOf } from "./Execution.js"
import type { MessagesOutcome } from "./MessagesOutcome.js"
import type { MessagesPorts } from "./MessagesPorts.js"
import * as MessagesRequest from "./MessagesRequest.js"
import type { RequestContext } from "./RequestContext.js"
import type { Run } from "./Run.js"
import * as UsageAccounting from "./UsageAccounting.js"
import type { JsonObject } from "./Wire.js"

/**
 * The use case's `create`. A chain of Effects, not a generator (see `Execution.execute`), with one clock read per
 * request: every later time is read from the same clock, synchronously.
 */
export const create =
  (ports: MessagesPorts) =>
  (context: RequestContext, raw: unknown): Effect.Effect<MessagesOutcome, GatewayError.GatewayError> =>
    Effect.clockWith((clock) => {
      const started = clock.unsafeCurrentTimeMillis()
      const decoded = MessagesRequest.validate(raw)
      if (Either.isLeft(decoded)) return refuse(ports, unvalidated(context, started, clock, raw), decoded.left)
      const request = decoded.right
      const { index, plugins } = enabledPlugins(request)
      const steps: Array<PipelineStep> = []
      const routed = (body: JsonObject) =>
        Effect.flatMap(ports.catalogue.snapshot, (snapshot) => {
          const route = routesOf(ports, { body, plugins, request, context })
          const chosen = ModelChoice.chooseModel(ports, request, body, plugins, index, steps, snapshot, route)
          if (Either.isLeft(chosen)) return refuse(ports, validated(context, started, clock, request), chosen.left)
          const run: Run = {
            context,
            request,
            body,
            modelId: chosen.right,
            plugins,
            steps,
            stream: request.stream === true,
            started,
            clock,
            sessionId: request.session_id ?? context.sessionId,
            user: request.user,
            snapshot,
            recordUsage: true,
            metadata: GatewayFields.customTrace(request.trace)
          }
          return Effect.map(
            plugins.fusion !== undefined
              ? Fusion.fusion(ports, run, plugins.fusion, index.fusion)
              : execute(ports, run, { ownsBody: body === raw }),
            (result) => result.outcome
          )
        })
      return Preflight.needsPreflight(plugins)
        ? Effect.flatMap(
          Effect.catchAll(
            Preflight.preflight(ports, raw as JsonObject, plugins, steps),
            (error) => refuse(ports, validated(context, started, clock, request), error)
          ),
          routed
        )
        : routed(raw as JsonObject)
    })

/** Records a request refused before any upstream, then fails with its error. */
const refuse = (ports: MessagesPorts, requested: UsageAccounting.Requested, error: GatewayError.GatewayError) =>
  UsageAccounting.failed(ports.usageLog, requested, error, 0)

/** A valid request, as its usage record tells it before the route is planned. */
const validated = (
  context: RequestContext,
  started: number,
  clock: Clock.Clock,
  request: MessagesRequest.MessagesRequest
): UsageAccounting.Requested => ({
  context,
  started,
  clock,
  stream: request.stream === true,
  modelId: request.model,
  sessionId: request.session_id ?? context.sessionId,
  user: request.user,
  recordUsage: true,
  metadata: GatewayFields.customTrace(request.trace)
})

/** An invalid body, as its usage record tells it: only its model and stream flag are read, when they are usable. */
const unvalidated = (
  context: RequestContext,
  started: number,
  clock: Clock.Clock,
  raw: unknown
): UsageAccounting.Requested => {
  const body = Predicate.isRecord(raw) ? raw : undefined
  return {
    context,
    started,
    clock,
    stream: body?.stream === true,
    modelId: typeof body?.model === "string" ? body.model : null,
    sessionId: context.sessionId,
    user: undefined,
    recordUsage: true
  }
}
