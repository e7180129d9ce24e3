import { assert, describe, it } from "@effect/vitest"
import { Keys, UsageLog } from "@model-gateway/core"
import { Effect, Option } from "effect"
import { digestOf, storageContract, usageRecord } from "../../core/test/contract/StorageContract.js"
import { MemoryUsageLog, StorageMemory } from "../src/index.js"

storageContract("memory", StorageMemory.layer())

describe("StorageMemory", () => {
  it.effect("keeps only the most recent records", () =>
    Effect.gen(function*() {
      const usage = yield* UsageLog.UsageLog
      const records = Array.from({ length: 10 }, (_, i) => usageRecord({ createdAt: 1000 + i }))
      yield* Effect.forEach(records, usage.record, { discard: true })
      yield* usage.flush
      assert.deepStrictEqual(yield* usage.list({ limit: 100 }), records.slice(7).reverse())
    }).pipe(Effect.provide(MemoryUsageLog.layer({ capacity: 3 }))))

  it.effect("can be seeded with keys", () =>
    Effect.gen(function*() {
      const keys = yield* Keys.Keys
      const principal = yield* keys.authenticate(digestOf("sk-seeded"))
      assert.deepStrictEqual(Option.map(principal, (p) => p.workspace), Option.some("seeded"))
    }).pipe(
      Effect.provide(
        StorageMemory.layer({
          keys: [{
            digest: digestOf("sk-seeded"),
            source: "cli",
            workspace: "seeded",
            management: false,
            interns: false
          }]
        })
      )
    ))
})
