/**
 * The vocabulary of an execution shared by every use case: the request as the executor sees it, its planned
 * attempts, the ports it records to, and what it gives back.
 */
import type { EndpointStatsService } from "../health/EndpointStats.js"
import type { Attempt, PipelineStep } from "../routing/RoutePlanner.js"
import type { SessionAffinityService } from "../sessions/SessionAffinity.js"
import type { UsageLogService } from "../usage/UsageLog.js"
import type { Charge, Requested } from "./Charging.js"
import type { Dialect } from "./Dialect.js"
import type { Outcome } from "./Outcome.js"

/** A request being executed: what its usage record says of it, and the pipeline `service_metadata` reports. */
export interface Execution extends Requested {
  readonly steps: Array<PipelineStep>
}

/** Every field of an `Execution`: a field added to it and not here fails to compile. */
const EXECUTION_FIELDS = {
  context: true,
  started: true,
  clock: true,
  stream: true,
  modelId: true,
  sessionId: true,
  user: true,
  extra: true,
  recordUsage: true,
  metadata: true,
  admission: true,
  steps: true
} as const satisfies Record<keyof Execution, true>

const executionKeys = Object.keys(EXECUTION_FIELDS) as ReadonlyArray<keyof Execution>

/**
 * The fields of an `Execution`, copied out of `run`, which may be a larger object (a messages run holds the request
 * and the body): what outlives the upstream call (a stream being told, its record) keeps this copy, and the rest of
 * the run can go.
 */
export const executionOf = (run: Execution): Execution => {
  const out: Record<string, unknown> = {}
  for (const key of executionKeys) out[key] = run[key]
  return out as unknown as Execution
}

/** The ports an execution records to. */
export interface ExecutorPorts {
  readonly usageLog: UsageLogService
  readonly stats: EndpointStatsService
  readonly affinity: SessionAffinityService
}

/** An execution whose route is planned: its attempts in order, and the dialect that calls and tells them. */
export interface Planned<A, E> {
  readonly run: Execution
  readonly attempts: ReadonlyArray<Attempt>
  /** The session's affinity key, when the request belongs to a session. */
  readonly affinityKey: string | undefined
  /** The key of the stored response the request continues, when its endpoint was known (`Routing.Route`). */
  readonly responseKey?: string | undefined
  readonly dialect: Dialect<A, E>
}

/** What an execution gives back: the outcome, and for a JSON answer the answer itself with its charge. */
export interface ExecutionResult<A> {
  readonly outcome: Outcome
  readonly answer: A | undefined
  readonly charge: Charge | undefined
}
