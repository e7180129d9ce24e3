/**
 * `BatchStore` over @effect/sql (SQLite or PostgreSQL): tables `mg_batches` (the records, their counts, usage and
 * coordinating lease) and `mg_batch_items` (one row per request: state, lease, result). Status changes are
 * `UPDATE ... WHERE status = expected RETURNING *`. Claims are one `UPDATE` of the rows a sub-select picked: on
 * PostgreSQL the sub-select locks them `FOR UPDATE SKIP LOCKED`, so processes claiming at once get disjoint rows; a
 * SQLite statement runs alone. Results are recorded under their claims' tokens, several at once: per batch, one
 * transaction marks the requests done (`UPDATE ... FROM (VALUES ...)`) and adds what they did to the batch's counts
 * and usage (the cost summed exactly: as NUMERIC on PostgreSQL, read and summed under the write lock on SQLite).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import { Batch as Batches, BatchStore, Cost } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Num, Text } from "./internal/Columns.js"

type Batch = Batches.Batch

const BatchRow = Schema.Struct({
  id: Schema.String,
  workspace: Schema.String,
  key_id: Text,
  endpoint: Schema.Literal(...Batches.endpoints),
  model: Schema.String,
  completion_window: Schema.Literal("24h"),
  status: Schema.Literal(...Batches.statuses),
  provider: Text,
  app_referer: Text,
  app_title: Text,
  app_categories: Text,
  total: Num,
  completed: Num,
  failed: Num,
  prompt_tokens: Num,
  completion_tokens: Num,
  cost: Schema.String,
  error_message: Text,
  created_at: Num,
  expires_at: Num,
  finalized_at: Schema.NullOr(Num),
  updated_at: Num
})
type BatchRow = typeof BatchRow.Type

const ItemRow = Schema.Struct({ idx: Num, custom_id: Schema.String, result: Text })
const ClaimRow = Schema.Struct({ idx: Num, custom_id: Schema.String, body: Schema.String })
const CountRow = Schema.Struct({ n: Num })
const IndexRow = Schema.Struct({ idx: Num })
const CostRow = Schema.Struct({ cost: Schema.String })

const ACTIVE = Batches.activeStatuses

/** Rows per INSERT when a batch's requests are stored (well under both databases' parameter limits). */
const INSERT_CHUNK = 500

const batchOf = (row: BatchRow): Batch => ({
  id: row.id,
  workspace: row.workspace,
  keyId: row.key_id,
  endpoint: row.endpoint,
  model: row.model,
  completionWindow: row.completion_window,
  status: row.status,
  provider: row.provider === null ? null : JSON.parse(row.provider) as Batches.BatchProvider,
  app: { referer: row.app_referer, title: row.app_title, categories: row.app_categories },
  counts: { total: row.total, completed: row.completed, failed: row.failed },
  // PostgreSQL's NUMERIC sum keeps trailing zeros: the canonical form is the one the other stores give.
  usage: {
    promptTokens: row.prompt_tokens,
    completionTokens: row.completion_tokens,
    cost: Cost.sumDecimals([row.cost])
  },
  errorMessage: row.error_message,
  createdAt: row.created_at,
  expiresAt: row.expires_at,
  finalizedAt: row.finalized_at,
  updatedAt: row.updated_at
})

const rowOf = (batch: Batch) => ({
  id: batch.id,
  workspace: batch.workspace,
  key_id: batch.keyId,
  endpoint: batch.endpoint,
  model: batch.model,
  completion_window: batch.completionWindow,
  status: batch.status,
  provider: batch.provider === null ? null : JSON.stringify(batch.provider),
  app_referer: batch.app.referer,
  app_title: batch.app.title,
  app_categories: batch.app.categories,
  total: batch.counts.total,
  completed: batch.counts.completed,
  failed: batch.counts.failed,
  prompt_tokens: batch.usage.promptTokens,
  completion_tokens: batch.usage.completionTokens,
  cost: batch.usage.cost,
  error_message: batch.errorMessage,
  created_at: batch.createdAt,
  expires_at: batch.expiresAt,
  finalized_at: batch.finalizedAt,
  updated_at: batch.updatedAt,
  lease_owner: null,
  lease_until: 0
})

const byId = (a: Batch, b: Batch) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/** Builds the SQL batch store; the tables must exist (see `Migrations`). */
export const make: Effect.Effect<BatchStore.BatchStoreService, never, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const pg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
  const skipLocked = pg ? sql.literal("FOR UPDATE SKIP LOCKED") : sql.literal("")

  const decodeBatches = Schema.decodeUnknown(Schema.Array(BatchRow))
  const batches = <E, R>(query: Effect.Effect<ReadonlyArray<unknown>, E, R>) =>
    Effect.map(Effect.flatMap(query, decodeBatches), (rows) => rows.map(batchOf))
  const decode = <A, I>(schema: Schema.Schema<A, I>) => {
    const rows = Schema.decodeUnknown(Schema.Array(schema))
    return <E, R>(query: Effect.Effect<ReadonlyArray<unknown>, E, R>) => Effect.flatMap(query, rows)
  }
  const items = decode(ItemRow)
  const claims = decode(ClaimRow)
  const counts = decode(CountRow)
  const indexes = decode(IndexRow)
  const costs = decode(CostRow)

  const create = (batch: Batch, newItems: ReadonlyArray<BatchStore.NewItem>) =>
    Effect.gen(function*() {
      yield* sql`INSERT INTO mg_batches ${sql.insert(rowOf(batch))}`
      for (let start = 0; start < newItems.length; start += INSERT_CHUNK) {
        const rows = newItems.slice(start, start + INSERT_CHUNK).map((item, i) => ({
          batch_id: batch.id,
          idx: start + i,
          custom_id: item.customId,
          body: item.body,
          state: "pending",
          lease_until: 0
        }))
        yield* sql`INSERT INTO mg_batch_items ${sql.insert(rows)}`
      }
    }).pipe(sql.withTransaction, Effect.orDie)

  const get = (workspace: string, id: string) =>
    batches(sql`SELECT * FROM mg_batches WHERE id = ${id} AND workspace = ${workspace}`).pipe(
      Effect.map((found) => Option.fromNullable(found[0])),
      Effect.orDie
    )

  const list = (query: BatchStore.ListQuery) => {
    const clauses: Array<Statement.Fragment> = [sql`workspace = ${query.workspace}`]
    if (query.statuses !== undefined && query.statuses.length > 0) clauses.push(sql.in("status", query.statuses))
    if (query.after !== undefined) clauses.push(sql`id < ${query.after}`)
    if (query.createdAfter !== undefined) clauses.push(sql`created_at > ${query.createdAfter}`)
    if (query.createdBefore !== undefined) clauses.push(sql`created_at < ${query.createdBefore}`)
    return batches(
      sql`SELECT * FROM mg_batches WHERE ${sql.and(clauses)} ORDER BY id DESC LIMIT ${query.limit + 1}`
    ).pipe(
      Effect.map((found): BatchStore.Page => ({
        batches: found.slice(0, query.limit),
        hasMore: found.length > query.limit
      })),
      Effect.orDie
    )
  }

  const transition = (id: string, expected: Batches.BatchStatus, changes: BatchStore.BatchChanges) => {
    const columns: Record<string, unknown> = { status: changes.status, updated_at: changes.updatedAt }
    if (changes.finalizedAt !== undefined) columns.finalized_at = changes.finalizedAt
    if (changes.errorMessage !== undefined) columns.error_message = changes.errorMessage
    return batches(
      sql`UPDATE mg_batches SET ${sql.update(columns)} WHERE id = ${id} AND status = ${expected} RETURNING *`
    ).pipe(Effect.map((found) => Option.fromNullable(found[0])), Effect.orDie)
  }

  const remove = (workspace: string, id: string, expected: Batches.BatchStatus) =>
    Effect.gen(function*() {
      const removed = yield* sql`DELETE FROM mg_batches
        WHERE id = ${id} AND workspace = ${workspace} AND status = ${expected} RETURNING id`
      if (removed.length === 0) return false
      yield* sql`DELETE FROM mg_batch_items WHERE batch_id = ${id}`
      return true
    }).pipe(sql.withTransaction, Effect.orDie)

  const results = (batchId: string, after: number, limit: number) =>
    items(
      sql`SELECT idx, custom_id, result FROM mg_batch_items
        WHERE batch_id = ${batchId} AND idx > ${after} ORDER BY idx LIMIT ${limit}`
    ).pipe(
      Effect.map((rows) =>
        rows.map((row): BatchStore.StoredItem => ({
          index: row.idx,
          customId: row.custom_id,
          result: row.result === null ? null : JSON.parse(row.result) as Batches.ItemResult
        }))
      ),
      Effect.orDie
    )

  const claimBatches = (lease: BatchStore.Lease, limit: number) =>
    batches(
      sql`UPDATE mg_batches SET lease_owner = ${lease.owner}, lease_until = ${lease.until}
        WHERE id IN (
          SELECT id FROM mg_batches
          WHERE ${sql.in("status", ACTIVE)}
            AND (lease_owner IS NULL OR lease_owner = ${lease.owner} OR lease_until < ${lease.now})
          ORDER BY id LIMIT ${limit} ${skipLocked}
        ) RETURNING *`
    ).pipe(Effect.map((found) => [...found].sort(byId)), Effect.orDie)

  const runnable = (now: number, limit: number) =>
    batches(
      sql`SELECT * FROM mg_batches WHERE status = 'in_progress' AND expires_at > ${now} ORDER BY id LIMIT ${limit}`
    ).pipe(Effect.orDie)

  const claimItems = (batchId: string, lease: BatchStore.Lease, limit: number) =>
    claims(
      sql`UPDATE mg_batch_items
        SET state = 'running', lease_owner = ${lease.owner}, lease_token = ${lease.token}, lease_until = ${lease.until}
        WHERE batch_id = ${batchId} AND idx IN (
          SELECT idx FROM mg_batch_items
          WHERE batch_id = ${batchId} AND state IN ('pending', 'running')
            AND (state = 'pending' OR lease_until < ${lease.now})
            AND EXISTS (
              SELECT 1 FROM mg_batches
              WHERE id = ${batchId} AND status = 'in_progress' AND expires_at > ${lease.now}
            )
          ORDER BY state, idx LIMIT ${limit} ${skipLocked}
        ) RETURNING idx, custom_id, body`
    ).pipe(
      Effect.map((rows) =>
        rows
          .map((row): BatchStore.ClaimedItem => ({
            batchId,
            index: row.idx,
            customId: row.custom_id,
            body: row.body,
            token: lease.token
          }))
          .sort((a, b) => a.index - b.index)
      ),
      Effect.orDie
    )

  const renew = (owner: string, until: number) =>
    Effect.all([
      sql`UPDATE mg_batch_items SET lease_until = ${until} WHERE lease_owner = ${owner} AND state = 'running'`,
      sql`UPDATE mg_batches SET lease_until = ${until} WHERE lease_owner = ${owner}`
    ], { discard: true }).pipe(Effect.orDie)

  const release = (owner: string) =>
    Effect.all([
      sql`UPDATE mg_batch_items SET state = 'pending', lease_owner = NULL, lease_token = NULL, lease_until = 0
        WHERE lease_owner = ${owner} AND state = 'running'`,
      sql`UPDATE mg_batches SET lease_owner = NULL, lease_until = 0 WHERE lease_owner = ${owner}`
    ], { discard: true }).pipe(Effect.orDie)

  const releaseItem = (item: BatchStore.ClaimedItem) =>
    sql`UPDATE mg_batch_items SET state = 'pending', lease_owner = NULL, lease_token = NULL, lease_until = 0
      WHERE batch_id = ${item.batchId} AND idx = ${item.index} AND state = 'running' AND lease_token = ${item.token}`
      .pipe(Effect.asVoid, Effect.orDie)

  /** Marks the requests done whose claim still holds, in one statement; the indexes it marked. */
  const markDone = (batchId: string, group: ReadonlyArray<BatchStore.Recording>) => {
    const rows = group.map(({ finished, item }) =>
      sql`(CAST(${item.index} AS INTEGER), CAST(${item.token} AS TEXT), CAST(${
        JSON.stringify(finished.result)
      } AS TEXT))`
    )
    return indexes(
      sql`UPDATE mg_batch_items
        SET state = 'done', result = v.column3, lease_owner = NULL, lease_token = NULL
        FROM (VALUES ${sql.join(", ", false)(rows)}) AS v
        WHERE mg_batch_items.batch_id = ${batchId} AND mg_batch_items.idx = v.column1
          AND mg_batch_items.state = 'running' AND mg_batch_items.lease_token = v.column2
        RETURNING mg_batch_items.idx AS idx`
    ).pipe(Effect.map((found) => new Set(found.map((row) => row.idx))))
  }

  /** Adds the recorded requests' outcomes and usage to their batch; the cost exactly (NUMERIC, or summed here). */
  const addToBatch = (batchId: string, recorded: ReadonlyArray<BatchStore.Finished>, now: number) =>
    Effect.gen(function*() {
      const completed = recorded.filter((f) => f.outcome === "completed").length
      const promptTokens = recorded.reduce((sum, f) => sum + f.promptTokens, 0)
      const completionTokens = recorded.reduce((sum, f) => sum + f.completionTokens, 0)
      const added = Cost.sumDecimals(recorded.map((f) => f.cost))
      const cost = pg
        ? sql`CAST(CAST(cost AS NUMERIC) + CAST(${added} AS NUMERIC) AS TEXT)`
        : sql`${
          Cost.sumDecimals([(yield* costs(sql`SELECT cost FROM mg_batches WHERE id = ${batchId}`))[0].cost, added])
        }`
      yield* sql`UPDATE mg_batches SET completed = completed + ${completed},
        failed = failed + ${recorded.length - completed},
        prompt_tokens = prompt_tokens + ${promptTokens}, completion_tokens = completion_tokens + ${completionTokens},
        cost = ${cost}, updated_at = ${now}
        WHERE id = ${batchId}`
    })

  /**
   * One transaction per batch: the requests marked done first (on SQLite that takes the write lock, so the read of the
   * cost that follows cannot interleave with another writer), then the batch's counts and usage.
   */
  const recordGroup = (
    batchId: string,
    group: ReadonlyArray<{ readonly at: number; readonly recording: BatchStore.Recording }>,
    now: number
  ) =>
    Effect.gen(function*() {
      const done = yield* markDone(batchId, group.map((g) => g.recording))
      const recorded = group.filter((g) => done.has(g.recording.item.index))
      if (recorded.length > 0) yield* addToBatch(batchId, recorded.map((g) => g.recording.finished), now)
      return recorded.map((g) => g.at)
    }).pipe(sql.withTransaction)

  const record = (recordings: ReadonlyArray<BatchStore.Recording>, now: number) =>
    Effect.gen(function*() {
      const outcome = recordings.map(() => false)
      for (const [batchId, group] of BatchStore.byBatch(recordings)) {
        for (let start = 0; start < group.length; start += INSERT_CHUNK) {
          for (const at of yield* recordGroup(batchId, group.slice(start, start + INSERT_CHUNK), now)) {
            outcome[at] = true
          }
        }
      }
      return outcome as ReadonlyArray<boolean>
    }).pipe(Effect.orDie)

  const running = (batchId: string, now: number) =>
    counts(
      sql`SELECT COUNT(*) AS n FROM mg_batch_items
        WHERE batch_id = ${batchId} AND state = 'running' AND lease_until >= ${now}`
    ).pipe(Effect.map((rows) => rows[0]?.n ?? 0), Effect.orDie)

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

/** `BatchStore` over the `SqlClient` in context. */
export const layer: Layer.Layer<BatchStore.BatchStore, never, SqlClient.SqlClient> = Layer.effect(
  BatchStore.BatchStore,
  make
)
