/**
 * The batch store port: batch records (listed newest first with a cursor and filters, changed only by
 * compare-and-set on their status), their requests in submission order, and the leases through which the workers of
 * several gateway processes share them. A worker claims batches (to move them through their lifecycle) and requests
 * (to run them) for a while; a crashed worker's leases run out and another worker takes its work over. A request's
 * result is recorded only under the lease it was claimed with, so it is recorded exactly once, with the batch's
 * counts and usage in the same step.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { Batch, BatchStatus, ItemResult } from "./Batch.js"

/** A request of a new batch; its index is its position in the batch. */
export interface NewItem {
  readonly customId: string
  /** The request body, as JSON text. */
  readonly body: string
}

export interface ListQuery {
  readonly workspace: string
  /** Only these statuses; every status when absent or empty. */
  readonly statuses?: ReadonlyArray<BatchStatus> | undefined
  readonly limit: number
  /** Only batches after this id in the order of the list (older ones): the previous page's last id. */
  readonly after?: string | undefined
  /** Only batches created strictly after this time (epoch milliseconds). */
  readonly createdAfter?: number | undefined
  /** Only batches created strictly before this time (epoch milliseconds). */
  readonly createdBefore?: number | undefined
}

export interface Page {
  /** Newest first. */
  readonly batches: ReadonlyArray<Batch>
  readonly hasMore: boolean
}

/** What a status change also sets. */
export interface BatchChanges {
  readonly status: BatchStatus
  readonly updatedAt: number
  readonly finalizedAt?: number | undefined
  readonly errorMessage?: string | undefined
}

/** A request as the results read it: its result once it has one. */
export interface StoredItem {
  readonly index: number
  readonly customId: string
  readonly result: ItemResult | null
}

/** Who claims work, until when. */
export interface Lease {
  /** The claiming worker (one per process). */
  readonly owner: string
  /** Identifies this claim: a result is recorded only under the claim its request was given to. */
  readonly token: string
  /** Epoch milliseconds: leases that ended before this are free. */
  readonly now: number
  /** When the lease ends unless renewed. */
  readonly until: number
}

/** A request claimed to run. */
export interface ClaimedItem {
  readonly batchId: string
  readonly index: number
  readonly customId: string
  /** The request body, as JSON text. */
  readonly body: string
  readonly token: string
}

/** A request's end: its result, and what it adds to the batch's counts and usage. */
export interface Finished {
  readonly outcome: "completed" | "failed"
  readonly result: ItemResult
  readonly promptTokens: number
  readonly completionTokens: number
  /** USD, an exact decimal string. */
  readonly cost: string
}

/** A request's end, under the claim it ran with. */
export interface Recording {
  readonly item: ClaimedItem
  readonly finished: Finished
}

/** Recordings by batch, in order, each with its position; a request given twice keeps its first recording only. */
export const byBatch = (
  recordings: ReadonlyArray<Recording>
): Map<string, Array<{ readonly at: number; readonly recording: Recording }>> => {
  const groups = new Map<string, Array<{ readonly at: number; readonly recording: Recording }>>()
  const seen = new Set<string>()
  recordings.forEach((recording, at) => {
    const key = `${recording.item.batchId}\u0000${recording.item.index}`
    if (seen.has(key)) return
    seen.add(key)
    const group = groups.get(recording.item.batchId) ?? []
    group.push({ at, recording })
    groups.set(recording.item.batchId, group)
  })
  return groups
}

export interface BatchStoreService {
  /** Stores a new batch and its requests, all at once. */
  readonly create: (batch: Batch, items: ReadonlyArray<NewItem>) => Effect.Effect<void>
  /** A batch of the workspace; none for an unknown id or another workspace's batch. */
  readonly get: (workspace: string, id: string) => Effect.Effect<Option.Option<Batch>>
  readonly list: (query: ListQuery) => Effect.Effect<Page>
  /** Applies `changes` if the batch's status is still `expected`: the updated batch, or none (changed, or gone). */
  readonly transition: (id: string, expected: BatchStatus, changes: BatchChanges) => Effect.Effect<Option.Option<Batch>>
  /** Removes a batch of the workspace whose status is still `expected`, with its requests; false when it is not. */
  readonly remove: (workspace: string, id: string, expected: BatchStatus) => Effect.Effect<boolean>
  /** Up to `limit` requests after index `after` (-1: from the first), in submission order, with their results. */
  readonly results: (batchId: string, after: number, limit: number) => Effect.Effect<ReadonlyArray<StoredItem>>
  /**
   * Leases up to `limit` unfinished batches (validating, in progress, finalizing, cancelling) whose lease is free or
   * already the owner's, oldest first, to move them through their lifecycle; renews the owner's.
   */
  readonly claimBatches: (lease: Lease, limit: number) => Effect.Effect<ReadonlyArray<Batch>>
  /** Up to `limit` batches in progress whose completion window has not ended at `now`, oldest first. */
  readonly runnable: (now: number, limit: number) => Effect.Effect<ReadonlyArray<Batch>>
  /**
   * Leases up to `limit` requests of a batch that have no result and no live lease (never started, or claimed by a
   * worker whose lease ran out), in submission order; none unless the batch is in progress and its window has not
   * ended at `lease.now`.
   */
  readonly claimItems: (batchId: string, lease: Lease, limit: number) => Effect.Effect<ReadonlyArray<ClaimedItem>>
  /** Extends every lease the owner holds (batches and requests) to `until`. */
  readonly renew: (owner: string, until: number) => Effect.Effect<void>
  /** Gives up every lease the owner holds: its requests without results can be claimed again at once. */
  readonly release: (owner: string) => Effect.Effect<void>
  /** Gives up the lease of one request (it did not run): it can be claimed again at once. */
  readonly releaseItem: (item: ClaimedItem) => Effect.Effect<void>
  /**
   * Records requests' results, each if its request is still under the claim it came with, adding to its batch's counts
   * and usage in the same step (one step per batch); for each, whether it was recorded (false: the claim was lost, or
   * the request has its result already, or it is given twice).
   */
  readonly record: (recordings: ReadonlyArray<Recording>, now: number) => Effect.Effect<ReadonlyArray<boolean>>
  /** How many requests of a batch are running under a live lease at `now`. */
  readonly running: (batchId: string, now: number) => Effect.Effect<number>
}

/** Port: batches, their requests and results, and the leases that share their work between processes. */
export class BatchStore extends Context.Tag("@model-gateway/core/BatchStore")<BatchStore, BatchStoreService>() {}
