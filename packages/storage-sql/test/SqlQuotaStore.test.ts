import { describe } from "@effect/vitest"
import { QuotaStore } from "@model-gateway/core"
import { Layer } from "effect"
import { randomUUID } from "node:crypto"
import { afterAll } from "vitest"
import { dropSchema, pgUp, pgUrl, skipPostgres } from "../../core/test/contract/Postgres.js"
import { quotaStoreContract } from "../../core/test/contract/QuotaStoreContract.js"
import { SqlStorage } from "../src/index.js"

const skipPg = skipPostgres("the PostgreSQL quota store tests")
const pgSchema = `mg_test_quota_${randomUUID().replaceAll("-", "")}`

afterAll(async () => {
  if (!skipPg && pgUp) await dropSchema(pgSchema)
})

const quotaStoreOf = <E>(stores: Layer.Layer<QuotaStore.QuotaStore, E>) =>
  Layer.project(stores, QuotaStore.QuotaStore, QuotaStore.QuotaStore, (store) => store)

quotaStoreContract("SQLite", quotaStoreOf(SqlStorage.layerSqlite({ filename: ":memory:" })))

describe.skipIf(skipPg)("PostgreSQL", () => {
  quotaStoreContract("PostgreSQL", quotaStoreOf(SqlStorage.layerPg({ url: pgUrl, schema: pgSchema })))
})
