/**
 * In-process `BatchStore`: batches in a Map (listed by id, which sorts by creation), each with its requests in an
 * array. Every method runs synchronously, so each is atomic; leases work as in the SQL stores, for one process.
 */
import { type Batch as Batches, BatchStore, Cost } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

type Batch = Batches.Batch

interface Item {
  readonly customId: string
  readonly body: string
  state: "pending" | "running" | "done"
  owner: string | null
  token: string | null
  leaseUntil: number
  result: Batches.ItemResult | null
}

interface Entry {
  batch: Batch
  owner: string | null
  leaseUntil: number
  readonly items: Array<Item>
}

const ACTIVE: ReadonlySet<Batches.BatchStatus> = new Set(["validating", "in_progress", "finalizing", "cancelling"])

const byIdDescending = (a: Entry, b: Entry) => (a.batch.id < b.batch.id ? 1 : a.batch.id > b.batch.id ? -1 : 0)
const byIdAscending = (a: Entry, b: Entry) => -byIdDescending(a, b)

/** Builds an empty in-memory batch store. */
export const make: Effect.Effect<BatchStore.BatchStoreService> = Effect.sync(() => {
  const batches = new Map<string, Entry>()

  const free = (owner: string | null, until: number, lease: BatchStore.Lease) =>
    owner === null || owner === lease.owner || until < lease.now

  const create = (batch: Batch, items: ReadonlyArray<BatchStore.NewItem>) =>
    Effect.sync(() => {
      batches.set(batch.id, {
        batch,
        owner: null,
        leaseUntil: 0,
        items: items.map((item) => ({
          customId: item.customId,
          body: item.body,
          state: "pending",
          owner: null,
          token: null,
          leaseUntil: 0,
          result: null
        }))
      })
    })

  const get = (workspace: string, id: string) =>
    Effect.sync(() => {
      const entry = batches.get(id)
      return entry !== undefined && entry.batch.workspace === workspace ? Option.some(entry.batch) : Option.none()
    })

  const list = (query: BatchStore.ListQuery) =>
    Effect.sync((): BatchStore.Page => {
      const statuses = query.statuses !== undefined && query.statuses.length > 0 ? new Set(query.statuses) : undefined
      const matching = [...batches.values()]
        .filter(({ batch }) =>
          batch.workspace === query.workspace &&
          (statuses === undefined || statuses.has(batch.status)) &&
          (query.after === undefined || batch.id < query.after) &&
          (query.createdAfter === undefined || batch.createdAt > query.createdAfter) &&
          (query.createdBefore === undefined || batch.createdAt < query.createdBefore)
        )
        .sort(byIdDescending)
      return { batches: matching.slice(0, query.limit).map((e) => e.batch), hasMore: matching.length > query.limit }
    })

  const transition = (id: string, expected: Batches.BatchStatus, changes: BatchStore.BatchChanges) =>
    Effect.sync(() => {
      const entry = batches.get(id)
      if (entry === undefined || entry.batch.status !== expected) return Option.none<Batch>()
      entry.batch = {
        ...entry.batch,
        status: changes.status,
        updatedAt: changes.updatedAt,
        finalizedAt: changes.finalizedAt ?? entry.batch.finalizedAt,
        errorMessage: changes.errorMessage ?? entry.batch.errorMessage
      }
      return Option.some(entry.batch)
    })

  const remove = (workspace: string, id: string, expected: Batches.BatchStatus) =>
    Effect.sync(() => {
      const entry = batches.get(id)
      if (entry === undefined || entry.batch.workspace !== workspace || entry.batch.status !== expected) return false
      batches.delete(id)
      return true
    })

  const results = (batchId: string, after: number, limit: number) =>
    Effect.sync(() => {
      const entry = batches.get(batchId)
      if (entry === undefined) return []
      const start = Math.max(0, after + 1)
      return entry.items.slice(start, start + limit).map((item, i): BatchStore.StoredItem => ({
        index: start + i,
        customId: item.customId,
        result: item.result
      }))
    })

  const claimBatches = (lease: BatchStore.Lease, limit: number) =>
    Effect.sync(() => {
      const claimed: Array<Batch> = []
      for (const entry of [...batches.values()].sort(byIdAscending)) {
        if (claimed.length >= limit) break
        if (!ACTIVE.has(entry.batch.status) || !free(entry.owner, entry.leaseUntil, lease)) continue
        entry.owner = lease.owner
        entry.leaseUntil = lease.until
        claimed.push(entry.batch)
      }
      return claimed
    })

  const runnable = (now: number, limit: number) =>
    Effect.sync(() =>
      [...batches.values()]
        .filter((e) => e.batch.status === "in_progress" && e.batch.expiresAt > now)
        .sort(byIdAscending)
        .slice(0, limit)
        .map((e) => e.batch)
    )

  const claimItems = (batchId: string, lease: BatchStore.Lease, limit: number) =>
    Effect.sync(() => {
      const entry = batches.get(batchId)
      const claimed: Array<BatchStore.ClaimedItem> = []
      if (entry === undefined || entry.batch.status !== "in_progress" || entry.batch.expiresAt <= lease.now) {
        return claimed
      }
      for (let index = 0; index < entry.items.length && claimed.length < limit; index++) {
        const item = entry.items[index]
        if (item.state === "done" || (item.state === "running" && item.leaseUntil >= lease.now)) continue
        item.state = "running"
        item.owner = lease.owner
        item.token = lease.token
        item.leaseUntil = lease.until
        claimed.push({ batchId, index, customId: item.customId, body: item.body, token: lease.token })
      }
      return claimed
    })

  const renew = (owner: string, until: number) =>
    Effect.sync(() => {
      for (const entry of batches.values()) {
        if (entry.owner === owner && ACTIVE.has(entry.batch.status)) entry.leaseUntil = until
        for (const item of entry.items) {
          if (item.state === "running" && item.owner === owner) item.leaseUntil = until
        }
      }
    })

  const unlease = (item: Item) => {
    item.state = "pending"
    item.owner = null
    item.token = null
    item.leaseUntil = 0
  }

  const release = (owner: string) =>
    Effect.sync(() => {
      for (const entry of batches.values()) {
        if (entry.owner === owner) {
          entry.owner = null
          entry.leaseUntil = 0
        }
        for (const item of entry.items) if (item.state === "running" && item.owner === owner) unlease(item)
      }
    })

  const claimedItem = (claimed: BatchStore.ClaimedItem): Item | undefined => {
    const item = batches.get(claimed.batchId)?.items[claimed.index]
    return item !== undefined && item.state === "running" && item.token === claimed.token ? item : undefined
  }

  const releaseItem = (claimed: BatchStore.ClaimedItem) =>
    Effect.sync(() => {
      const item = claimedItem(claimed)
      if (item !== undefined) unlease(item)
    })

  const recordOne = ({ finished, item: claimed }: BatchStore.Recording, now: number): boolean => {
    const entry = batches.get(claimed.batchId)
    const item = claimedItem(claimed)
    if (entry === undefined || item === undefined) return false
    item.state = "done"
    item.result = finished.result
    item.owner = null
    item.token = null
    const { counts, usage } = entry.batch
    entry.batch = {
      ...entry.batch,
      counts: {
        total: counts.total,
        completed: counts.completed + (finished.outcome === "completed" ? 1 : 0),
        failed: counts.failed + (finished.outcome === "failed" ? 1 : 0)
      },
      usage: {
        promptTokens: usage.promptTokens + finished.promptTokens,
        completionTokens: usage.completionTokens + finished.completionTokens,
        cost: Cost.sumDecimals([usage.cost, finished.cost])
      },
      updatedAt: now
    }
    return true
  }

  const record = (recordings: ReadonlyArray<BatchStore.Recording>, now: number) =>
    Effect.sync(() => recordings.map((recording) => recordOne(recording, now)))

  const running = (batchId: string, now: number) =>
    Effect.sync(() =>
      (batches.get(batchId)?.items ?? []).filter((item) => item.state === "running" && item.leaseUntil >= now).length
    )

  return BatchStore.BatchStore.of({
    create,
    get,
    list,
    transition,
    remove,
    results,
    claimBatches,
    runnable,
    claimItems,
    renew,
    release,
    releaseItem,
    record,
    running
  })
})

/** The in-memory `BatchStore` layer. */
export const layer: Layer.Layer<BatchStore.BatchStore> = Layer.effect(BatchStore.BatchStore, make)
