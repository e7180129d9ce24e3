import { afterAll, describe } from "@effect/vitest"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { batchStoreContract } from "../../core/test/contract/BatchStoreContract.js"
import { dropSchema, pgUp, pgUrl, skipPostgres } from "../../core/test/contract/Postgres.js"
import { SqlStorage } from "../src/index.js"

const skipPg = skipPostgres("the PostgreSQL batch store tests")

const tempDir = mkdtempSync(join(tmpdir(), "mg-batches-sql-"))
const pgSchema = `mg_test_batches_${randomUUID().replaceAll("-", "")}`

afterAll(async () => {
  rmSync(tempDir, { recursive: true, force: true })
  if (!skipPg && pgUp) await dropSchema(pgSchema)
})

batchStoreContract("SQLite :memory:", SqlStorage.layerSqlite({ filename: ":memory:" }))
batchStoreContract("SQLite file", SqlStorage.layerSqlite({ filename: join(tempDir, "gateway.db") }))

describe.skipIf(skipPg)("PostgreSQL", () => {
  batchStoreContract("PostgreSQL", SqlStorage.layerPg({ url: pgUrl, schema: pgSchema }))
})
