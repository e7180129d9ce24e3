/**
 * The batch worker of a gateway process, for as long as its scope lasts. Four fibers: the coordinator leases
 * unfinished batches and moves each through its lifecycle (`BatchCoordinator`); the filler claims requests of batches
 * in progress, as many as the concurrency limits allow (per batch and per process), and runs each in a fiber of its own
 * (`BatchRunner`); the recorder records their results under their claims as they finish (those that finished while
 * it was writing, together); the heartbeat renews every lease the worker holds. A process that dies stops renewing:
 * its leases run out, and other workers (or itself, restarted) take the work over: a request cut by a crash runs
 * again (at-least-once). A graceful stop does not cut them: `drain` stops claiming and coordinating at once and lets
 * the requests already at an upstream finish and be recorded (for up to a grace period); a request waiting between
 * tries is given back at once. Closing the scope then interrupts whatever still runs, records the results waiting, and
 * gives the other leases back at once.
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import { Keys } from "../auth/Keys.js"
import { Catalogue } from "../catalogue/Catalogue.js"
import type { Limits } from "../limits/Limits.js"
import { MessagesService } from "../messages/MessagesService.js"
import { OpenAiService } from "../openai/OpenAiService.js"
import type { Batch } from "./Batch.js"
import * as BatchCoordinator from "./BatchCoordinator.js"
import * as BatchRunner from "./BatchRunner.js"
import { BatchStore, type ClaimedItem, type Lease, type Recording } from "./BatchStore.js"

export interface WorkerOptions {
  /** The auto-router's slug (`auto` unless configured otherwise): a batch's model the router chooses for. */
  readonly routerSlug?: string | undefined
  /** Most requests of one batch running at once in this process (default 16). */
  readonly perBatch?: number | undefined
  /** Most batch requests running at once in this process (default 64). */
  readonly perProcess?: number | undefined
  /** How long a lease lasts unless renewed (default 30 s); the heartbeat renews it three times as often. */
  readonly leaseMs?: number | undefined
  /** How often the worker looks for new work when it has none (default 1 s). */
  readonly pollMs?: number | undefined
  /** Tries after the first, for failures that may pass (default 3). */
  readonly maxRetries?: number | undefined
  /** The first back-off before a retry (default 1 s), doubling each time up to `retryMaxMs` (default 60 s). */
  readonly retryBaseMs?: number | undefined
  readonly retryMaxMs?: number | undefined
  /** Multiplies the cost of every batch request (a decimal string, e.g. "0.5"); none by default. */
  readonly priceFactor?: string | undefined
}

/** A running batch worker, for a graceful stop. */
export interface BatchWorkerService {
  /**
   * Stops claiming requests and coordinating batches at once, then waits, for up to `graceMs`, for the requests
   * already sent upstream to finish and their results to be recorded; a request waiting between tries (a back-off, the
   * rate limit) is given back at once, without another try. What still runs after `graceMs` is interrupted and given
   * back when the worker's scope closes. Called again, it waits for the first call to end.
   */
  readonly drain: (graceMs: number) => Effect.Effect<void>
}

/** The batch worker of this process (absent when the process runs none). */
export class BatchWorker extends Context.Tag("@model-gateway/core/BatchWorker")<BatchWorker, BatchWorkerService>() {}

const defaults = {
  perBatch: 16,
  perProcess: 64,
  leaseMs: 30_000,
  pollMs: 1_000,
  maxRetries: 3,
  retryBaseMs: 1_000,
  retryMaxMs: 60_000
}

/** Batches looked at per round (coordinated, or drawn requests from). */
const BATCHES_PER_ROUND = 100

/** Most results recorded in one write. */
const RECORD_BATCH = 256

/** Runs `step` forever; a failure or defect is logged and the loop goes on after `pauseMs`. */
const forever = (name: string, step: Effect.Effect<void>, pauseMs: number) =>
  Effect.forever(
    Effect.catchAllCause(step, (cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.failCause(cause)
        : Effect.zipRight(
          Effect.logError(`batch worker: ${name} failed`, cause),
          Effect.sleep(Duration.millis(pauseMs))
        ))
  )

/**
 * Starts the worker in the current scope; it stops (and gives its leases back) when the scope closes, at once, or
 * gracefully after `drain`.
 */
export const make = (options: WorkerOptions = {}): Effect.Effect<
  BatchWorkerService,
  never,
  BatchStore | Catalogue | MessagesService | OpenAiService | Scope.Scope
> =>
  Effect.gen(function*() {
    const o = { ...defaults, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) }
    const store = yield* BatchStore
    const catalogue = yield* Catalogue
    const ports: BatchRunner.RunnerPorts = { messages: yield* MessagesService, openai: yield* OpenAiService }
    const stopping = yield* Deferred.make<void>()
    const drained = yield* Deferred.make<void>()
    const runner: BatchRunner.RunnerOptions = {
      priceFactor: options.priceFactor,
      maxRetries: o.maxRetries,
      retryBaseMs: o.retryBaseMs,
      retryMaxMs: o.retryMaxMs,
      stopping
    }
    const owner = yield* BatchRunner.randomId("worker_")
    // The keys, when the worker has them (the gateway's has): a batch's requests count against the limits of the key
    // that submitted it, as they are now (a reload or the key command may have changed them), read once a poll
    // interval at most. A key gone since (revoked) leaves its batch to the workspace's limits.
    const keys = Option.getOrUndefined(yield* Effect.serviceOption(Keys))
    let keyLimits: { readonly at: number; readonly byId: ReadonlyMap<string, Limits | undefined> } | undefined
    const limitsOf = (batch: Batch, now: number): Effect.Effect<Limits | undefined> => {
      if (keys === undefined || batch.keyId === null) return Effect.succeed(undefined)
      const keyId = batch.keyId
      if (keyLimits !== undefined && now - keyLimits.at < o.pollMs) return Effect.succeed(keyLimits.byId.get(keyId))
      return Effect.map(keys.list, (stored) => {
        keyLimits = { at: now, byId: new Map(stored.map((key) => [key.keyId, key.limits])) }
        return keyLimits.byId.get(keyId)
      })
    }
    const finished = yield* Queue.unbounded<Recording>()
    /** Records results (those still under their claims); what it cannot record goes back to be run again. */
    const recordAll = (recordings: ReadonlyArray<Recording>) =>
      recordings.length === 0 ?
        Effect.void :
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          store.record(recordings, now).pipe(
            Effect.asVoid,
            Effect.catchAllCause((cause) =>
              Effect.zipRight(
                Effect.logError("batch worker: recording results failed; their requests will run again", cause),
                Effect.forEach(recordings, (r) => store.releaseItem(r.item), { discard: true })
              )
            ),
            Effect.uninterruptible
          ))
    // Finalizers run last first: the fibers below are interrupted, then the results waiting are recorded, then the
    // leases still held (requests interrupted before their end) go back at once.
    yield* Effect.addFinalizer(() => store.release(owner))
    yield* Effect.addFinalizer(() => Effect.flatMap(Queue.takeAll(finished), (rest) => recordAll([...rest])))
    const fibers = yield* FiberSet.make()
    const wake = yield* Queue.sliding<void>(1)
    let running = 0
    const runningOf = new Map<string, number>()
    let runnable: { readonly at: number; readonly batches: ReadonlyArray<Batch> } | undefined
    const refill = Math.max(1, Math.floor(o.perBatch / 4))

    const lease = (now: number): Effect.Effect<Lease> =>
      Effect.map(BatchRunner.randomId("claim_"), (token) => ({ owner, token, now, until: now + o.leaseMs }))

    const done = (batchId: string) =>
      Effect.suspend(() => {
        running--
        const n = (runningOf.get(batchId) ?? 1) - 1
        if (n === 0) runningOf.delete(batchId)
        else runningOf.set(batchId, n)
        return Queue.offer(wake, undefined)
      })

    // A result waits for the recorder, which writes those that finished meanwhile together; a request that stopped
    // before a try goes back at once.
    const runItem = (batch: Batch, item: ClaimedItem, limits: Limits | undefined) =>
      BatchRunner.run(ports, runner, batch, item, limits).pipe(
        Effect.flatMap((result) =>
          result === undefined ? store.releaseItem(item) : Queue.offer(finished, { item, finished: result })
        ),
        Effect.onInterrupt(() => store.releaseItem(item)),
        Effect.ensuring(done(batch.id))
      )

    const record = Effect.flatMap(Queue.takeBetween(finished, 1, RECORD_BATCH), (chunk) => recordAll([...chunk]))

    /**
     * The batches in progress, read at most once a poll interval (a claim checks its batch's status itself, so a
     * batch cancelled since is never drawn from).
     */
    const runnableAt = (now: number) =>
      runnable !== undefined && now - runnable.at < o.pollMs
        ? Effect.succeed(runnable.batches)
        : Effect.tap(store.runnable(now, BATCHES_PER_ROUND), (batches) => {
          runnable = { at: now, batches }
        })

    /** Claims what the limits allow from the batches in progress; how many requests it started. */
    const claimRound = Effect.gen(function*() {
      if (running >= o.perProcess) return 0
      const now = yield* Clock.currentTimeMillis
      const batches = yield* runnableAt(now)
      let started = 0
      for (const batch of batches) {
        const mine = runningOf.get(batch.id) ?? 0
        const free = Math.min(o.perProcess - running, o.perBatch - mine)
        // A batch already running here is topped up a few requests at a time: one claim for several.
        if (free <= 0 || (mine > 0 && free < refill)) continue
        const items = yield* store.claimItems(batch.id, yield* lease(now), free)
        // Fewer than asked: the batch may be running out, or over; read the list afresh next time.
        if (items.length < free) runnable = undefined
        const limits = items.length === 0 ? undefined : yield* limitsOf(batch, now)
        for (const item of items) {
          running++
          runningOf.set(batch.id, (runningOf.get(batch.id) ?? 0) + 1)
          yield* FiberSet.run(fibers, runItem(batch, item, limits))
        }
        started += items.length
        if (running >= o.perProcess) break
      }
      return started
    })

    const idle = Effect.raceFirst(Queue.take(wake), Effect.sleep(Duration.millis(o.pollMs)))

    const fill = Effect.flatMap(claimRound, (started) => started === 0 || running >= o.perProcess ? idle : Effect.void)

    const coordinateRound = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const batches = yield* store.claimBatches(yield* lease(now), BATCHES_PER_ROUND)
      yield* Effect.forEach(batches, (batch) =>
        BatchCoordinator.coordinate({ store, catalogue, routerSlug: options.routerSlug }, batch, now), {
        discard: true
      })
    })

    const heartbeat = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      store.renew(owner, now + o.leaseMs))

    const filler = yield* Effect.forkScoped(forever("claiming requests", fill, o.pollMs))
    yield* Effect.forkScoped(forever("recording results", record, o.pollMs))
    const coordinator = yield* Effect.forkScoped(
      forever(
        "coordinating batches",
        Effect.zipRight(coordinateRound, Effect.sleep(Duration.millis(o.pollMs))),
        o.pollMs
      )
    )
    yield* Effect.forkScoped(
      forever(
        "renewing leases",
        Effect.zipRight(Effect.sleep(Duration.millis(Math.max(1, Math.floor(o.leaseMs / 3)))), heartbeat),
        o.pollMs
      )
    )

    // The recorder and the heartbeat go on while the requests under way finish: their results are recorded under
    // leases that stay theirs.
    const stop = (graceMs: number) =>
      Effect.gen(function*() {
        yield* Fiber.interrupt(filler)
        yield* Fiber.interrupt(coordinator)
        if (running === 0) {
          return
        }
        yield* Effect.logInfo(`batch worker: stopping; ${running} running request(s) finish first`)
        // Interruptible even when called from a finalizer (a graceful shutdown is one), or the time-out would wait.
        const ended = yield* Effect.interruptible(FiberSet.awaitEmpty(fibers)).pipe(
          Effect.timeout(Duration.millis(graceMs)),
          Effect.isSuccess
        )
        if (!ended) {
          yield* Effect.logWarning(
            `batch worker: ${running} request(s) still running after ${graceMs} ms; interrupted as the worker stops, ` +
              "they will run again"
          )
        }
        yield* Effect.flatMap(Queue.takeAll(finished), (rest) =>
          recordAll([...rest]))
      })

    const drain = (graceMs: number) =>
      Effect.flatMap(
        Deferred.succeed(stopping, undefined),
        (first) =>
          first ? Effect.ensuring(stop(graceMs), Deferred.succeed(drained, undefined)) : Deferred.await(drained)
      )

    return { drain }
  })

/**
 * The worker as a layer: it runs while the layer's scope is open, and `BatchWorker` drains it. Needs the stores and the
 * executors.
 */
export const layer = (options: WorkerOptions = {}): Layer.Layer<
  BatchWorker,
  never,
  BatchStore | Catalogue | MessagesService | OpenAiService
> => Layer.scoped(BatchWorker, make(options))
