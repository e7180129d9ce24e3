// @ts-check
/**
 * The SQLite usage log's worker thread: a connection of its own to the database file, on which it writes the batches of
 * usage records the gateway posts, each batch in one transaction. better-sqlite3 runs statements synchronously: on the
 * gateway's event loop a batch's inserts and `COMMIT` stopped it for 5–15 ms (docs/benchmarks.md); here they stop
 * nothing.
 *
 * Plain JavaScript rather than TypeScript so that the same file runs from the sources (tests), from `dist` and beside
 * the server's bundle.
 *
 * Protocol. `workerData`: `{ filename, table, columns }`. In: `{ id, rows }`, each row an array of values in `columns`'
 * order; `{ close: true }` closes the connection, and the thread ends. Out: `{ id }` once the batch is committed, or
 * `{ id, error }` when it was rolled back.
 */
import { createRequire } from "node:module"
import { parentPort, workerData } from "node:worker_threads"

// better-sqlite3 is CommonJS without types of its own (its types are a development dependency of the repository only):
// loaded with `require`, untyped.
const Database = createRequire(import.meta.url)("better-sqlite3")

const { filename, table, columns } = workerData
const port = /** @type {import("node:worker_threads").MessagePort} */ (parentPort)
const db = new Database(filename)
// The gateway's own connection may hold the write lock (a key created, a batch stored): wait for it, as it waits for us.
db.pragma("busy_timeout = 5000")

/** Rows per statement: a multi-row INSERT costs SQLite less per row than one statement a row. Fixed sizes, so that a
 * few prepared statements serve every batch (as `internal/StatementChunks.ts` on the gateway's connection). */
const SIZES = [64, 16, 4, 1]

/** @type {((rows: Array<Array<unknown>>) => void) | undefined} */
let insertAll
/** Prepared at the first batch: the table exists by then (the gateway migrates before it records anything). */
const prepare = () => {
  const names = columns.join(", ")
  const tuple = `(${columns.map(() => "?").join(", ")})`
  const statements = new Map(
    SIZES.map((size) => [size, db.prepare(`INSERT INTO ${table} (${names}) VALUES ${Array(size).fill(tuple).join(", ")}`)])
  )
  const all = db.transaction((/** @type {Array<Array<unknown>>} */ rows) => {
    let i = 0
    for (const size of SIZES) {
      const statement = statements.get(size)
      while (rows.length - i >= size) {
        const values = []
        for (let k = i; k < i + size; k++) for (const value of rows[k]) values.push(value)
        statement.run(values)
        i += size
      }
    }
  })
  // BEGIN IMMEDIATE: the write lock is taken at the start, so the transaction never fails half-way on it.
  return (/** @type {Array<Array<unknown>>} */ rows) => all.immediate(rows)
}

port.on("message", (/** @type {{ id?: number, rows?: Array<Array<unknown>>, close?: boolean }} */ message) => {
  if (message.close === true) {
    db.close()
    port.close()
    return
  }
  try {
    insertAll ??= prepare()
    insertAll(message.rows ?? [])
    port.postMessage({ id: message.id })
  } catch (error) {
    port.postMessage({ id: message.id, error: error instanceof Error ? error.message : String(error) })
  }
})
