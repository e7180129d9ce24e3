/**
 * The line of a request whose client went away before its answer: status 499, as nginx logs a request its client
 * closed, in the form of every other request's line (route, the model and provider of the attempt in flight, attempts,
 * duration; request id, key id and workspace), from what its progress tells (core's `Progress`). It goes to the usage
 * log's `abandoned`, which logs it and stores nothing: no usage record, nothing billed. A binding runs it once the
 * request's fiber was interrupted before an answer; nothing of it runs on the way of a request.
 */
import { UsageLog } from "@model-gateway/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { GatewayRequest } from "./HttpTypes.js"
import { recordedPath, refusal } from "./RouteDispatcher.js"
import type * as RouteTable from "./RouteTable.js"

/** nginx's status for a request whose client closed its connection before the answer ("client closed request"). */
export const CLIENT_CLOSED_REQUEST = 499

/** The route a request's record names: its route's method and pattern, else its method and path. */
const routeOf = <R>(table: RouteTable.Table<R>, { method, path }: GatewayRequest): string =>
  table.find(path)?.handler.methods.get(method)?.name ?? `${method} ${recordedPath(path)}`

/** What the line of `request` tells, at `now`: who asked and the attempt in flight, no tokens, no cost. */
const recordOf = <R>(
  table: RouteTable.Table<R>,
  request: GatewayRequest,
  requestId: string,
  now: number
): UsageLog.UsageRecord | undefined => {
  const progress = request.progress
  if (progress === undefined || progress.answered) return undefined
  const { attempt } = progress
  const started = progress.started === 0 ? now : progress.started
  return {
    ...refusal({
      request,
      requestId,
      route: routeOf(table, request),
      status: CLIENT_CLOSED_REQUEST,
      errorType: null,
      principal: progress.principal,
      sessionId: undefined,
      createdAt: started,
      latencyMs: now - started
    }),
    model: attempt?.model.id ?? null,
    provider: attempt?.endpoint.provider ?? null,
    endpointId: attempt?.endpoint.id ?? null,
    stream: progress.stream,
    attempts: progress.attempts
  }
}

/**
 * Tells the usage log of `request` (served by `table`), whose client went away before its answer; nothing when it had
 * its answer after all (its usage record is written) or the log writes no lines.
 */
export const tell =
  <R>(table: RouteTable.Table<R>) =>
  (request: GatewayRequest, requestId: string): Effect.Effect<void, never, UsageLog.UsageLog> =>
    Effect.flatMap(UsageLog.UsageLog, (log) => {
      const abandoned = log.abandoned
      if (abandoned === undefined) return Effect.void
      return Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const record = recordOf(table, request, requestId, now)
        return record === undefined ? Effect.void : abandoned(record)
      })
    })
