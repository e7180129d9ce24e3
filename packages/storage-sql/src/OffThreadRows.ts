/**
 * Rows appended to a table of a SQLite file by a worker thread with a connection of its own (`SqliteUsageWorker.mjs`),
 * so that the inserts, which better-sqlite3 runs synchronously, never hold the event loop. The usage log writes its
 * batches through it on a SQLite file: on the loop, a batch's inserts and its `COMMIT` (WAL's sync) held it for 5–15 ms,
 * several times a second under load, during which the gateway served nothing (docs/benchmarks.md).
 *
 * The thread starts with the first batch (an idle gateway spends no memory on it) and ends with the scope, after the
 * batches posted before. If it stops otherwise (a crash), every write waiting on it fails with `stopped` set, and so do
 * later ones: the caller writes them its own way.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { Worker } from "node:worker_threads"

/** A batch the worker could not write (`stopped`: the worker is gone, nothing more will be written through it). */
export class OffThreadWriteError extends Data.TaggedError("OffThreadWriteError")<{
  readonly message: string
  readonly stopped: boolean
}> {}

export interface OffThreadRows {
  /** Appends `rows` (values in the columns' order) in one transaction; succeeds once committed. */
  readonly write: (rows: ReadonlyArray<ReadonlyArray<unknown>>) => Effect.Effect<void, OffThreadWriteError>
}

export interface OffThreadOptions {
  /** The database file (a path; not `:memory:`, which another connection cannot see). */
  readonly filename: string
  /** A table name and its columns: identifiers of the gateway's own schema, never input. */
  readonly table: string
  readonly columns: ReadonlyArray<string>
}

const WORKER_URL = new URL("./SqliteUsageWorker.mjs", import.meta.url)

/** The worker's heap: a batch in flight is ~100 KB; the defaults would reserve tens of MB of young generation. */
const RESOURCE_LIMITS = { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 64 }

/** How long closing waits for the worker to finish its last batch and close its connection before ending it. */
const CLOSE_TIMEOUT_MS = 10_000

type Reply = { readonly id: number; readonly error?: string }
type Resume = (effect: Effect.Effect<void, OffThreadWriteError>) => void

/** A writer of `options.table`'s rows on a worker thread, which ends with the scope. */
export const make = (options: OffThreadOptions): Effect.Effect<OffThreadRows, never, Scope.Scope> =>
  Effect.suspend(() => {
    let worker: Worker | undefined
    let stoppedBy: string | undefined
    let nextId = 1
    const waiting = new Map<number, Resume>()

    const stop = (reason: string) => {
      stoppedBy ??= reason
      const resumes = [...waiting.values()]
      waiting.clear()
      for (const resume of resumes) resume(Effect.fail(new OffThreadWriteError({ message: reason, stopped: true })))
    }

    const start = (): Worker => {
      const started = new Worker(WORKER_URL, {
        workerData: { filename: options.filename, table: options.table, columns: options.columns },
        resourceLimits: RESOURCE_LIMITS,
        // Not the process's command line: a preload meant for the server (a benchmark's, an agent's) has nothing to do
        // here, and one that exits where it finds no server ended the thread at once.
        execArgv: []
      })
      started.on("message", (reply: Reply) => {
        const resume = waiting.get(reply.id)
        if (resume === undefined) return
        waiting.delete(reply.id)
        if (waiting.size === 0) started.unref()
        resume(
          reply.error === undefined
            ? Effect.void
            : Effect.fail(new OffThreadWriteError({ message: reply.error, stopped: false }))
        )
      })
      started.on("error", (error) => stop(`the SQLite writer thread failed: ${error.message}`))
      started.on("exit", (code) => stop(`the SQLite writer thread exited (code ${code})`))
      // An idle thread keeps no process alive (the scope ends it); a batch waiting on it does, so that a process whose
      // last work is to write its usage does not exit with it unwritten.
      started.unref()
      return started
    }

    const write = (rows: ReadonlyArray<ReadonlyArray<unknown>>): Effect.Effect<void, OffThreadWriteError> =>
      Effect.async<void, OffThreadWriteError>((resume) => {
        if (stoppedBy !== undefined) {
          resume(Effect.fail(new OffThreadWriteError({ message: stoppedBy, stopped: true })))
          return
        }
        try {
          worker ??= start()
        } catch (error) {
          stop(`the SQLite writer thread could not start: ${error instanceof Error ? error.message : String(error)}`)
          resume(Effect.fail(new OffThreadWriteError({ message: stoppedBy!, stopped: true })))
          return
        }
        const id = nextId++
        waiting.set(id, resume)
        worker.ref()
        worker.postMessage({ id, rows })
      })

    // After the batches posted before it: the worker answers them in order, then closes its connection and ends.
    const close = Effect.async<void>((resume) => {
      const running = worker
      if (running === undefined || stoppedBy !== undefined) return resume(Effect.void)
      const timer = setTimeout(() => void running.terminate(), CLOSE_TIMEOUT_MS)
      running.once("exit", () => {
        clearTimeout(timer)
        resume(Effect.void)
      })
      running.ref()
      running.postMessage({ close: true })
    })

    return Effect.as(Effect.addFinalizer(() => close), { write })
  })
