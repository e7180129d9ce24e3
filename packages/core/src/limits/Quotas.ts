/**
 * The admission step of the use cases: after the route is planned (the model, its endpoints and the output cap
 * known), before the first upstream attempt, a request reserves one request, its estimated input tokens, its output
 * cap and the most it can cost, against its key's and its workspace's limits. The usage record settles the
 * reservation with what was used (a stream when it ends); a request that got no answer, or whose client went away
 * first, releases it. Over a rate: 429 with the time until the window has room; over the budget: 402; a request that
 * could never fit (its output cap or prompt above a per-minute limit): 400, and one that may cost more than a whole
 * budget: 402. A refusal carries what is left of the limits (`quota`) for the response headers: those two, decided
 * before the counters, read it from the store (`QuotaStore.status`), and go without it when the store cannot be read.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Principal } from "../auth/Keys.js"
import * as GatewayError from "../errors/GatewayError.js"
import * as Cost from "../pricing/Cost.js"
import type { Attempt } from "../routing/RoutePlanner.js"
import type { Amounts, Limits } from "./Limits.js"
import { isUnlimited, nanoUsdOf, usdOf } from "./Limits.js"
import type { Refusal, Remaining, ScopeStatus } from "./QuotaCounters.js"
import type { Reservation, ScopeLimits } from "./QuotaStore.js"
import { QuotaStore } from "./QuotaStore.js"

/** The output tokens reserved when a request sets no output cap (and its endpoints allow that many). */
export const DEFAULT_OUTPUT_RESERVATION = 4096

/** What a request asks of the limits before its upstream call. */
export interface Demand {
  /** The prompt's tokens, estimated. */
  readonly inputTokens: number
  /** The output cap: the client's `max_tokens` (as clamped), or `DEFAULT_OUTPUT_RESERVATION`. */
  readonly outputTokens: number
  /** False when the client set no cap: the reservation is then lowered to the output limit rather than refused. */
  readonly outputCapped: boolean
  /** The request field the client set its cap in, named when the cap can never fit; `max_tokens` when not given. */
  readonly outputField?: string | undefined
  /** The most the request can cost, in nano-USD. */
  readonly costNanoUsd: number
}

/** What the client is told of its limits: the tightest of its key's and its workspace's, per limit. */
export interface QuotaStatus {
  readonly requests?: Remaining | undefined
  readonly inputTokens?: Remaining | undefined
  readonly outputTokens?: Remaining | undefined
  /** In nano-USD. */
  readonly budget?: Remaining | undefined
}

/** A reservation taken for a request: the status to tell, and how it ends (the first of settle or release counts). */
export interface Admission {
  readonly status: QuotaStatus
  /** Corrects the reservation to the request's usage (uncached input and cache writes count as input) and cost. */
  readonly settle: (usage: Cost.BilledUsage, cost: string) => Effect.Effect<void>
  /** Takes the reservation back: the request was not answered. */
  readonly release: Effect.Effect<void>
}

export interface QuotasService {
  /** The scopes whose limits apply to a principal; undefined when none does (then there is nothing to admit). */
  readonly scopesOf: (principal: Principal) => ReadonlyArray<ScopeLimits> | undefined
  /** Reserves a request's demand at `now` over its scopes, or refuses it. */
  readonly admit: (
    scopes: ReadonlyArray<ScopeLimits>,
    demand: Demand,
    now: number
  ) => Effect.Effect<
    Admission,
    GatewayError.RateLimited | GatewayError.BudgetExceeded | GatewayError.InvalidRequest | GatewayError.Unavailable
  >
}

/** The admission step, over a `QuotaStore`. */
export class Quotas extends Context.Tag("@model-gateway/core/Quotas")<Quotas, QuotasService>() {}

export interface QuotasOptions {
  /** Limits per workspace, from the configuration; a key's own come with its principal. */
  readonly workspaces?: Readonly<Record<string, Limits>> | undefined
}

/** The scope of a key's counters. */
export const keyScope = (keyId: string): string => `key:${keyId}`

/** The scope of a workspace's counters. */
export const workspaceScope = (workspace: string): string => `workspace:${workspace}`

const whose = (scope: string): string =>
  scope.startsWith("key:") ? "this key's" : `workspace ${JSON.stringify(scope.slice("workspace:".length))}'s`

const UNITS = { requests: "requests", inputTokens: "input tokens", outputTokens: "output tokens" } as const

const REASONS = {
  requests: "requests_per_minute",
  inputTokens: "input_tokens_per_minute",
  outputTokens: "output_tokens_per_minute"
} as const

const tighter = (a: Remaining | undefined, b: Remaining | undefined): Remaining | undefined =>
  a === undefined ? b : b === undefined || a.remaining <= b.remaining ? a : b

/** The tightest limit of several scopes, per limit. */
export const merge = (statuses: ReadonlyArray<ScopeStatus>): QuotaStatus => {
  let requests: Remaining | undefined
  let inputTokens: Remaining | undefined
  let outputTokens: Remaining | undefined
  let budget: Remaining | undefined
  for (const s of statuses) {
    requests = tighter(requests, s.requests)
    inputTokens = tighter(inputTokens, s.inputTokens)
    outputTokens = tighter(outputTokens, s.outputTokens)
    budget = tighter(budget, s.budget)
  }
  return { requests, inputTokens, outputTokens, budget }
}

/**
 * The amounts a demand reserves in its scopes, or why it can never be served: an amount above a per-minute limit is
 * a 400 (waiting would not help), a cost above a whole budget a 402. An output cap the client did not set is lowered
 * to the smallest output limit instead.
 */
export const amountsOf = (
  scopes: ReadonlyArray<ScopeLimits>,
  demand: Demand
): Amounts | GatewayError.InvalidRequest | GatewayError.BudgetExceeded => {
  let outputTokens = demand.outputTokens
  if (!demand.outputCapped) {
    for (const { limits } of scopes) {
      if (limits.outputTokensPerMinute !== undefined) {
        outputTokens = Math.min(outputTokens, limits.outputTokensPerMinute)
      }
    }
  }
  const amounts: Amounts = {
    requests: 1,
    inputTokens: demand.inputTokens,
    outputTokens,
    costNanoUsd: demand.costNanoUsd
  }
  for (const { limits, scope } of scopes) {
    if (limits.inputTokensPerMinute !== undefined && amounts.inputTokens > limits.inputTokensPerMinute) {
      return new GatewayError.InvalidRequest({
        message: `the prompt (about ${amounts.inputTokens} tokens) is more than ${
          whose(scope)
        } limit of ${limits.inputTokensPerMinute} input tokens per minute: this request can never be served`,
        param: "messages"
      })
    }
    if (limits.outputTokensPerMinute !== undefined && amounts.outputTokens > limits.outputTokensPerMinute) {
      const field = demand.outputField ?? "max_tokens"
      return new GatewayError.InvalidRequest({
        message: `${field} (${amounts.outputTokens}) is more than ${whose(scope)} limit of ` +
          `${limits.outputTokensPerMinute} output tokens per minute: this request can never be served; lower ${field}`,
        param: field
      })
    }
    const budget = limits.budget
    if (budget !== undefined && amounts.costNanoUsd > budget.nanoUsd) {
      return new GatewayError.BudgetExceeded({
        message: `this request may cost up to $${usdOf(amounts.costNanoUsd)}, more than ${
          whose(scope)
        } whole budget of $${usdOf(budget.nanoUsd)} per ${budget.period}`
      })
    }
  }
  return amounts
}

const refusalOf = (
  scope: string,
  refusal: Refusal,
  quota: QuotaStatus
): GatewayError.RateLimited | GatewayError.BudgetExceeded => {
  if (refusal._tag === "OverBudget") {
    return new GatewayError.BudgetExceeded({
      message: `${whose(scope)} budget of $${usdOf(refusal.limitNanoUsd)} is spent ($${
        usdOf(refusal.spentNanoUsd)
      } used); it starts again at ${new Date(refusal.resetsAt).toISOString()}`,
      quota
    })
  }
  const seconds = Math.ceil(refusal.retryAfterMs / 1000)
  return new GatewayError.RateLimited({
    message: `rate limit reached: ${whose(scope)} limit of ${refusal.limit} ${
      UNITS[refusal.metric]
    } per minute; retry in ${seconds} s`,
    retryAfterMs: refusal.retryAfterMs,
    reason: REASONS[refusal.metric],
    quota
  })
}

/** A refusal of `amountsOf` with the status of the limits, for its headers. */
const withQuota = (
  refusal: GatewayError.InvalidRequest | GatewayError.BudgetExceeded,
  quota: QuotaStatus
): GatewayError.InvalidRequest | GatewayError.BudgetExceeded =>
  refusal._tag === "InvalidRequest"
    ? new GatewayError.InvalidRequest({ message: refusal.message, param: refusal.param, quota })
    : new GatewayError.BudgetExceeded({ message: refusal.message, quota })

/** What a charged request used, as its limits count it. */
export const usedOf = (usage: Cost.BilledUsage, cost: string): Amounts => ({
  requests: 1,
  inputTokens: usage.input + usage.cacheWrite,
  outputTokens: usage.output,
  costNanoUsd: nanoUsdOf(cost) ?? 0
})

/** Builds the admission step over the `QuotaStore` in context. */
export const make = (options: QuotasOptions = {}): Effect.Effect<QuotasService, never, QuotaStore> =>
  Effect.map(QuotaStore, (store) => {
    const workspaces = new Map<string, ScopeLimits>()
    for (const [name, limits] of Object.entries(options.workspaces ?? {})) {
      if (!isUnlimited(limits)) workspaces.set(name, { scope: workspaceScope(name), limits })
    }
    // A principal's scopes are the same object for as long as its key is cached: made once per principal.
    const byPrincipal = new WeakMap<Principal, ReadonlyArray<ScopeLimits> | null>()
    const scopesOf = (principal: Principal): ReadonlyArray<ScopeLimits> | undefined => {
      const known = byPrincipal.get(principal)
      if (known !== undefined) return known ?? undefined
      const scopes: Array<ScopeLimits> = []
      if (!isUnlimited(principal.limits)) scopes.push({ scope: keyScope(principal.keyId), limits: principal.limits! })
      const workspace = workspaces.get(principal.workspace)
      if (workspace !== undefined) scopes.push(workspace)
      const found = scopes.length === 0 ? null : scopes
      byPrincipal.set(principal, found)
      return found ?? undefined
    }
    const admission = (reservation: Reservation, status: QuotaStatus): Admission => {
      let done = false
      const finish = (f: (now: number) => Effect.Effect<void>) =>
        Effect.suspend(() => {
          if (done) return Effect.void
          done = true
          return Effect.clockWith((clock) => f(clock.unsafeCurrentTimeMillis()))
        })
      return {
        status,
        settle: (usage, cost) => finish((now) => store.settle(reservation, usedOf(usage, cost), now)),
        release: finish((now) => store.release(reservation, now))
      }
    }
    // A request that can never fit is refused before the counters; it is told what is left of its limits all the
    // same, read from the store (only refusals pay for that read). A store that cannot be read leaves the refusal
    // without them: it stands whatever the counters say.
    const never = (
      scopes: ReadonlyArray<ScopeLimits>,
      refusal: GatewayError.InvalidRequest | GatewayError.BudgetExceeded,
      now: number
    ) =>
      Effect.flatMap(
        Effect.orElseSucceed(Effect.map(store.status(scopes, now), merge), () => undefined),
        (quota) => Effect.fail(quota === undefined ? refusal : withQuota(refusal, quota))
      )
    const admit: QuotasService["admit"] = (scopes, demand, now) => {
      const amounts = amountsOf(scopes, demand)
      if (!("requests" in amounts)) return never(scopes, amounts, now)
      return Effect.flatMap(store.reserve({ scopes, amounts, now }), (result) => {
        const quota = merge(result.status)
        return result._tag === "Reserved"
          ? Effect.succeed(admission(result.reservation, quota))
          : Effect.fail(refusalOf(result.scope, result.refusal, quota))
      })
    }
    return Quotas.of({ scopesOf, admit })
  })

/** The admission step over the `QuotaStore` in context. */
export const layer = (options: QuotasOptions = {}): Layer.Layer<Quotas, never, QuotaStore> =>
  Layer.effect(Quotas, make(options))

/** The output cap a request reserves at an attempt: the clamped cap, the client's, or the default within the endpoint's. */
const outputAt = (attempt: Attempt, maxTokens: number | undefined): number =>
  attempt.maxTokens ??
    maxTokens ??
    Math.min(attempt.endpoint.maxCompletionTokens ?? DEFAULT_OUTPUT_RESERVATION, DEFAULT_OUTPUT_RESERVATION)

/**
 * The demand of a planned request: its estimated prompt, and the largest output cap and cost of its attempts (a
 * fallback may be dearer than the first choice). `output: false` for an API without output tokens (embeddings);
 * `outputField` the field the client's cap came in, when not `max_tokens` (`max_completion_tokens`,
 * `max_output_tokens`).
 */
export const demandOf = (
  attempts: ReadonlyArray<Attempt>,
  inputTokens: number,
  maxTokens: number | undefined,
  options: { readonly output?: boolean; readonly outputField?: string | undefined } = {}
): Demand => {
  const output = options.output !== false
  let outputTokens = 0
  let costNanoUsd = 0
  for (const attempt of attempts) {
    const out = output ? outputAt(attempt, maxTokens) : 0
    outputTokens = Math.max(outputTokens, out)
    const cost = Cost.cost(attempt.endpoint.pricing, { input: inputTokens, output: out, cacheRead: 0, cacheWrite: 0 })
    costNanoUsd = Math.max(costNanoUsd, nanoUsdOf(cost) ?? 0)
  }
  return {
    inputTokens,
    outputTokens,
    outputCapped: output && maxTokens !== undefined,
    outputField: options.outputField,
    costNanoUsd
  }
}
