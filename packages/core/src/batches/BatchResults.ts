/**
 * A terminal batch's results, one per request in submission order, read from the store a page at a time as they are
 * written out (a batch of thousands of requests is never held whole). A request that never ran (the batch was
 * cancelled, expired or failed first) has an error saying so.
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { Batch, ItemResult } from "./Batch.js"
import type { BatchStoreService, StoredItem } from "./BatchStore.js"

/** Results per read from the store. */
export const PAGE = 500

/** The error of a request that never ran, by the batch's status. */
const notRun = (batch: Batch): ItemResult["error"] => {
  switch (batch.status) {
    case "cancelled":
      return { message: "The batch was cancelled before this request ran", type: "batch_cancelled", param: null }
    case "expired":
      return { message: "The batch expired before this request ran", type: "batch_expired", param: null }
    default:
      return {
        message: batch.errorMessage ?? "The batch ended before this request ran",
        type: "batch_failed",
        param: null
      }
  }
}

/** A request's result, or the error of one that never ran. */
export const resultOf = (batch: Batch, item: StoredItem): ItemResult =>
  item.result ?? {
    id: `batch_req_${batch.id.slice("batch_".length)}_${item.index}`,
    customId: item.customId,
    response: null,
    error: notRun(batch)
  }

/** Every result of a batch, in submission order. */
export const stream = (store: BatchStoreService, batch: Batch): Stream.Stream<ItemResult> =>
  Stream.paginateChunkEffect(-1, (after: number) =>
    Effect.map(store.results(batch.id, after, PAGE), (items) => {
      const last = items.at(-1)
      return [
        Chunk.fromIterable(items.map((item) => resultOf(batch, item))),
        items.length < PAGE || last === undefined ? Option.none<number>() : Option.some(last.index)
      ] as const
    }))
