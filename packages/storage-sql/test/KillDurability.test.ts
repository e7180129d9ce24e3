/**
 * Stored data survives `kill -9` during writes, on SQLite and PostgreSQL: a writer process stores keys (and revokes
 * some), usage records and batches (created, started, their results recorded) as fast as it can and is killed at an arbitrary moment, three times over the same database;
 * each time the database is reopened (migrations included) and every write the store had acknowledged is there,
 * intact, nothing is duplicated, whatever was written but not acknowledged is either whole or absent, and the store
 * takes new writes. SQLite's own integrity check passes.
 */
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { BatchStore, Keys, UsageLog } from "@model-gateway/core"
import { Effect, Layer, Option } from "effect"
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { dropSchema, pgUp, pgUrl, skipPostgres } from "../../core/test/contract/Postgres.js"
import { SqlStorage } from "../src/index.js"
import { BATCH_ITEMS, BATCH_WORKSPACE, batchOf, itemsOf, keyOf, recordOf, revoked } from "./fixtures/durability.mjs"

const WRITER = fileURLToPath(new URL("./fixtures/writer.mjs", import.meta.url))
const BUILT = fileURLToPath(new URL("../dist/index.js", import.meta.url))

const skipPg = skipPostgres("the PostgreSQL kill -9 durability test")
const dir = mkdtempSync(join(tmpdir(), "mg-kill-"))
const pgSchema = `mg_kill_${randomUUID().replaceAll("-", "")}`

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true })
  if (!skipPg && pgUp) await dropSchema(pgSchema)
})

interface Acknowledged {
  readonly keys: Set<number>
  readonly revoked: Set<number>
  /** Every usage record up to this index (from the round's first) was acknowledged. */
  usageUpTo: number
  /** Batches stored, and batches whose every request's result was recorded. */
  readonly batches: Set<number>
  readonly recorded: Set<number>
  /** The last batch index the writer could have started. */
  lastBatch: number
}

/** Runs the writer from index `first` until it has acknowledged enough, then kills it with SIGKILL mid-write. */
const killedMidWrite = (args: ReadonlyArray<string>, first: number): Promise<Acknowledged> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRITER, ...args, String(first)], { stdio: ["ignore", "pipe", "pipe"] })
    const acked: Acknowledged = {
      keys: new Set(),
      revoked: new Set(),
      usageUpTo: first - 1,
      batches: new Set(),
      recorded: new Set(),
      lastBatch: first
    }
    let pending = ""
    let errors = ""
    let killAt: NodeJS.Timeout | undefined
    const giveUp = setTimeout(() => child.kill("SIGKILL"), 30_000)
    child.stderr.on("data", (chunk: Buffer) => (errors += chunk.toString()))
    child.stdout.on("data", (chunk: Buffer) => {
      pending += chunk.toString()
      const lines = pending.split("\n")
      pending = lines.pop()!
      for (const line of lines) {
        const [what, n] = line.split(" ")
        if (what === "key") acked.keys.add(Number(n))
        else if (what === "revoked") acked.revoked.add(Number(n))
        else if (what === "usage") acked.usageUpTo = Number(n)
        else if (what === "batch") {
          acked.batches.add(Number(n))
          acked.lastBatch = Math.max(acked.lastBatch, Number(n) + 1)
        } else if (what === "recorded") acked.recorded.add(Number(n))
      }
      // Once it is well under way, kill it at a moment of its choosing: whatever it is writing then.
      if (killAt === undefined && acked.keys.size >= 40 && acked.usageUpTo - first >= 400 && acked.recorded.size >= 5) {
        killAt = setTimeout(() => child.kill("SIGKILL"), Math.floor(Math.random() * 25))
      }
    })
    child.on("exit", (code, signal) => {
      clearTimeout(giveUp)
      if (signal !== "SIGKILL") reject(new Error(`the writer exited on its own (${code}): ${errors}`))
      else if (killAt === undefined) reject(new Error(`the writer was too slow to be killed mid-write: ${errors}`))
      else resolve(acked)
    })
  })

/** Reopens the store and checks one round's writes; then checks that it takes new ones. */
const verify = (
  layer: Layer.Layer<Keys.Keys | UsageLog.UsageLog | BatchStore.BatchStore, unknown>,
  first: number,
  acked: Acknowledged
) =>
  Effect.gen(function*() {
    const keys = yield* Keys.Keys
    const usage = yield* UsageLog.UsageLog
    for (const i of acked.keys) {
      const principal = yield* keys.authenticate(keyOf(i).digest)
      if (acked.revoked.has(i)) {
        expect(Option.isNone(principal), `key ${i} was revoked`).toBe(true)
        continue
      }
      // A revocation that was under way when the writer died may have been committed without being acknowledged.
      if (revoked(i) && Option.isNone(principal)) continue
      const expected = keyOf(i)
      expect(Option.getOrUndefined(principal), `key ${i}`).toMatchObject({
        keyId: expected.digest.slice(0, 12),
        workspace: expected.workspace,
        management: expected.management,
        interns: expected.interns
      })
    }
    const stored = (yield* usage.list({ limit: 1_000_000 })).filter((r) => {
      const n = Number(r.requestId.slice("req_durability_".length))
      return n >= first && n < first + 1_000_000
    })
    const ids = new Set(stored.map((r) => r.requestId))
    expect(ids.size, "no usage record stored twice").toBe(stored.length)
    for (let i = first; i <= acked.usageUpTo; i++) {
      expect(ids.has(`req_durability_${i}`), `acknowledged usage record ${i}`).toBe(true)
    }
    for (const record of stored) {
      expect(record, "a stored record is whole").toEqual(recordOf(Number(record.requestId.slice(15))))
    }
    // Batches: every acknowledged one whole, every recorded one with all its results; any batch that is there at all
    // has counts and usage that agree with the results it holds (a result and its count are one write).
    const batches = yield* BatchStore.BatchStore
    for (let i = first; i <= acked.lastBatch; i++) {
      const id = batchOf(i, 0).id
      const batch = yield* batches.get(BATCH_WORKSPACE, id)
      if (Option.isNone(batch)) {
        expect(acked.batches.has(i), `acknowledged batch ${i}`).toBe(false)
        continue
      }
      const items = yield* batches.results(id, -1, 1000)
      expect(items.map((item) => item.customId), `batch ${i}'s requests`).toEqual(
        itemsOf(i).map((item) => item.customId)
      )
      const done = items.filter((item) => item.result !== null).length
      expect(batch.value.counts, `batch ${i}'s counts`).toEqual({ total: BATCH_ITEMS, completed: done, failed: 0 })
      expect(batch.value.usage.promptTokens, `batch ${i}'s usage`).toBe(10 * done)
      if (acked.recorded.has(i)) expect(done, `recorded batch ${i}`).toBe(BATCH_ITEMS)
    }
    // And it takes new writes.
    const fresh = first + 999_999
    yield* keys.provision({ ...keyOf(fresh), source: "cli" })
    expect(Option.isSome(yield* keys.authenticate(keyOf(fresh).digest))).toBe(true)
    yield* usage.record(recordOf(fresh))
    yield* usage.flush
    return stored.length
  }).pipe(Effect.provide(layer), Effect.scoped)

const ROUNDS = 3

describe("kill -9 during writes", () => {
  it(
    "SQLite: every acknowledged key, usage record and batch survives, whole, and the file passes its integrity check",
    async () => {
      if (!existsSync(BUILT)) throw new Error(`${BUILT} is missing: run \`npm run build\` (npm test does) first`)
      const file = join(dir, "gateway.db")
      for (let round = 0; round < ROUNDS; round++) {
        const first = round * 1_000_000
        const acked = await killedMidWrite(["sqlite", file], first)
        const stored = await Effect.runPromise(verify(SqlStorage.layerSqlite({ filename: file }), first, acked))
        expect(stored).toBeGreaterThan(acked.usageUpTo - first)
      }
      const check = await Effect.runPromise(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ integrity_check: string }>`PRAGMA integrity_check`).pipe(
          Effect.provide(SqliteClient.layer({ filename: file })),
          Effect.scoped
        )
      )
      expect(check).toEqual([{ integrity_check: "ok" }])
    },
    120_000
  )

  it.skipIf(skipPg)("PostgreSQL: every acknowledged key, usage record and batch survives, whole", async () => {
    if (!existsSync(BUILT)) throw new Error(`${BUILT} is missing: run \`npm run build\` (npm test does) first`)
    for (let round = 0; round < ROUNDS; round++) {
      const first = round * 1_000_000
      const acked = await killedMidWrite(["postgres", pgUrl, pgSchema], first)
      const stored = await Effect.runPromise(
        verify(SqlStorage.layerPg({ url: pgUrl, schema: pgSchema }), first, acked)
      )
      expect(stored).toBeGreaterThan(acked.usageUpTo - first)
    }
  }, 120_000)
})
