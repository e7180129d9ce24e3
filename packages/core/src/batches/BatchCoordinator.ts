/**
 * Moves one batch through its lifecycle, as the worker that holds its lease sees it: a `validating` batch starts (or
 * fails, when the catalogue lacks its model or providers); an `in_progress` batch whose every request has its result
 * is finalized and completed; one whose window has ended expires once nothing of it runs any more; a `cancelling` one
 * is `cancelled` once nothing of it runs any more. Every move is the state machine's and a compare-and-set in the
 * store: a move that lost a race (a client's cancel, another worker) changes nothing, and is looked at again later.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { CatalogueService } from "../catalogue/Catalogue.js"
import { type Batch, isTerminal } from "./Batch.js"
import * as BatchChecks from "./BatchChecks.js"
import * as BatchStateMachine from "./BatchStateMachine.js"
import type { BatchStoreService } from "./BatchStore.js"

export interface CoordinatorPorts {
  readonly store: BatchStoreService
  readonly catalogue: CatalogueService
  /** The auto-router's slug, a batch's model whose requests' models are chosen as they run. */
  readonly routerSlug: string | undefined
}

/** Applies `event` to the batch if its status accepts it and still is what it was: the moved batch, or none. */
export const move = (
  store: BatchStoreService,
  batch: Batch,
  event: BatchStateMachine.BatchEvent,
  now: number,
  errorMessage?: string
): Effect.Effect<Option.Option<Batch>> => {
  const target = BatchStateMachine.transition(batch.status, event)
  if (Either.isLeft(target)) return Effect.succeed(Option.none())
  return store.transition(batch.id, batch.status, {
    status: target.right,
    updatedAt: now,
    finalizedAt: isTerminal(target.right) ? now : undefined,
    errorMessage
  })
}

const finished = (batch: Batch) => batch.counts.completed + batch.counts.failed >= batch.counts.total

/** Does what the batch's status and progress call for at `now`. */
export const coordinate = (ports: CoordinatorPorts, batch: Batch, now: number): Effect.Effect<void> => {
  const { store } = ports
  const idle = Effect.map(store.running(batch.id, now), (n) => n === 0)
  switch (batch.status) {
    case "validating": {
      if (now >= batch.expiresAt) return Effect.asVoid(move(store, batch, "expire", now))
      return Effect.flatMap(ports.catalogue.snapshot, (snapshot) => {
        const problem = BatchChecks.check(snapshot, batch.model, batch.provider, ports.routerSlug)
        return Effect.asVoid(
          problem === undefined
            ? move(store, batch, "start", now)
            : move(store, batch, "fail", now, `validation failed: ${problem.message}`)
        )
      })
    }
    case "in_progress": {
      if (finished(batch)) {
        return Effect.flatMap(
          move(store, batch, "finalize", now),
          (finalizing) =>
            Option.isSome(finalizing) ? Effect.asVoid(move(store, finalizing.value, "complete", now)) : Effect.void
        )
      }
      if (now < batch.expiresAt) return Effect.void
      return Effect.flatMap(idle, (none) => none ? Effect.asVoid(move(store, batch, "expire", now)) : Effect.void)
    }
    case "finalizing":
      return Effect.asVoid(move(store, batch, "complete", now))
    case "cancelling":
      return Effect.flatMap(idle, (none) => none ? Effect.asVoid(move(store, batch, "cancelled", now)) : Effect.void)
    default:
      return Effect.void
  }
}
