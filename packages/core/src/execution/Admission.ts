/**
 * The admission step around an execution, for every use case: after the route is planned and before the first
 * upstream attempt, the request's demand is reserved against the limits of its key and workspace (see
 * `limits/Quotas`). A refusal is the request's usage record and error; an admitted run carries its reservation, which
 * its usage record settles; a run that fails or is interrupted (the client went away) before that releases it.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as GatewayError from "../errors/GatewayError.js"
import type { Demand, QuotasService, QuotaStatus } from "../limits/Quotas.js"
import type { UsageLogService } from "../usage/UsageLog.js"
import * as Charging from "./Charging.js"
import type { ExecutionResult } from "./Execution.js"
import { streamOutcome } from "./Outcome.js"

/**
 * Runs `go` once `run` is admitted, with the reservation on the run it is given, and tells the limits' status on its
 * answer. No limit applies (no quotas, no scope for the principal, a fusion analysis, a run admitted already): `go`
 * runs as it is, at the cost of one look-up.
 */
export const admitted = <R extends Charging.Requested, A>(
  quotas: QuotasService | undefined,
  usageLog: UsageLogService,
  run: R,
  demand: () => Demand,
  go: (run: R) => Effect.Effect<A, GatewayError.GatewayError>,
  tell: (answer: A, quota: QuotaStatus) => A
): Effect.Effect<A, GatewayError.GatewayError> => {
  if (quotas === undefined || !run.recordUsage || run.admission !== undefined) return go(run)
  const scopes = quotas.scopesOf(run.context.principal)
  if (scopes === undefined) return go(run)
  return Effect.matchEffect(quotas.admit(scopes, demand(), run.clock.unsafeCurrentTimeMillis()), {
    onFailure: (error) => Charging.failed(usageLog, run, error, 0),
    onSuccess: (admission) =>
      Effect.map(
        Effect.onExit(
          go({ ...run, admission }),
          (exit) => (Exit.isSuccess(exit) ? Effect.void : admission.release)
        ),
        (answer) => tell(answer, admission.status)
      )
  })
}

/** An execution's result with the limits' status on its outcome. */
export const tellResult = <A>(result: ExecutionResult<A>, quota: QuotaStatus): ExecutionResult<A> => {
  const outcome = result.outcome
  return {
    ...result,
    // A stream's outcome is made again, not spread: its `frames` getter is its class's (see `streamOutcome`).
    outcome: outcome._tag === "Stream" ? streamOutcome(outcome.open, outcome.claim, quota) : { ...outcome, quota }
  }
}
