/**
 * The batch lifecycle as a pure transition function: which events each status accepts and where they lead. Every
 * other move is rejected. Stores apply the moves as compare-and-set updates on the status, so two processes (or a
 * worker and a client's cancel) racing on one batch cannot both move it. A new batch is `validating`.
 *
 * | event     | from                                | to          |
 * |-----------|-------------------------------------|-------------|
 * | start     | validating                          | in_progress |
 * | fail      | validating, in_progress, finalizing | failed      |
 * | finalize  | in_progress                         | finalizing  |
 * | complete  | finalizing                          | completed   |
 * | expire    | validating, in_progress             | expired     |
 * | cancel    | validating, in_progress             | cancelling  |
 * | cancelled | cancelling                          | cancelled   |
 *
 * Terminal statuses (completed, failed, expired, cancelled) accept nothing.
 */
import * as Data from "effect/Data"
import * as Either from "effect/Either"
import type { BatchStatus } from "./Batch.js"

export const events = [
  /** A worker found the batch runnable (its model and providers exist). */
  "start",
  /** Validation failed, or the batch cannot go on (its model is gone). */
  "fail",
  /** Every request has its result. */
  "finalize",
  /** The counts are final. */
  "complete",
  /** The completion window passed before every request ran. */
  "expire",
  /** A client asked to cancel: no new request starts. */
  "cancel",
  /** The requests that were running have finished. */
  "cancelled"
] as const

export type BatchEvent = typeof events[number]

/** An event the batch's status does not accept. */
export class IllegalTransition extends Data.TaggedError("IllegalTransition")<{
  readonly from: BatchStatus
  readonly event: BatchEvent
}> {
  override get message(): string {
    return `a batch that is ${this.from.replace("_", " ")} cannot take '${this.event}'`
  }
}

const next = (from: BatchStatus, event: BatchEvent): BatchStatus | undefined => {
  switch (event) {
    case "start":
      return from === "validating" ? "in_progress" : undefined
    case "fail":
      return from === "validating" || from === "in_progress" || from === "finalizing" ? "failed" : undefined
    case "finalize":
      return from === "in_progress" ? "finalizing" : undefined
    case "complete":
      return from === "finalizing" ? "completed" : undefined
    case "expire":
      return from === "validating" || from === "in_progress" ? "expired" : undefined
    case "cancel":
      return from === "validating" || from === "in_progress" ? "cancelling" : undefined
    case "cancelled":
      return from === "cancelling" ? "cancelled" : undefined
  }
}

/** The status an event moves a batch to, or why it cannot. */
export const transition = (from: BatchStatus, event: BatchEvent): Either.Either<BatchStatus, IllegalTransition> => {
  const target = next(from, event)
  return target === undefined ? Either.left(new IllegalTransition({ from, event })) : Either.right(target)
}

/** The events a status accepts. */
export const accepted = (from: BatchStatus): ReadonlyArray<BatchEvent> =>
  events.filter((event) => next(from, event) !== undefined)
