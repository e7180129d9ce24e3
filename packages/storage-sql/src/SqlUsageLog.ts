/**
 * `UsageLog` over @effect/sql (SQLite or PostgreSQL), table `mg_usage`. `record` only appends to a
 * bounded in-memory buffer; a background fiber writes batches (one multi-row INSERT in a
 * transaction) every `flushInterval` or as soon as `batchSize` records are waiting. When the buffer
 * is full the oldest records are dropped and counted. Closing the layer's scope writes what is left.
 *
 * On a SQLite file the batches are written by a worker thread with a connection of its own (`OffThreadRows`), not on
 * the event loop: better-sqlite3 runs statements synchronously, and a batch's inserts and `COMMIT` held the loop for
 * 5–15 ms.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { UsageLog } from "@model-gateway/core"
import { RingBuffer } from "@model-gateway/core"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { Flag, Num, Text } from "./internal/Columns.js"
import { fixedChunks } from "./internal/StatementChunks.js"
import * as OffThreadRows from "./OffThreadRows.js"

export interface SqlUsageLogOptions {
  /** Most records waiting to be written before the oldest are dropped (default 100,000). */
  readonly capacity?: number | undefined
  /** Most records per INSERT; a full batch is written without waiting for the interval (default 500). */
  readonly batchSize?: number | undefined
  /** Longest a record waits in the buffer (default 200 ms). */
  readonly flushInterval?: Duration.DurationInput | undefined
}

interface Pending {
  readonly seq: number
  readonly record: UsageLog.UsageRecord
}

interface Waiter {
  readonly target: number
  readonly done: Deferred.Deferred<void>
}

const UsageRow = Schema.Struct({
  request_id: Schema.String,
  created_at: Num,
  route: Schema.String,
  key_id: Text,
  workspace: Text,
  model: Text,
  provider: Text,
  endpoint_id: Text,
  stream: Flag,
  status: Num,
  error_type: Text,
  input_tokens: Num,
  output_tokens: Num,
  cache_read_tokens: Num,
  cache_write_tokens: Num,
  cost: Schema.String,
  latency_ms: Num,
  ttfb_ms: Schema.NullOr(Num),
  attempts: Num,
  session_id: Text,
  user_id: Text,
  app_referer: Text,
  app_title: Text,
  app_categories: Text,
  metadata: Schema.NullOr(Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown })))
})

const defaultLimit = 100

/** The table's columns that a record fills, in the order `valuesOf` gives them. */
const COLUMNS: ReadonlyArray<keyof typeof UsageRow.fields> = Object.keys(UsageRow.fields) as Array<
  keyof typeof UsageRow.fields
>

/** A record's row as values in `COLUMNS`' order, for the writer thread. */
const valuesOf = (r: UsageLog.UsageRecord): Array<unknown> => {
  const row = toRow(r)
  return COLUMNS.map((column) => row[column])
}

const toRow = (r: UsageLog.UsageRecord) => ({
  request_id: r.requestId,
  created_at: r.createdAt,
  route: r.route,
  key_id: r.keyId,
  workspace: r.workspace,
  model: r.model,
  provider: r.provider,
  endpoint_id: r.endpointId,
  stream: r.stream ? 1 : 0,
  status: r.status,
  error_type: r.errorType,
  input_tokens: r.inputTokens,
  output_tokens: r.outputTokens,
  cache_read_tokens: r.cacheReadTokens,
  cache_write_tokens: r.cacheWriteTokens,
  cost: r.cost,
  latency_ms: r.latencyMs,
  ttfb_ms: r.ttfbMs,
  attempts: r.attempts,
  session_id: r.sessionId,
  user_id: r.user,
  app_referer: r.appReferer,
  app_title: r.appTitle,
  app_categories: r.appCategories,
  metadata: r.metadata === null ? null : JSON.stringify(r.metadata)
})

const fromRow = (row: typeof UsageRow.Type): UsageLog.UsageRecord => ({
  requestId: row.request_id,
  createdAt: row.created_at,
  route: row.route,
  keyId: row.key_id,
  workspace: row.workspace,
  model: row.model,
  provider: row.provider,
  endpointId: row.endpoint_id,
  stream: row.stream,
  status: row.status,
  errorType: row.error_type,
  inputTokens: row.input_tokens,
  outputTokens: row.output_tokens,
  cacheReadTokens: row.cache_read_tokens,
  cacheWriteTokens: row.cache_write_tokens,
  cost: row.cost,
  latencyMs: row.latency_ms,
  ttfbMs: row.ttfb_ms,
  attempts: row.attempts,
  sessionId: row.session_id,
  user: row.user_id,
  appReferer: row.app_referer,
  appTitle: row.app_title,
  appCategories: row.app_categories,
  metadata: row.metadata
})

/** Where the batches are written when not on the layer's own SQL client. */
export interface Placement {
  /**
   * The SQLite file the client in context is connected to: a worker thread writes the batches there, on a connection of
   * its own (if the thread stops, the batches go back to the client, with a warning).
   */
  readonly sqliteFile?: string | undefined
}

/**
 * Builds the SQL usage log and forks its writer into the current scope; closing the scope writes
 * every buffered record. The tables must exist (see `Migrations`).
 */
export const make = (
  options: SqlUsageLogOptions = {},
  placement: Placement = {}
): Effect.Effect<UsageLog.UsageLogService, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Acquired before the writer fiber is forked: the scope closes in reverse, so the last batches precede its end.
    let offThread = placement.sqliteFile === undefined
      ? undefined
      : yield* OffThreadRows.make({ filename: placement.sqliteFile, table: "mg_usage", columns: COLUMNS })
    const capacity = Math.max(1, options.capacity ?? 100_000)
    const batchSize = Math.max(1, options.batchSize ?? 500)
    const interval = options.flushInterval ?? Duration.millis(200)

    // Records are numbered in arrival order. Every record numbered below `doneBelow()` has been
    // written (or given up on), which is what `flush` waits for.
    const buffer = new RingBuffer.RingBuffer<Pending>(capacity)
    let nextSeq = 1
    let inFlightFrom = 0
    let dropped = 0
    let droppedReported = 0
    let closed = false
    let waiters: Array<Waiter> = []
    const wake = yield* Effect.makeLatch(false)

    const doneBelow = () => inFlightFrom > 0 ? inFlightFrom : (buffer.peekOldest()?.seq ?? nextSeq)

    const resolveWaiters = Effect.suspend(() => {
      if (waiters.length === 0) return Effect.void
      const done = doneBelow()
      const ready = waiters.filter((w) => w.target < done)
      if (ready.length === 0) return Effect.void
      waiters = waiters.filter((w) => w.target >= done)
      return Effect.forEach(ready, (w) => Deferred.succeed(w.done, undefined), { discard: true })
    })

    const reportDrops = Effect.suspend(() => {
      if (dropped === droppedReported) return Effect.void
      const count = dropped - droppedReported
      droppedReported = dropped
      return Effect.logWarning("Usage log buffer full: dropped the oldest records").pipe(
        Effect.annotateLogs({ dropped: count, droppedTotal: dropped, capacity })
      )
    })

    const onClient = (batch: ReadonlyArray<Pending>) =>
      sql.withTransaction(
        Effect.forEach(
          fixedChunks(batch),
          (rows) => sql`INSERT INTO mg_usage ${sql.insert(rows.map((p) => toRow(p.record)))}`,
          { discard: true }
        )
      )

    const onThread = (writer: OffThreadRows.OffThreadRows, batch: ReadonlyArray<Pending>) =>
      writer.write(batch.map((p) => valuesOf(p.record))).pipe(
        Effect.catchIf((error) => error.stopped, (error) =>
          Effect.logWarning("Usage log: the writer thread stopped; writing on the main connection").pipe(
            Effect.annotateLogs({ reason: error.message }),
            Effect.zipRight(Effect.sync(() => {
              offThread = undefined
            })),
            Effect.zipRight(onClient(batch))
          ))
      )

    const insert = (batch: ReadonlyArray<Pending>) =>
      Effect.suspend(() =>
        offThread === undefined ? onClient(batch) : onThread(offThread, batch)
      ).pipe(
        Effect.retry(Schedule.intersect(Schedule.exponential(Duration.millis(100)), Schedule.recurs(3))),
        Effect.catchAll((error) =>
          Effect.logError("Usage log: could not store a batch of records; dropped it", error).pipe(
            Effect.annotateLogs({ records: batch.length })
          )
        )
      )

    // One batch; uninterruptible so that shutdown never abandons a batch half-way.
    const writeOne: Effect.Effect<boolean> = Effect.uninterruptible(Effect.suspend(() => {
      const batch = buffer.take(batchSize)
      if (batch.length === 0) return Effect.succeed(false)
      inFlightFrom = batch[0].seq
      return insert(batch).pipe(
        Effect.ensuring(Effect.sync(() => {
          inFlightFrom = 0
        })),
        Effect.zipRight(resolveWaiters),
        Effect.as(true)
      )
    }))

    const writeAll = Effect.whileLoop({
      while: () => buffer.size > 0,
      body: () => writeOne,
      step: () => undefined
    }).pipe(Effect.zipRight(resolveWaiters), Effect.zipRight(reportDrops))

    const writer = Effect.timeoutOption(wake.await, interval).pipe(
      Effect.zipRight(wake.close),
      Effect.zipRight(writeAll),
      Effect.catchAllDefect((defect) => Effect.logError("Usage log writer failed", defect)),
      Effect.forever
    )

    const fiber = yield* Effect.forkScoped(writer)
    yield* Effect.addFinalizer(() =>
      Fiber.interrupt(fiber).pipe(
        Effect.zipRight(writeAll),
        Effect.zipRight(Effect.suspend(() => {
          closed = true
          const pending = waiters
          waiters = []
          return Effect.forEach(pending, (w) => Deferred.succeed(w.done, undefined), { discard: true })
        }))
      )
    )

    const record = (record: UsageLog.UsageRecord): Effect.Effect<void> =>
      Effect.sync(() => {
        if (buffer.push({ seq: nextSeq++, record })) dropped++
        if (buffer.size >= batchSize) wake.unsafeOpen()
      })

    const flush: Effect.Effect<void> = Effect.suspend(() => {
      const target = nextSeq - 1
      if (closed || doneBelow() > target) return Effect.void
      return Effect.flatMap(Deferred.make<void>(), (done) => {
        waiters.push({ target, done })
        wake.unsafeOpen()
        return Deferred.await(done)
      })
    })

    const select = SqlSchema.findAll({
      Request: Schema.Struct({ workspace: Schema.optional(Schema.String), limit: Schema.Number }),
      Result: UsageRow,
      execute: ({ limit, workspace }) =>
        workspace === undefined
          ? sql`SELECT * FROM mg_usage ORDER BY created_at DESC, id DESC LIMIT ${limit}`
          : sql`SELECT * FROM mg_usage WHERE workspace = ${workspace} ORDER BY created_at DESC, id DESC LIMIT ${limit}`
    })

    const list = (query: UsageLog.UsageQuery): Effect.Effect<ReadonlyArray<UsageLog.UsageRecord>> =>
      select({ workspace: query.workspace, limit: Math.max(0, Math.floor(query.limit ?? defaultLimit)) }).pipe(
        Effect.map((rows) => rows.map(fromRow)),
        Effect.orDie
      )

    return UsageLog.UsageLog.of({ record, flush, list })
  })

/** `UsageLog` over the `SqlClient` in context; its writer lives as long as the layer. */
export const layer = (
  options: SqlUsageLogOptions = {},
  placement: Placement = {}
): Layer.Layer<UsageLog.UsageLog, never, SqlClient.SqlClient> =>
  Layer.scoped(UsageLog.UsageLog, make(options, placement))
