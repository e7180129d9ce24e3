import { afterAll, describe } from "@effect/vitest"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { internStoreContract } from "../../core/test/contract/InternStoreContract.js"
import { dropSchema, pgUp, pgUrl, skipPostgres } from "../../core/test/contract/Postgres.js"
import { SqlStorage } from "../src/index.js"

const skipPg = skipPostgres("the PostgreSQL intern store tests")

const tempDir = mkdtempSync(join(tmpdir(), "mg-interns-sql-"))
const pgSchema = `mg_test_interns_${randomUUID().replaceAll("-", "")}`

afterAll(async () => {
  rmSync(tempDir, { recursive: true, force: true })
  if (!skipPg && pgUp) await dropSchema(pgSchema)
})

internStoreContract("SQLite :memory:", SqlStorage.layerSqlite({ filename: ":memory:" }))
internStoreContract("SQLite file", SqlStorage.layerSqlite({ filename: join(tempDir, "gateway.db") }))

describe.skipIf(skipPg)("PostgreSQL", () => {
  internStoreContract("PostgreSQL", SqlStorage.layerPg({ url: pgUrl, schema: pgSchema }))
})
