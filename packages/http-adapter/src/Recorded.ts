/**
 * The usage record of a request a route answers itself, without a model (the intern routes, the endpoint catalogue):
 * who asked, the route, the status and error type, how long it took. Every request leaves exactly one record: the
 * messages use case records those it runs, the dispatcher those it refuses before any handler, and these routes the
 * rest through this. An interrupted request (the client went away before an answer) is not recorded: its binding
 * logs it (`Abandoned`).
 */
import { GatewayError, UsageLog } from "@model-gateway/core"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type { GatewayResponse } from "./HttpTypes.js"
import { refusal } from "./RouteDispatcher.js"
import type * as RouteTable from "./RouteTable.js"

type Request = RouteTable.AuthenticatedRequest<UsageLog.UsageLog>

const record = (request: Request, started: number, status: number, errorType: string | null) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    Context.get(request.services, UsageLog.UsageLog).record(refusal({
      request: request.request,
      requestId: request.requestId,
      route: request.route,
      status,
      errorType,
      principal: request.principal,
      sessionId: undefined,
      createdAt: started,
      latencyMs: now - started
    })))

const recordFailure = (request: Request, started: number, exit: Exit.Exit<unknown, GatewayError.GatewayError>) => {
  if (Exit.isSuccess(exit)) return Effect.void
  const failure = Cause.failureOption(exit.cause)
  if (Option.isNone(failure)) return Effect.void
  const { status, type } = GatewayError.describe(failure.value)
  return record(request, started, status, type)
}

/** Runs a route's answer and records it, success or failure. */
export const recorded = <R>(
  request: RouteTable.AuthenticatedRequest<R | UsageLog.UsageLog>,
  answer: Effect.Effect<GatewayResponse, GatewayError.GatewayError, R>
): Effect.Effect<GatewayResponse, GatewayError.GatewayError, R> =>
  Effect.flatMap(Clock.currentTimeMillis, (started) =>
    Effect.onExit(answer, (exit) =>
      Exit.isSuccess(exit)
        ? record(request, started, exit.value.status, null)
        : recordFailure(request, started, exit)))

/** Runs the part of a route's work that precedes a use case that records its own requests: only its failures. */
export const recordedFailures = <A, R>(
  request: RouteTable.AuthenticatedRequest<R | UsageLog.UsageLog>,
  work: Effect.Effect<A, GatewayError.GatewayError, R>
): Effect.Effect<A, GatewayError.GatewayError, R> =>
  Effect.flatMap(
    Clock.currentTimeMillis,
    (started) => Effect.onExit(work, (exit) => recordFailure(request, started, exit))
  )
