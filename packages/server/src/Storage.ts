/**
 * Which storage adapters a configuration gets: the storage its URL names (memory, SQLite, PostgreSQL) and the limits'
 * counters where the configuration keeps them. The SQL adapters and the Redis client are loaded only when named.
 */
import type { Stores } from "@model-gateway/core"
import { MemoryQuotaStore, StorageMemory } from "@model-gateway/storage-memory"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type GatewayConfig, limitsStoreOf } from "./Config.js"
import { StorageError } from "./StartupErrors.js"

/**
 * The storage adapters for a storage URL; a failure to open them is a `StorageError` naming where and why. The SQL
 * adapters (and their driver) are loaded only when the URL names SQL storage: a gateway on memory storage never loads
 * `@effect/sql`, and one on SQLite never loads `pg`.
 */
export const storageLayer = (url: string): Layer.Layer<Stores.Stores, StorageError> =>
  url === "memory:" || url === "memory"
    ? StorageMemory.layer()
    : Layer.catchAll(
      Layer.unwrapEffect(
        Effect.map(
          Effect.tryPromise({ try: () => import("@model-gateway/storage-sql"), catch: (cause) => cause }),
          (m) => m.SqlStorage.layerFromUrl(url)
        )
      ),
      (cause) => Layer.fail(StorageError.of(url, cause))
    )

/**
 * The storage, with the limits' counters where the configuration keeps them: the storage's own (memory, or its SQL
 * database), this process's memory beside a SQL storage, or Redis (a failure to reach it stops the start, as the
 * storage's would).
 */
export const storesFor = (config: GatewayConfig, url: string): Layer.Layer<Stores.Stores, StorageError> => {
  const stores = storageLayer(url)
  const { redisPrefix, redisUrl } = config.limits
  switch (limitsStoreOf(config, url)) {
    case "redis":
      if (redisUrl === undefined) {
        return Layer.fail(
          new StorageError({
            target: "the limits' Redis",
            reason: "limits.store is redis, and no limits.redisUrl or REDIS_URL is set"
          })
        )
      }
      return Layer.merge(
        stores,
        Layer.catchAll(
          // Loaded only when configured, as the SQL storage is (see `storageLayer`).
          Layer.unwrapEffect(
            Effect.map(
              Effect.tryPromise({
                try: () => import("@model-gateway/storage-sql"),
                catch: (cause) => new Error(`cannot load the Redis quota store: ${String(cause)}`)
              }),
              (m) => m.RedisQuotaStore.layer({ url: redisUrl, prefix: redisPrefix })
            )
          ),
          (error) => Layer.fail(new StorageError({ target: "the limits' Redis", reason: error.message }))
        )
      )
    case "memory":
      return url === "memory:" || url === "memory" ? stores : Layer.merge(stores, MemoryQuotaStore.layer)
    case "postgres":
      // Counters kept in the storage's database: memory storage has none, and its counters would be this process's
      // alone, N times the limit over N processes (pitfall 7), where the configuration asked for shared ones.
      if (url === "memory:" || url === "memory") {
        return Layer.fail(
          new StorageError({
            target: "the limits' store",
            reason: "limits.store is postgres, and the storage (memory:) has no database to keep the counters in"
          })
        )
      }
      return stores
  }
}
