/**
 * The contract of the `BatchStore` port, run against every adapter (memory, SQLite, PostgreSQL): each adapter package
 * calls `batchStoreContract` with its layer. Tests use workspaces and batches of their own, so the layer is shared by
 * the whole suite; those that claim across batches look only at their own.
 */
import { assert, describe, layer as layerTest } from "@effect/vitest"
import type { Batch } from "@model-gateway/core"
import { BatchStore } from "@model-gateway/core"
import type { Layer } from "effect"
import { Effect, Option } from "effect"

const unique = (prefix: string) => `${prefix}-${globalThis.crypto.randomUUID()}`

let sequence = 0

/** A batch id as the service makes them: creation time, then a sequence. */
export const batchId = (ms: number) =>
  `batch_${ms.toString(16).padStart(12, "0")}${(sequence++).toString(16).padStart(8, "0")}`

const T0 = 1_750_000_000_000

/** A batch with every field set; override what a test cares about. */
export const aBatch = (overrides: Partial<Batch.Batch> = {}): Batch.Batch => {
  const createdAt = overrides.createdAt ?? T0
  return {
    id: batchId(createdAt),
    workspace: unique("ws"),
    keyId: "0123456789ab",
    endpoint: "/v1/chat/completions",
    model: "acme/gpt",
    completionWindow: "24h",
    status: "validating",
    provider: { only: ["acme"], allowFallbacks: false },
    app: { referer: "https://app.example", title: "App", categories: "cli,tools" },
    counts: { total: 3, completed: 0, failed: 0 },
    usage: { promptTokens: 0, completionTokens: 0, cost: "0" },
    errorMessage: null,
    createdAt,
    expiresAt: createdAt + 86_400_000,
    finalizedAt: null,
    updatedAt: createdAt,
    ...overrides
  }
}

const itemsOf = (n: number): Array<BatchStore.NewItem> =>
  Array.from({ length: n }, (_, i) => ({ customId: `req-${i}`, body: JSON.stringify({ n: i, text: "é✓" }) }))

const lease = (owner: string, now: number, ms = 30_000): BatchStore.Lease => ({
  owner,
  token: unique("claim"),
  now,
  until: now + ms
})

const finished = (item: BatchStore.ClaimedItem, outcome: "completed" | "failed", cost = "0.000001") =>
  ({
    outcome,
    result: {
      id: `batch_req_${item.index}`,
      customId: item.customId,
      response: outcome === "completed" ? { statusCode: 200, requestId: "req_1", body: { ok: item.index } } : null,
      error: outcome === "failed" ? { message: "nope", type: "rate_limit_error", param: null } : null
    },
    promptTokens: 10,
    completionTokens: 5,
    cost
  }) satisfies BatchStore.Finished

/** Records one request's result; whether it was recorded. */
const recordOne = (
  store: BatchStore.BatchStoreService,
  item: BatchStore.ClaimedItem,
  done: BatchStore.Finished,
  now: number
) => Effect.map(store.record([{ item, finished: done }], now), ([recorded]) => recorded)

/** Stores a batch (in progress unless said otherwise) with `n` requests. */
const stored = (n: number, overrides: Partial<Batch.Batch> = {}) =>
  Effect.gen(function*() {
    const store = yield* BatchStore.BatchStore
    const batch = aBatch({ status: "in_progress", counts: { total: n, completed: 0, failed: 0 }, ...overrides })
    yield* store.create(batch, itemsOf(n))
    return batch
  })

/** Defines a `describe` block that checks the `BatchStore` contract against `layer`. */
export const batchStoreContract = (name: string, layer: Layer.Layer<BatchStore.BatchStore, unknown>): void =>
  layerTest(layer, { excludeTestServices: true, timeout: "60 seconds" })(`batch store contract: ${name}`, (it) => {
    describe("records", () => {
      it.effect("stores a batch and reads it back, only in its own workspace", () =>
        Effect.gen(function*() {
          const store = yield* BatchStore.BatchStore
          const batch = aBatch()
          yield* store.create(batch, itemsOf(3))
          assert.deepStrictEqual(yield* store.get(batch.workspace, batch.id), Option.some(batch))
          assert.isTrue(Option.isNone(yield* store.get(unique("other"), batch.id)))
          const bare = aBatch({
            keyId: null,
            provider: null,
            app: { referer: null, title: null, categories: null },
            endpoint: "/v1/messages"
          })
          yield* store.create(bare, [])
          assert.deepStrictEqual(yield* store.get(bare.workspace, bare.id), Option.some(bare))
        }))

      it.effect("lists newest first, a page at a time, with status and strict creation-time filters", () =>
        Effect.gen(function*() {
          const store = yield* BatchStore.BatchStore
          const workspace = unique("ws")
          const made = [0, 1, 2, 3, 4].map((i) =>
            aBatch({ workspace, createdAt: T0 + i * 1000, status: i % 2 === 0 ? "completed" : "in_progress" })
          )
          for (const batch of made) yield* store.create(batch, [])
          yield* store.create(aBatch(), [])
          const ids = (page: BatchStore.Page) => page.batches.map((b) => b.id)
          const first = yield* store.list({ workspace, limit: 2 })
          assert.deepStrictEqual(ids(first), [made[4].id, made[3].id])
          assert.isTrue(first.hasMore)
          const second = yield* store.list({ workspace, limit: 2, after: made[3].id })
          assert.deepStrictEqual(ids(second), [made[2].id, made[1].id])
          const last = yield* store.list({ workspace, limit: 2, after: made[1].id })
          assert.deepStrictEqual(ids(last), [made[0].id])
          assert.isFalse(last.hasMore)
          const exact = yield* store.list({ workspace, limit: 5 })
          assert.strictEqual(exact.batches.length, 5)
          assert.isFalse(exact.hasMore)
          const done = yield* store.list({ workspace, limit: 10, statuses: ["completed", "failed"] })
          assert.deepStrictEqual(ids(done), [made[4].id, made[2].id, made[0].id])
          const window = yield* store.list({ workspace, limit: 10, createdAfter: T0 + 1000, createdBefore: T0 + 4000 })
          assert.deepStrictEqual(ids(window), [made[3].id, made[2].id])
          assert.deepStrictEqual(ids(yield* store.list({ workspace: unique("ws"), limit: 10 })), [])
        }))

      it.effect("moves a batch only from the status it is expected to have", () =>
        Effect.gen(function*() {
          const store = yield* BatchStore.BatchStore
          const batch = aBatch()
          yield* store.create(batch, [])
          const stale = yield* store.transition(batch.id, "in_progress", { status: "finalizing", updatedAt: T0 + 1 })
          assert.isTrue(Option.isNone(stale))
          const started = yield* store.transition(batch.id, "validating", { status: "in_progress", updatedAt: T0 + 2 })
          assert.deepStrictEqual(started, Option.some({ ...batch, status: "in_progress", updatedAt: T0 + 2 }))
          const failed = yield* store.transition(batch.id, "in_progress", {
            status: "failed",
            updatedAt: T0 + 3,
            finalizedAt: T0 + 3,
            errorMessage: "model gone"
          })
          assert.deepStrictEqual(
            Option.map(failed, (b) => [b.status, b.finalizedAt, b.errorMessage]),
            Option.some(["failed", T0 + 3, "model gone"])
          )
          const unknown = yield* store.transition(unique("batch"), "validating", {
            status: "in_progress",
            updatedAt: T0
          })
          assert.isTrue(Option.isNone(unknown))
        }))

      it.effect("removes a batch of the workspace in the expected status, with its requests", () =>
        Effect.gen(function*() {
          const store = yield* BatchStore.BatchStore
          const batch = yield* stored(3, { status: "completed" })
          assert.isFalse(yield* store.remove(unique("ws"), batch.id, "completed"))
          assert.isFalse(yield* store.remove(batch.workspace, batch.id, "in_progress"))
          assert.strictEqual((yield* store.results(batch.id, -1, 10)).length, 3)
          assert.isTrue(yield* store.remove(batch.workspace, batch.id, "completed"))
          assert.isTrue(Option.isNone(yield* store.get(batch.workspace, batch.id)))
          assert.deepStrictEqual(yield* store.results(batch.id, -1, 10), [])
          assert.isFalse(yield* store.remove(batch.workspace, batch.id, "completed"))
        }))
    })

    describe("requests and results", () => {
      it.effect("gives requests in submission order, a page at a time, with their results once recorded", () =>
        Effect.gen(function*() {
          const store = yield* BatchStore.BatchStore
          const batch = yield* stored(5)
          const before = yield* store.results(batch.id, -1, 10)
          assert.deepStrictEqual(before.map((i) => [i.index, i.customId, i.result]), [
            [0, "req-0", null],
            [1, "req-1", null],
            [2, "req-2", null],
            [3, "req-3", null],
            [4, "req-4", null]
          ])
          const claimed = yield* store.claimItems(batch.id, lease(unique("w"), T0), 2)
          assert.deepStrictEqual(claimed.map((i) => [i.index, i.customId]), [[0, "req-0"], [1, "req-1"]])
          assert.deepStrictEqual(JSON.parse(claimed[1].body), { n: 1, text: "é✓" })
          assert.isTrue(yield* recordOne(store, claimed[1], finished(claimed[1], "completed"), T0 + 5))
          const page = yield* store.results(batch.id, 0, 2)
          assert.deepStrictEqual(page.map((i) => i.index), [1, 2])
          assert.deepStrictEqual(page[0].result, finished(claimed[1], "completed").result)
          assert.isNull(page[1].result)
        }))

      it.effect("records a result once, under its claim, with the batch's counts and usage", () =>
        Effect.gen(function*() {
          const store = yield* BatchStore.BatchStore
          const batch = yield* stored(3)
          const [a, b, c] = yield* store.claimItems(batch.id, lease(unique("w"), T0), 3)
          assert.isTrue(yield* recordOne(store, a, finished(a, "completed", "0.000123"), T0 + 1))
          assert.isFalse(yield* recordOne(store, a, finished(a, "completed", "0.000123"), T0 + 2))
          assert.isFalse(yield* recordOne(store, { ...b, token: "not-the-claim" }, finished(b, "completed"), T0 + 2))
          assert.isTrue(yield* recordOne(store, b, finished(b, "failed", "0"), T0 + 3))
          assert.isTrue(yield* recordOne(store, c, finished(c, "completed", "0.0000000000000000015"), T0 + 4))
          const after = Option.getOrThrow(yield* store.get(batch.workspace, batch.id))
          assert.deepStrictEqual(after.counts, { total: 3, completed: 2, failed: 1 })
          assert.deepStrictEqual(after.usage, {
            promptTokens: 30,
            completionTokens: 15,
            cost: "0.0001230000000000015"
          })
          assert.strictEqual(after.updatedAt, T0 + 4)
          assert.deepStrictEqual(yield* store.claimItems(batch.id, lease(unique("w"), T0 + 10), 3), [])
        }))

      it.effect("records several results at once, across batches, each only under its claim and only once", () =>
        Effect.gen(function*() {
          const store = yield* BatchStore.BatchStore
          const one = yield* stored(3)
          const two = yield* stored(2)
          const [a, b, c] = yield* store.claimItems(one.id, lease(unique("w"), T0), 3)
          const [d, e] = yield* store.claimItems(two.id, lease(unique("w"), T0), 2)
          const recorded = yield* store.record([
            { item: a, finished: finished(a, "completed", "0.1") },
            { item: d, finished: finished(d, "failed", "0") },
            { item: { ...b, token: "stale" }, finished: finished(b, "completed") },
            { item: a, finished: finished(a, "failed") },
            { item: c, finished: finished(c, "completed", "0.2") },
            { item: e, finished: finished(e, "completed", "0.3") }
          ], T0 + 1)
          assert.deepStrictEqual(recorded, [true, true, false, false, true, true])
          const first = Option.getOrThrow(yield* store.get(one.workspace, one.id))
          assert.deepStrictEqual(first.counts, { total: 3, completed: 2, failed: 0 })
          assert.deepStrictEqual(first.usage, { promptTokens: 20, completionTokens: 10, cost: "0.3" })
          const second = Option.getOrThrow(yield* store.get(two.workspace, two.id))
          assert.deepStrictEqual(second.counts, { total: 2, completed: 1, failed: 1 })
          assert.strictEqual(second.usage.cost, "0.3")
          const results = yield* store.results(one.id, -1, 10)
          assert.deepStrictEqual(results.map((r) => r.result?.response?.statusCode ?? null), [200, null, 200])
          assert.deepStrictEqual(yield* store.record([], T0 + 2), [])
        }))

      it.effect("claims nothing of a batch that is not in progress, or whose window has ended", () =>
        Effect.gen(function*() {
          const store = yield* BatchStore.BatchStore
          for (const status of ["validating", "cancelling", "completed", "expired"] as const) {
            const batch = yield* stored(2, { status })
            assert.deepStrictEqual(yield* store.claimItems(batch.id, lease(unique("w"), T0), 2), [], status)
          }
          const ended = yield* stored(2, { expiresAt: T0 + 1000 })
          assert.deepStrictEqual(yield* store.claimItems(ended.id, lease(unique("w"), T0 + 1000), 2), [])
          assert.strictEqual((yield* store.claimItems(ended.id, lease(unique("w"), T0 + 999), 2)).length, 2)
        }))

      it.effect("claims for several workers at once are disjoint and cover every request", () =>
        Effect.gen(function*() {
          const store = yield* BatchStore.BatchStore
          const batch = yield* stored(60)
          const claims = yield* Effect.all(
            Array.from({ length: 12 }, (_, i) => store.claimItems(batch.id, lease(`w${i % 3}`, T0), 7)),
            { concurrency: "unbounded" }
          )
          const indexes = claims.flat().map((i) => i.index).sort((x, y) => x - y)
          assert.deepStrictEqual(indexes, Array.from({ length: 60 }, (_, i) => i))
          const all = claims.flat()
          const recorded = yield* Effect.all(
            [...all, ...all].map((item) => recordOne(store, item, finished(item, "completed", "0.5"), T0 + 1)),
            { concurrency: "unbounded" }
          )
          assert.strictEqual(recorded.filter(Boolean).length, 60)
          const after = Option.getOrThrow(yield* store.get(batch.workspace, batch.id))
          assert.deepStrictEqual(after.counts, { total: 60, completed: 60, failed: 0 })
          assert.strictEqual(after.usage.cost, "30")
        }))

      it.effect("a lease that ran out lets another worker take the request; the first can no longer record it", () =>
        Effect.gen(function*() {
          const store = yield* BatchStore.BatchStore
          const batch = yield* stored(2)
          const [first] = yield* store.claimItems(batch.id, lease("crashed", T0, 1000), 1)
          assert.strictEqual(yield* store.running(batch.id, T0 + 1000), 1)
          assert.strictEqual(yield* store.running(batch.id, T0 + 1001), 0)
          const early = yield* store.claimItems(batch.id, lease("other", T0 + 1000), 5)
          assert.deepStrictEqual(early.map((i) => i.index), [1])
          const late = yield* store.claimItems(batch.id, lease("other", T0 + 1001), 5)
          assert.deepStrictEqual(late.map((i) => i.index), [0])
          assert.isFalse(yield* recordOne(store, first, finished(first, "completed"), T0 + 2000))
          assert.isTrue(yield* recordOne(store, late[0], finished(late[0], "completed"), T0 + 2000))
          const after = Option.getOrThrow(yield* store.get(batch.workspace, batch.id))
          assert.strictEqual(after.counts.completed, 1)
        }))

      it.effect("renewing keeps a worker's leases; releasing gives its requests back at once", () =>
        Effect.gen(function*() {
          const store = yield* BatchStore.BatchStore
          const batch = yield* stored(3)
          const owner = unique("w")
          const claimed = yield* store.claimItems(batch.id, lease(owner, T0, 1000), 3)
          yield* store.renew(owner, T0 + 5000)
          assert.strictEqual(yield* store.running(batch.id, T0 + 4000), 3)
          assert.deepStrictEqual(yield* store.claimItems(batch.id, lease("other", T0 + 4000), 3), [])
          yield* store.releaseItem({ ...claimed[0], token: "not-the-claim" })
          yield* store.releaseItem(claimed[0])
          assert.strictEqual(yield* store.running(batch.id, T0 + 4000), 2)
          yield* store.release(owner)
          assert.strictEqual(yield* store.running(batch.id, T0 + 4000), 0)
          const again = yield* store.claimItems(batch.id, lease("other", T0 + 4000), 5)
          assert.deepStrictEqual(again.map((i) => i.index), [0, 1, 2])
          assert.isFalse(yield* recordOne(store, claimed[2], finished(claimed[2], "completed"), T0 + 4001))
        }))
    })

    describe("batch leases", () => {
      it.effect("claims unfinished batches whose lease is free, its own, or ran out", () =>
        Effect.gen(function*() {
          const store = yield* BatchStore.BatchStore
          // Far in the future, so that the other tests' batches (claimed or not) are never ours.
          const now = T0 + 10 * 365 * 86_400_000
          const mine = (batches: ReadonlyArray<Batch.Batch>, ours: ReadonlyArray<Batch.Batch>) =>
            batches.filter((b) => ours.some((o) => o.id === b.id)).map((b) => b.id)
          const ours = yield* Effect.forEach(
            [
              "validating",
              "in_progress",
              "finalizing",
              "cancelling",
              "completed",
              "failed",
              "expired",
              "cancelled"
            ] as const,
            (status) => stored(0, { status })
          )
          const active = ours.slice(0, 4).map((b) => b.id)
          const a = unique("a")
          assert.deepStrictEqual(mine(yield* store.claimBatches(lease(a, now, 1000), 10_000), ours), active)
          assert.deepStrictEqual(mine(yield* store.claimBatches(lease("b", now + 500), 10_000), ours), [])
          assert.deepStrictEqual(mine(yield* store.claimBatches(lease(a, now + 500, 1000), 10_000), ours), active)
          yield* store.renew(a, now + 3000)
          assert.deepStrictEqual(mine(yield* store.claimBatches(lease("b", now + 2000), 10_000), ours), [])
          assert.deepStrictEqual(mine(yield* store.claimBatches(lease("b", now + 3001), 10_000), ours), active)
          yield* store.release("b")
          assert.deepStrictEqual(mine(yield* store.claimBatches(lease("c", now + 3002), 10_000), ours), active)
        }))

      it.effect("runnable batches are those in progress whose window has not ended", () =>
        Effect.gen(function*() {
          const store = yield* BatchStore.BatchStore
          const now = T0 + 20 * 365 * 86_400_000
          const open = yield* stored(1, { status: "in_progress", expiresAt: now + 1 })
          const ended = yield* stored(1, { status: "in_progress", expiresAt: now })
          const waiting = yield* stored(1, { status: "validating", expiresAt: now + 1 })
          const ids = (yield* store.runnable(now, 10_000)).map((b) => b.id)
          assert.include(ids, open.id)
          assert.notInclude(ids, ended.id)
          assert.notInclude(ids, waiting.id)
        }))
    })
  })
