/**
 * `InternStore` over @effect/sql (SQLite or PostgreSQL): tables `mg_interns` (one row per intern; the idempotency key
 * unique per workspace), `mg_intern_turns` (chat sessions) and `mg_intern_reveals` (the daemon-access audit log).
 * Status changes are `UPDATE ... WHERE status = expected RETURNING *`, so a change that lost a race changes nothing.
 * A reveal is counted and logged in one transaction that first takes a lock per intern (a PostgreSQL advisory lock;
 * SQLite serialises writers), so processes sharing the database never exceed the limit together.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import type * as Statement from "@effect/sql/Statement"
import type { Intern as Interns } from "@model-gateway/core"
import { InternStore } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Num, Text } from "./internal/Columns.js"

type Intern = Interns.Intern

const Status = Schema.Literal("queued", "provisioning", "running", "failed", "stopped", "destroying", "destroy_failed")

const InternRow = Schema.Struct({
  id: Schema.String,
  workspace: Schema.String,
  name: Schema.String,
  description: Text,
  instructions: Text,
  model: Text,
  status: Status,
  progress_label: Text,
  progress_step: Schema.NullOr(Num),
  progress_total: Schema.NullOr(Num),
  hostname: Text,
  vault_id: Text,
  attached_vault_id: Text,
  last_failure_message: Text,
  idempotency_key: Text,
  fingerprint: Text,
  created_at: Num,
  updated_at: Num
})
type InternRow = typeof InternRow.Type

const TurnRow = Schema.Struct({ role: Schema.Literal("user", "assistant"), content: Schema.String })

const RevealRow = Schema.Struct({
  id: Schema.String,
  intern_id: Schema.String,
  workspace: Schema.String,
  key_id: Schema.String,
  request_id: Schema.String,
  at: Num,
  outcome: Schema.Literal("pending", "revealed", "not_running", "timeout", "failed")
})

const WindowRow = Schema.Struct({ n: Num, oldest: Schema.NullOr(Num) })

const internOf = (row: InternRow): Intern => ({
  id: row.id,
  workspace: row.workspace,
  name: row.name,
  description: row.description,
  instructions: row.instructions,
  model: row.model,
  status: row.status,
  progress: row.progress_label === null || row.progress_step === null || row.progress_total === null
    ? null
    : { stepLabel: row.progress_label, stepNumber: row.progress_step, totalSteps: row.progress_total },
  hostname: row.hostname,
  vaultId: row.vault_id,
  attachedVaultId: row.attached_vault_id,
  lastFailureMessage: row.last_failure_message,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})

/** The columns of the changes given (absent ones left out). */
const columnsOf = (changes: InternStore.InternChanges): Record<string, unknown> => {
  const columns: Record<string, unknown> = { updated_at: changes.updatedAt }
  if (changes.status !== undefined) columns.status = changes.status
  if (changes.progress !== undefined) {
    columns.progress_label = changes.progress?.stepLabel ?? null
    columns.progress_step = changes.progress?.stepNumber ?? null
    columns.progress_total = changes.progress?.totalSteps ?? null
  }
  if (changes.hostname !== undefined) columns.hostname = changes.hostname
  if (changes.name !== undefined) columns.name = changes.name
  if (changes.description !== undefined) columns.description = changes.description
  if (changes.instructions !== undefined) columns.instructions = changes.instructions
  if (changes.model !== undefined) columns.model = changes.model
  if (changes.lastFailureMessage !== undefined) columns.last_failure_message = changes.lastFailureMessage
  return columns
}

/** Builds the SQL intern store; the tables must exist (see `Migrations`). */
export const make: Effect.Effect<InternStore.InternStoreService, never, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  const rows = Schema.decodeUnknown(Schema.Array(InternRow))
  const interns = <E, R>(query: Effect.Effect<ReadonlyArray<unknown>, E, R>) =>
    Effect.map(Effect.flatMap(query, rows), (decoded) => decoded.map(internOf))

  const byIdempotency = (workspace: string, key: string) =>
    interns(sql`SELECT * FROM mg_interns WHERE workspace = ${workspace} AND idempotency_key = ${key}`)

  const create = (intern: Intern, idempotency?: InternStore.Idempotency) =>
    Effect.gen(function*() {
      const row = {
        id: intern.id,
        workspace: intern.workspace,
        name: intern.name,
        description: intern.description,
        instructions: intern.instructions,
        model: intern.model,
        status: intern.status,
        progress_label: intern.progress?.stepLabel ?? null,
        progress_step: intern.progress?.stepNumber ?? null,
        progress_total: intern.progress?.totalSteps ?? null,
        hostname: intern.hostname,
        vault_id: intern.vaultId,
        attached_vault_id: intern.attachedVaultId,
        last_failure_message: intern.lastFailureMessage,
        idempotency_key: idempotency?.key ?? null,
        fingerprint: idempotency?.fingerprint ?? null,
        created_at: intern.createdAt,
        updated_at: intern.updatedAt
      }
      if (idempotency === undefined) {
        yield* sql`INSERT INTO mg_interns ${sql.insert(row)}`
        return { _tag: "Created", intern } as const
      }
      // The unique index decides between two creates racing with one key: the loser inserts nothing.
      yield* sql`INSERT INTO mg_interns ${sql.insert(row)} ON CONFLICT (workspace, idempotency_key) DO NOTHING`
      const found = yield* sql<{ readonly id: string; readonly fingerprint: string | null }>`
        SELECT id, fingerprint FROM mg_interns WHERE workspace = ${intern.workspace} AND idempotency_key = ${idempotency.key}`
      const stored = found[0]
      if (stored === undefined || stored.id === intern.id) return { _tag: "Created", intern } as const
      const existing = yield* byIdempotency(intern.workspace, idempotency.key)
      return { _tag: "Existing", intern: existing[0], fingerprint: stored.fingerprint ?? "" } as const
    }).pipe(Effect.orDie)

  const get = (workspace: string, id: string) =>
    interns(sql`SELECT * FROM mg_interns WHERE id = ${id} AND workspace = ${workspace}`).pipe(
      Effect.map((found) => Option.fromNullable(found[0])),
      Effect.orDie
    )

  const list = (query: InternStore.ListQuery) => {
    const clauses: Array<Statement.Fragment> = [sql`workspace = ${query.workspace}`]
    if (query.statuses !== undefined && query.statuses.length > 0) clauses.push(sql.in("status", query.statuses))
    if (query.startingAfter !== undefined) clauses.push(sql`id < ${query.startingAfter}`)
    return interns(
      sql`SELECT * FROM mg_interns WHERE ${sql.and(clauses)} ORDER BY id DESC LIMIT ${query.limit + 1}`
    ).pipe(
      Effect.map((found): InternStore.Page => ({
        interns: found.slice(0, query.limit),
        hasMore: found.length > query.limit
      })),
      Effect.orDie
    )
  }

  const update = (id: string, expected: Intern["status"], changes: InternStore.InternChanges) =>
    interns(
      sql`UPDATE mg_interns SET ${sql.update(columnsOf(changes))} WHERE id = ${id} AND status = ${expected} RETURNING *`
    ).pipe(Effect.map((found) => Option.fromNullable(found[0])), Effect.orDie)

  const remove = (id: string, expected: Intern["status"]) =>
    Effect.gen(function*() {
      const removed = yield* sql`DELETE FROM mg_interns WHERE id = ${id} AND status = ${expected} RETURNING id`
      if (removed.length === 0) return false
      yield* sql`DELETE FROM mg_intern_turns WHERE intern_id = ${id}`
      return true
    }).pipe(sql.withTransaction, Effect.orDie)

  const findTurns = SqlSchema.findAll({
    Request: Schema.Struct({ internId: Schema.String, sessionId: Schema.String, limit: Schema.Number }),
    Result: TurnRow,
    execute: ({ internId, limit, sessionId }) =>
      sql`SELECT role, content FROM (
        SELECT id, role, content FROM mg_intern_turns
        WHERE intern_id = ${internId} AND session_id = ${sessionId}
        ORDER BY id DESC LIMIT ${limit}
      ) recent ORDER BY id ASC`
  })

  const conversation = (internId: string, sessionId: string, limit: number) =>
    Effect.orDie(findTurns({ internId, sessionId, limit }))

  const appendTurns = (internId: string, sessionId: string, turns: ReadonlyArray<InternStore.Turn>, at: number) =>
    turns.length === 0 ? Effect.void : sql`INSERT INTO mg_intern_turns ${
      sql.insert(turns.map((turn) => ({
        intern_id: internId,
        session_id: sessionId,
        role: turn.role,
        content: turn.content,
        created_at: at
      })))
    }`.pipe(Effect.asVoid, Effect.orDie)

  const countWindow = SqlSchema.single({
    Request: Schema.Struct({ internId: Schema.String, since: Schema.Number }),
    Result: WindowRow,
    execute: ({ internId, since }) =>
      sql`SELECT COUNT(*) AS n, MIN(at) AS oldest FROM mg_intern_reveals WHERE intern_id = ${internId} AND at >= ${since}`
  })

  const lockIntern = (internId: string) =>
    sql.onDialectOrElse({
      pg: () => sql`SELECT pg_advisory_xact_lock(hashtext(${`model-gateway/intern-reveals/${internId}`}))`,
      orElse: () => Effect.succeed([])
    })

  const reserveReveal = (reveal: InternStore.Reveal, limit: InternStore.RevealLimit) =>
    Effect.gen(function*() {
      yield* lockIntern(reveal.internId)
      const window = yield* countWindow({ internId: reveal.internId, since: limit.since })
      if (window.n >= limit.max) {
        return { _tag: "Limited", oldestAt: window.oldest ?? limit.since } as InternStore.Reservation
      }
      yield* sql`INSERT INTO mg_intern_reveals ${
        sql.insert({
          id: reveal.id,
          intern_id: reveal.internId,
          workspace: reveal.workspace,
          key_id: reveal.keyId,
          request_id: reveal.requestId,
          at: reveal.at,
          outcome: reveal.outcome
        })
      }`
      return { _tag: "Reserved" } as InternStore.Reservation
    }).pipe(sql.withTransaction, Effect.orDie)

  const settleReveal = (id: string, outcome: InternStore.RevealOutcome) =>
    sql`UPDATE mg_intern_reveals SET outcome = ${outcome} WHERE id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

  const findReveals = SqlSchema.findAll({
    Request: Schema.String,
    Result: RevealRow,
    execute: (internId) => sql`SELECT * FROM mg_intern_reveals WHERE intern_id = ${internId} ORDER BY at DESC, id DESC`
  })

  const reveals = (internId: string) =>
    findReveals(internId).pipe(
      Effect.map((found) =>
        found.map((row): InternStore.Reveal => ({
          id: row.id,
          internId: row.intern_id,
          workspace: row.workspace,
          keyId: row.key_id,
          requestId: row.request_id,
          at: row.at,
          outcome: row.outcome
        }))
      ),
      Effect.orDie
    )

  return InternStore.InternStore.of({
    create,
    get,
    list,
    update,
    remove,
    conversation,
    appendTurns,
    reserveReveal,
    settleReveal,
    reveals
  })
})

/** `InternStore` over the `SqlClient` in context. */
export const layer: Layer.Layer<InternStore.InternStore, never, SqlClient.SqlClient> = Layer.effect(
  InternStore.InternStore,
  make
)
