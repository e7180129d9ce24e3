/**
 * The batch worker (core `BatchWorker`) on the in-memory store with scripted executors and the test clock: leases
 * taken over after a worker dies, concurrency bounds, validation against the catalogue, expiry, and shutdown.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Batch } from "@model-gateway/core"
import { BatchStore, BatchWorker, Catalogue, GatewayError, MessagesService, OpenAiService } from "@model-gateway/core"
import { MemoryBatchStore } from "@model-gateway/storage-memory"
import { Duration, Effect, Exit, Layer, Option, Scope, TestClock } from "effect"

const T0 = 0
let sequence = 0

const endpoint = (provider: string): Catalogue.Endpoint => ({
  id: `acme/gpt@${provider}`,
  modelId: "acme/gpt",
  provider,
  upstreamModel: "gpt",
  pricing: { prompt: "0.000001", completion: "0.000002", request: "0", image: "0" },
  zdr: false,
  dataCollection: "allow",
  supportsVoiceCloning: false,
  supportsMultipleAudioReferences: false,
  supportsImageReference: false
})

const catalogue = Catalogue.fromSnapshot(
  Catalogue.makeSnapshot([{ id: "acme/gpt", name: "GPT", endpoints: [endpoint("acme")] }])
)

const aBatch = (n: number, overrides: Partial<Batch.Batch> = {}): Batch.Batch => ({
  id: `batch_${(sequence++).toString(16).padStart(20, "0")}`,
  workspace: "ws",
  keyId: "key",
  endpoint: "/v1/chat/completions",
  model: "acme/gpt",
  completionWindow: "24h",
  status: "validating",
  provider: null,
  app: { referer: null, title: null, categories: null },
  counts: { total: n, completed: 0, failed: 0 },
  usage: { promptTokens: 0, completionTokens: 0, cost: "0" },
  errorMessage: null,
  createdAt: T0,
  expiresAt: T0 + 86_400_000,
  finalizedAt: null,
  updatedAt: T0,
  ...overrides
})

const items = (n: number, batchId = "none"): Array<BatchStore.NewItem> =>
  Array.from({ length: n }, (_, i) => ({
    customId: `r${i}`,
    body: JSON.stringify({ model: "acme/gpt", i, trace: { batch_id: batchId } })
  }))

/** Executors that answer after `ms` of (test) clock time, counting calls and how many run at once per batch. */
const executors = (ms: number, answer: (body: any) => "ok" | GatewayError.GatewayError = () => "ok") => {
  const stats = { calls: 0, running: 0, maxRunning: 0, byBatch: new Map<string, number>(), maxByBatch: 0 }
  const create = (context: MessagesService.RequestContext, body: unknown) =>
    Effect.gen(function*() {
      const batchId = (body as any).trace?.batch_id ?? "none"
      stats.calls++
      stats.running++
      stats.maxRunning = Math.max(stats.maxRunning, stats.running)
      stats.byBatch.set(batchId, (stats.byBatch.get(batchId) ?? 0) + 1)
      stats.maxByBatch = Math.max(stats.maxByBatch, stats.byBatch.get(batchId)!)
      yield* Effect.sleep(Duration.millis(ms)).pipe(
        Effect.ensuring(Effect.sync(() => {
          stats.running--
          stats.byBatch.set(batchId, stats.byBatch.get(batchId)! - 1)
        }))
      )
      const outcome = answer(body)
      if (outcome !== "ok") return yield* Effect.fail(outcome)
      return {
        _tag: "Json" as const,
        body: { id: context.requestId, echo: body as any },
        charge: { usage: { input: 3, output: 2, cacheRead: 1, cacheWrite: 0 }, cost: "0.25" }
      }
    })
  const layer = Layer.mergeAll(
    Layer.succeed(
      MessagesService.MessagesService,
      MessagesService.MessagesService.of({
        create,
        countTokens: () => Effect.die("not used")
      })
    ),
    Layer.succeed(
      OpenAiService.OpenAiService,
      OpenAiService.OpenAiService.of({ create: (_api, c, b) => create(c, b) })
    ),
    Layer.succeed(Catalogue.Catalogue, catalogue)
  )
  return { stats, layer }
}

const options = { pollMs: 100, leaseMs: 3_000, retryBaseMs: 100, perBatch: 4, perProcess: 8 }

/** Starts a worker in a scope of its own over `store`. */
const startWorker = (
  store: BatchStore.BatchStoreService,
  layer: Layer.Layer<MessagesService.MessagesService | OpenAiService.OpenAiService | Catalogue.Catalogue>,
  workerOptions: BatchWorker.WorkerOptions = options
) => Effect.map(startDrainable(store, layer, workerOptions), ({ scope }) => scope)

/** `startWorker`, with the worker (to drain it). */
const startDrainable = (
  store: BatchStore.BatchStoreService,
  layer: Layer.Layer<MessagesService.MessagesService | OpenAiService.OpenAiService | Catalogue.Catalogue>,
  workerOptions: BatchWorker.WorkerOptions = options
) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const worker = yield* BatchWorker.make(workerOptions).pipe(
      Effect.provide(layer),
      Effect.provideService(BatchStore.BatchStore, store),
      Scope.extend(scope)
    )
    return { scope, worker }
  })

/** Moves the test clock by `ms` in steps, so that every fiber waiting on it gets to run. */
const advance = (ms: number, step = 50) =>
  Effect.gen(function*() {
    for (let t = 0; t < ms; t += step) {
      yield* TestClock.adjust(Duration.millis(step))
      for (let i = 0; i < 5; i++) yield* Effect.yieldNow()
    }
  })

const read = (store: BatchStore.BatchStoreService, batch: Batch.Batch) =>
  Effect.map(store.get(batch.workspace, batch.id), Option.getOrThrow)

describe("BatchWorker", () => {
  it.effect("runs a batch from validating to completed, with its counts and usage", () =>
    Effect.gen(function*() {
      const store = yield* MemoryBatchStore.make
      const { layer, stats } = executors(200)
      const batch = aBatch(10)
      yield* store.create(batch, items(10))
      const worker = yield* startWorker(store, layer)
      yield* advance(2_000)
      const done = yield* read(store, batch)
      assert.strictEqual(done.status, "completed")
      assert.deepStrictEqual(done.counts, { total: 10, completed: 10, failed: 0 })
      assert.deepStrictEqual(done.usage, { promptTokens: 40, completionTokens: 20, cost: "2.5" })
      assert.strictEqual(stats.calls, 10)
      assert.isAtMost(stats.maxByBatch, options.perBatch)
      const results = yield* store.results(batch.id, -1, 100)
      assert.deepStrictEqual(results.map((r) => r.result?.customId), items(10).map((i) => i.customId))
      assert.deepStrictEqual(results[3].result?.response?.body.echo, {
        model: "acme/gpt",
        i: 3,
        trace: { batch_id: "none" }
      })
      yield* Scope.close(worker, Exit.void)
    }))

  it.effect("keeps to its limits per batch and per process", () =>
    Effect.gen(function*() {
      const store = yield* MemoryBatchStore.make
      const { layer, stats } = executors(500)
      const batches = [aBatch(12), aBatch(12), aBatch(12)]
      for (const batch of batches) yield* store.create(batch, items(12, batch.id))
      const worker = yield* startWorker(store, layer, { ...options, perBatch: 3, perProcess: 5 })
      yield* advance(10_000)
      for (const batch of batches) assert.strictEqual((yield* read(store, batch)).status, "completed")
      assert.strictEqual(stats.calls, 36)
      assert.strictEqual(stats.maxRunning, 5)
      assert.strictEqual(stats.maxByBatch, 3)
      yield* Scope.close(worker, Exit.void)
    }))

  it.effect("another worker finishes the requests of one that died, once its leases run out; none twice", () =>
    Effect.gen(function*() {
      const store = yield* MemoryBatchStore.make
      // The dying worker's store stops working when it dies: it neither records, renews nor gives anything back.
      let dead = false
      const mortal: BatchStore.BatchStoreService = {
        ...store,
        record: (recordings, now) => dead ? Effect.succeed(recordings.map(() => false)) : store.record(recordings, now),
        renew: (owner, until) => dead ? Effect.void : store.renew(owner, until),
        release: (owner) => dead ? Effect.void : store.release(owner),
        releaseItem: (item) => dead ? Effect.void : store.releaseItem(item)
      }
      const first = executors(1_000)
      const batch = aBatch(20)
      yield* store.create(batch, items(20))
      const dying = yield* startWorker(mortal, first.layer)
      yield* advance(1_500)
      const before = yield* read(store, batch)
      assert.isAbove(before.counts.completed, 0)
      assert.isBelow(before.counts.completed, 20)
      dead = true
      yield* Scope.close(dying, Exit.void)
      const orphaned = yield* store.running(batch.id, yield* TestClock.currentTimeMillis)
      assert.isAbove(orphaned, 0)
      const second = executors(100)
      const survivor = yield* startWorker(store, second.layer)
      yield* advance(500)
      // Their leases have not run out yet: the survivor runs only the requests nobody had.
      assert.strictEqual((yield* read(store, batch)).status, "in_progress")
      yield* advance(options.leaseMs + 2_000)
      const done = yield* read(store, batch)
      assert.strictEqual(done.status, "completed")
      assert.deepStrictEqual(done.counts, { total: 20, completed: 20, failed: 0 })
      const results = yield* store.results(batch.id, -1, 100)
      assert.strictEqual(new Set(results.map((r) => r.result?.id)).size, 20)
      assert.strictEqual(second.stats.calls, 20 - before.counts.completed)
      yield* Scope.close(survivor, Exit.void)
    }))

  it.effect("a batch whose model this process's catalogue lacks fails its validation", () =>
    Effect.gen(function*() {
      const store = yield* MemoryBatchStore.make
      const { layer } = executors(10)
      const unknown = aBatch(2, { model: "gone/model" })
      const noProvider = aBatch(2, { provider: { only: ["other"] } })
      yield* store.create(unknown, items(2))
      yield* store.create(noProvider, items(2))
      const worker = yield* startWorker(store, layer)
      yield* advance(500)
      const failed = yield* read(store, unknown)
      assert.strictEqual(failed.status, "failed")
      assert.strictEqual(failed.errorMessage, "validation failed: model: 'gone/model' is not a model of this gateway")
      assert.isNotNull(failed.finalizedAt)
      assert.match((yield* read(store, noProvider)).errorMessage ?? "", /^validation failed: provider\.only: /)
      yield* Scope.close(worker, Exit.void)
    }))

  it.effect(
    "expires a batch once its window has ended and its running requests have finished",
    () =>
      Effect.gen(function*() {
        const store = yield* MemoryBatchStore.make
        const { layer, stats } = executors(70_000)
        const batch = aBatch(20, { expiresAt: T0 + 600_000 })
        yield* store.create(batch, items(20))
        const worker = yield* startWorker(store, layer, { ...options, perBatch: 1, pollMs: 5_000, leaseMs: 30_000 })
        yield* advance(600_000 + 5_000, 5_000)
        assert.strictEqual((yield* read(store, batch)).status, "in_progress")
        yield* advance(60_000, 5_000)
        const expired = yield* read(store, batch)
        assert.strictEqual(expired.status, "expired")
        assert.strictEqual(expired.counts.completed, stats.calls)
        assert.isAbove(expired.counts.completed, 7)
        assert.isBelow(expired.counts.completed, 11)
        yield* Scope.close(worker, Exit.void)
      }),
    { timeout: 60_000 }
  )

  it.effect("retries what may pass with back-off, and records the last failure", () =>
    Effect.gen(function*() {
      const store = yield* MemoryBatchStore.make
      let tries = 0
      const { layer } = executors(10, (body) => {
        if (body.i === 0) return new GatewayError.InvalidRequest({ message: "bad", param: "messages" })
        tries++
        return tries <= 2 ? new GatewayError.RateLimited({ message: "slow down" }) : "ok"
      })
      const flaky = executors(10, () => new GatewayError.Overloaded({ message: "busy" }))
      const batch = aBatch(2)
      yield* store.create(batch, items(2))
      const worker = yield* startWorker(store, layer)
      yield* advance(3_000)
      const done = yield* read(store, batch)
      assert.deepStrictEqual(done.counts, { total: 2, completed: 1, failed: 1 })
      const [bad] = yield* store.results(batch.id, -1, 1)
      assert.deepStrictEqual(bad.result?.error, { message: "bad", type: "invalid_request_error", param: "messages" })
      yield* Scope.close(worker, Exit.void)
      const hopeless = aBatch(1)
      yield* store.create(hopeless, items(1))
      const again = yield* startWorker(store, flaky.layer)
      yield* advance(5_000)
      assert.strictEqual(flaky.stats.calls, 4)
      assert.deepStrictEqual((yield* read(store, hopeless)).counts, { total: 1, completed: 0, failed: 1 })
      yield* Scope.close(again, Exit.void)
    }))

  it.effect("stopping interrupts the running requests and gives their leases back at once", () =>
    Effect.gen(function*() {
      const store = yield* MemoryBatchStore.make
      const { layer } = executors(10_000)
      const batch = aBatch(6)
      yield* store.create(batch, items(6))
      const worker = yield* startWorker(store, layer)
      yield* advance(500)
      const now = yield* TestClock.currentTimeMillis
      assert.strictEqual(yield* store.running(batch.id, now), 4)
      yield* Scope.close(worker, Exit.void)
      assert.strictEqual(yield* store.running(batch.id, now), 0)
      const lease = { owner: "other", token: "t", now, until: now + 1000 }
      assert.strictEqual((yield* store.claimItems(batch.id, lease, 10)).length, 6)
    }))

  it.effect("draining claims nothing more, lets the running requests finish and records them", () =>
    Effect.gen(function*() {
      const store = yield* MemoryBatchStore.make
      const { layer, stats } = executors(1_000)
      const batch = aBatch(10)
      yield* store.create(batch, items(10))
      const { scope, worker } = yield* startDrainable(store, layer)
      yield* advance(500)
      assert.strictEqual(stats.running, 4)
      // From a finalizer, as a graceful shutdown calls it: uninterruptible.
      const draining = yield* Effect.fork(Effect.uninterruptible(worker.drain(30_000)))
      yield* advance(1_000)
      assert.isTrue(Option.isSome(yield* draining.poll))
      assert.strictEqual(stats.calls, 4)
      const drained = yield* read(store, batch)
      assert.deepStrictEqual(drained.counts, { total: 10, completed: 4, failed: 0 })
      yield* advance(2_000)
      assert.strictEqual(stats.calls, 4)
      yield* Scope.close(scope, Exit.void)
      const now = yield* TestClock.currentTimeMillis
      const lease = { owner: "other", token: "t", now, until: now + 1000 }
      assert.strictEqual((yield* store.claimItems(batch.id, lease, 10)).length, 6)
    }))

  it.effect("draining waits no longer than its grace period; what still runs is then interrupted and given back", () =>
    Effect.gen(function*() {
      const store = yield* MemoryBatchStore.make
      const { layer, stats } = executors(10_000)
      const batch = aBatch(6)
      yield* store.create(batch, items(6))
      const { scope, worker } = yield* startDrainable(store, layer)
      yield* advance(500)
      const draining = yield* Effect.fork(Effect.uninterruptible(worker.drain(1_000)))
      yield* advance(1_000)
      assert.isTrue(Option.isSome(yield* draining.poll))
      assert.strictEqual(stats.running, 4)
      // A second call waits for the first, which is over.
      yield* worker.drain(1_000)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(stats.running, 0)
      const now = yield* TestClock.currentTimeMillis
      assert.strictEqual(yield* store.running(batch.id, now), 0)
      assert.deepStrictEqual((yield* read(store, batch)).counts, { total: 6, completed: 0, failed: 0 })
    }))

  it.effect("draining gives back at once a request waiting to retry, without another try", () =>
    Effect.gen(function*() {
      const store = yield* MemoryBatchStore.make
      const { layer, stats } = executors(10, () => new GatewayError.Overloaded({ message: "busy" }))
      const batch = aBatch(1)
      yield* store.create(batch, items(1))
      const { scope, worker } = yield* startDrainable(store, layer, { ...options, retryBaseMs: 5_000 })
      yield* advance(500)
      assert.strictEqual(stats.calls, 1)
      const draining = yield* Effect.fork(worker.drain(30_000))
      yield* advance(100)
      assert.isTrue(Option.isSome(yield* draining.poll))
      const now = yield* TestClock.currentTimeMillis
      assert.strictEqual(yield* store.running(batch.id, now), 0)
      yield* advance(10_000)
      assert.strictEqual(stats.calls, 1)
      assert.deepStrictEqual((yield* read(store, batch)).counts, { total: 1, completed: 0, failed: 0 })
      yield* Scope.close(scope, Exit.void)
    }))
})
