import { afterAll, assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect, Either, Fiber } from "effect"
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { OffThreadRows } from "../src/index.js"

const tempDir = mkdtempSync(join(tmpdir(), "mg-off-thread-"))
afterAll(() => rmSync(tempDir, { recursive: true, force: true }))

let files = 0
/** A database file with table `t (a TEXT NOT NULL, b INTEGER)`. */
const database = (): string => {
  const filename = join(tempDir, `rows-${++files}.db`)
  const db = new Database(filename)
  db.pragma("journal_mode = WAL")
  db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT NOT NULL, b INTEGER)")
  db.close()
  return filename
}

/** The rows of `t`, read on a connection of the test's own. */
const rowsOf = (filename: string): Array<{ a: string; b: number | null }> => {
  const db = new Database(filename, { readonly: true })
  try {
    return db.prepare("SELECT a, b FROM t ORDER BY id").all() as Array<{ a: string; b: number | null }>
  } finally {
    db.close()
  }
}

/** The process's threads (Linux): the writer's is one of them while it runs. */
const threads = (): number =>
  Number(/Threads:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1] ?? Number.NaN)

describe("OffThreadRows", () => {
  it.live("appends each batch on a thread of its own, which starts with the first batch and ends with the scope", () =>
    Effect.gen(function*() {
      const filename = database()
      const before = threads()
      yield* Effect.scoped(Effect.gen(function*() {
        const rows = yield* OffThreadRows.make({ filename, table: "t", columns: ["a", "b"] })
        assert.strictEqual(threads(), before, "no thread before the first batch")
        yield* rows.write([["one", 1], ["two", null]])
        assert.strictEqual(threads(), before + 1)
        yield* rows.write([["three", 3]])
        assert.deepStrictEqual(rowsOf(filename), [{ a: "one", b: 1 }, { a: "two", b: null }, { a: "three", b: 3 }])
      }))
      // The thread ends shortly after it closed its connection.
      for (let i = 0; i < 50 && threads() !== before; i++) yield* Effect.sleep("20 millis")
      assert.strictEqual(threads(), before)
    }))

  it.live("a batch that fails is rolled back whole, and the next ones are written", () =>
    Effect.gen(function*() {
      const filename = database()
      const rows = yield* OffThreadRows.make({ filename, table: "t", columns: ["a", "b"] })
      const failed = yield* Effect.either(rows.write([["kept?", 1], [null, 2]]))
      assert.isTrue(Either.isLeft(failed))
      if (Either.isLeft(failed)) {
        assert.isFalse(failed.left.stopped)
        assert.match(failed.left.message, /NOT NULL/)
      }
      yield* rows.write([["after", 3]])
      assert.deepStrictEqual(rowsOf(filename), [{ a: "after", b: 3 }])
    }).pipe(Effect.scoped))

  it.live("closing the scope waits for the batches posted before it", () =>
    Effect.gen(function*() {
      const filename = database()
      const batches = Array.from({ length: 20 }, (_, i) => Array.from({ length: 50 }, (_, j) => [`r${i}-${j}`, j]))
      yield* Effect.scoped(Effect.gen(function*() {
        const rows = yield* OffThreadRows.make({ filename, table: "t", columns: ["a", "b"] })
        yield* rows.write([["first", 0]])
        // Posted, not awaited: the scope closes while they are in the worker's queue.
        yield* Effect.forEach(batches, (batch) => Effect.fork(rows.write(batch)), { discard: true })
        yield* Effect.yieldNow()
      }))
      assert.strictEqual(rowsOf(filename).length, 1 + 20 * 50)
    }))

  it.live("a thread that cannot run fails its writes as stopped, and every later one", () =>
    Effect.gen(function*() {
      // A directory that does not exist: the worker's connection cannot open, and the thread ends with an error.
      const rows = yield* OffThreadRows.make({ filename: join(tempDir, "missing", "x.db"), table: "t", columns: ["a"] })
      const first = yield* Effect.either(rows.write([["a"]]))
      const later = yield* Effect.fork(rows.write([["b"]])).pipe(Effect.flatMap(Fiber.join), Effect.either)
      for (const result of [first, later]) {
        assert.isTrue(Either.isLeft(result))
        if (Either.isLeft(result)) assert.isTrue(result.left.stopped)
      }
    }).pipe(Effect.scoped))

  it.live("ignores the process's preloads (one that ends threads), and keeps the process alive while a batch waits", () =>
    Effect.gen(function*() {
      const filename = database()
      // The built package, in a process whose preload ends any thread it runs in (as the benchmark's server preload did).
      const built = new URL("../dist/index.js", import.meta.url).href
      const preload =
        "data:text/javascript,import{isMainThread}from'node:worker_threads';if(!isMainThread)process.exit(2)"
      const script = `import { Effect } from "effect"
        import { OffThreadRows } from ${JSON.stringify(built)}
        const rows = OffThreadRows.make({ filename: ${JSON.stringify(filename)}, table: "t", columns: ["a", "b"] })
        await Effect.runPromise(Effect.scoped(Effect.flatMap(rows, (w) => w.write([["child", 7]]))))`
      const result = yield* Effect.async<{ code: number; stderr: string }>((resume) => {
        execFile(
          process.execPath,
          ["--import", preload, "--input-type=module", "-e", script],
          { cwd: new URL("..", import.meta.url).pathname },
          (error, _stdout, stderr) => resume(Effect.succeed({ code: error ? Number(error.code ?? 1) : 0, stderr }))
        )
      })
      assert.strictEqual(result.code, 0, result.stderr)
      assert.deepStrictEqual(rowsOf(filename), [{ a: "child", b: 7 }])
    }))
})
