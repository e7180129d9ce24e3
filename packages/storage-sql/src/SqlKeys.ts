/**
 * `Keys` over @effect/sql (SQLite or PostgreSQL), table `mg_api_keys`. Only the SHA-256 hash of a
 * key is stored. Successful look-ups are cached in-process (bounded, short TTL), so a key revoked
 * by another process keeps working here for at most the TTL.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Keys } from "@model-gateway/core"
import { Clock, Duration, Effect, Layer, Option } from "effect"
import { hashSecret, keyIdOf, sameHash } from "./internal/keyHash.js"

export interface SqlKeysOptions {
  /** Most principals kept in the in-process cache (default 10,000; 0 disables the cache). */
  readonly cacheCapacity?: number | undefined
  /** How long a cached principal is trusted (default 30 seconds). */
  readonly cacheTtl?: Duration.DurationInput | undefined
}

interface KeyRow {
  readonly key_hash: string
  readonly key_id: string
  readonly workspace: string
  readonly management: number | boolean
  readonly interns: number | boolean
  readonly label: string | null
}

interface CacheEntry {
  readonly principal: Keys.Principal
  readonly expiresAt: number
}

const toPrincipal = (row: KeyRow): Keys.Principal => ({
  keyId: row.key_id,
  workspace: row.workspace,
  management: Boolean(row.management),
  interns: Boolean(row.interns),
  ...(row.label !== null ? { label: row.label } : {})
})

/** Builds the SQL key store; the tables must exist (see `Migrations`). */
export const make = (options: SqlKeysOptions = {}): Effect.Effect<Keys.KeysService, never, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const capacity = Math.max(0, options.cacheCapacity ?? 10_000)
    const ttl = Duration.toMillis(options.cacheTtl ?? Duration.seconds(30))
    // Insertion-ordered, so the first entry is the oldest one to evict.
    const cache = new Map<string, CacheEntry>()

    const remember = (hash: string, principal: Keys.Principal, now: number) => {
      if (capacity === 0) return
      cache.delete(hash)
      if (cache.size >= capacity) {
        const oldest = cache.keys().next()
        if (!oldest.done) cache.delete(oldest.value)
      }
      cache.set(hash, { principal, expiresAt: now + ttl })
    }

    const authenticate = (secret: string): Effect.Effect<Option.Option<Keys.Principal>> =>
      Effect.gen(function*() {
        const hash = hashSecret(secret)
        const now = yield* Clock.currentTimeMillis
        const cached = cache.get(hash)
        if (cached !== undefined) {
          if (cached.expiresAt > now) return Option.some(cached.principal)
          cache.delete(hash)
        }
        const rows = yield* sql<KeyRow>`SELECT key_hash, key_id, workspace, management, interns, label
          FROM mg_api_keys WHERE key_hash = ${hash}`
        const row = rows[0]
        if (row === undefined || !sameHash(row.key_hash, hash)) return Option.none()
        const principal = toPrincipal(row)
        remember(hash, principal, now)
        return Option.some(principal)
      }).pipe(Effect.orDie)

    const provision = (key: Keys.ProvisionKey): Effect.Effect<Keys.Principal> =>
      Effect.gen(function*() {
        const hash = hashSecret(key.secret)
        const now = yield* Clock.currentTimeMillis
        const row = {
          key_hash: hash,
          key_id: keyIdOf(hash),
          workspace: key.workspace,
          management: key.management ? 1 : 0,
          interns: key.interns ? 1 : 0,
          label: key.label ?? null,
          created_at: now
        }
        yield* sql`INSERT INTO mg_api_keys ${sql.insert(row)}
          ON CONFLICT (key_hash) DO UPDATE SET
            workspace = excluded.workspace,
            management = excluded.management,
            interns = excluded.interns,
            label = excluded.label`
        const principal = toPrincipal(row)
        cache.delete(hash)
        return principal
      }).pipe(Effect.orDie)

    const revoke = (keyId: string): Effect.Effect<boolean> =>
      Effect.gen(function*() {
        const rows = yield* sql<{ readonly key_hash: string }>`DELETE FROM mg_api_keys
          WHERE key_id = ${keyId} RETURNING key_hash`
        for (const row of rows) cache.delete(row.key_hash)
        return rows.length > 0
      }).pipe(Effect.orDie)

    return Keys.Keys.of({ authenticate, provision, revoke })
  })

/** `Keys` over the `SqlClient` in context. */
export const layer = (options: SqlKeysOptions = {}): Layer.Layer<Keys.Keys, never, SqlClient.SqlClient> =>
  Layer.effect(Keys.Keys, make(options))
