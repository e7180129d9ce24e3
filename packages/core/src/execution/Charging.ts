/**
 * What a request costs and its one usage record: usage sums, charges at an endpoint's pricing (with earlier
 * sub-requests, e.g. fusion analyses), and the record, written whatever became of the request.
 */
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { Pricing } from "../catalogue/Catalogue.js"
import * as GatewayError from "../errors/GatewayError.js"
import type { Admission } from "../limits/Quotas.js"
import type { RequestContext } from "../messages/RequestContext.js"
import * as Cost from "../pricing/Cost.js"
import type { Attempt } from "../routing/RoutePlanner.js"
import type { UsageLogService } from "../usage/UsageLog.js"

/** No tokens. */
export const zeroUsage: Cost.BilledUsage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }

/** Two usages summed, field by field. */
export const addUsage = (a: Cost.BilledUsage, b: Cost.BilledUsage): Cost.BilledUsage => ({
  input: a.input + b.input,
  output: a.output + b.output,
  cacheRead: a.cacheRead + b.cacheRead,
  cacheWrite: a.cacheWrite + b.cacheWrite
})

/** Usage and its cost in USD, a decimal string. */
export interface Charge {
  readonly usage: Cost.BilledUsage
  readonly cost: string
}

/** Nothing used, nothing owed. */
export const noCharge: Charge = { usage: zeroUsage, cost: "0" }

/**
 * An answer's usage at its endpoint's pricing, times `factor` when there is one (a batch's discount), plus `extra`
 * (earlier sub-requests of the same request, charged already).
 */
export const charge = (
  pricing: Pricing,
  usage: Cost.BilledUsage,
  extra: Charge | undefined,
  factor?: string | undefined
): Charge => {
  const listed = Cost.cost(pricing, usage)
  const own = factor === undefined ? listed : Cost.multiplyDecimals(listed, factor)
  return extra === undefined
    ? { usage, cost: own }
    : { usage: addUsage(usage, extra.usage), cost: Cost.sumDecimals([own, extra.cost]) }
}

/** What a usage record says of the request itself, whatever became of it. */
export interface Requested {
  readonly context: RequestContext
  /** When the request started (epoch ms), by `clock`, which times the rest of it. */
  readonly started: number
  readonly clock: Clock.Clock
  readonly stream: boolean
  /** The model asked for (after the router plugins): the record's model when no attempt answered. */
  readonly modelId: string | null
  readonly sessionId: string | undefined
  readonly user: string | undefined
  /** Usage and cost of earlier sub-requests (fusion analyses), added to this answer's. */
  readonly extra?: Charge | undefined
  /** False for fusion analyses: recorded once, with the final answer. */
  readonly recordUsage: boolean
  /** Custom metadata for the usage record (`GatewayFields.customTrace`). */
  readonly metadata?: Readonly<Record<string, unknown>> | undefined
  /** The request's reservation against its limits, settled (or released) when its usage is recorded. */
  readonly admission?: Admission | undefined
}

/** How the request ended. */
export interface Ending {
  /** The attempt that answered, if one did. */
  readonly attempt: Attempt | undefined
  /** Attempts made; zero when the request was refused before any upstream. */
  readonly attempts: number
  readonly status: number
  readonly errorType: string | null
  readonly charge: Charge
  readonly ttfbMs: number | null
}

/** Longest requested model id a record keeps: a longer one names no model of any catalogue, and is left out. */
const MODEL_ID_MAX = 256

const requestedModel = (id: string | null): string | null => id !== null && id.length <= MODEL_ID_MAX ? id : null

/**
 * Notes on the request's progress, when it has one, the attempt now made and how many it makes with it (see
 * `Progress`); not a fusion analysis's, whose request is told by its own.
 */
export const attempting = (requested: Requested, attempt: Attempt, attempts: number): void => {
  const progress = requested.context.progress
  if (progress === undefined || !requested.recordUsage) return
  progress.attempt = attempt
  progress.attempts = attempts
  progress.stream = requested.stream
}

/**
 * Writes the request's one usage record (none for a fusion analysis), and settles its reservation with the same
 * usage: released when nothing answered and nothing was spent before (fusion analyses are). Its progress, when it has
 * one, notes that it has its answer.
 */
export const record = (usageLog: UsageLogService, requested: Requested, ending: Ending): Effect.Effect<void> => {
  if (!requested.recordUsage) return Effect.void
  const { admission, context } = requested
  if (context.progress !== undefined) context.progress.answered = true
  const written = write(usageLog, requested, ending)
  if (admission === undefined) return written
  return Effect.zipRight(
    written,
    ending.attempt === undefined && requested.extra === undefined
      ? admission.release
      : admission.settle(ending.charge.usage, ending.charge.cost)
  )
}

const write = (usageLog: UsageLogService, requested: Requested, ending: Ending): Effect.Effect<void> => {
  const { context } = requested
  const { attempt, charge } = ending
  return usageLog.record({
    requestId: context.requestId,
    createdAt: requested.started,
    route: context.route,
    keyId: context.principal.keyId,
    workspace: context.principal.workspace,
    model: attempt?.model.id ?? requestedModel(requested.modelId),
    provider: attempt?.endpoint.provider ?? null,
    endpointId: attempt?.endpoint.id ?? null,
    stream: requested.stream,
    status: ending.status,
    errorType: ending.errorType,
    inputTokens: charge.usage.input,
    outputTokens: charge.usage.output,
    cacheReadTokens: charge.usage.cacheRead,
    cacheWriteTokens: charge.usage.cacheWrite,
    cost: charge.cost,
    latencyMs: requested.clock.unsafeCurrentTimeMillis() - requested.started,
    ttfbMs: ending.ttfbMs,
    attempts: ending.attempts,
    sessionId: requested.sessionId ?? null,
    user: requested.user ?? null,
    appReferer: context.app.referer ?? null,
    appTitle: context.app.title ?? null,
    appCategories: context.app.categories ?? null,
    metadata: requested.metadata ?? null
  })
}

/**
 * Records a request that failed with `error` after `attempts` attempts (zero: refused before any upstream), with
 * the usage of its earlier sub-requests if any, then fails with the error.
 */
export const failed = (
  usageLog: UsageLogService,
  requested: Requested,
  error: GatewayError.GatewayError,
  attempts: number
): Effect.Effect<never, GatewayError.GatewayError> => {
  const described = GatewayError.describe(error)
  return Effect.zipRight(
    record(usageLog, requested, {
      attempt: undefined,
      attempts,
      status: described.status,
      errorType: described.type,
      charge: requested.extra ?? noCharge,
      ttfbMs: null
    }),
    Effect.fail(error)
  )
}
