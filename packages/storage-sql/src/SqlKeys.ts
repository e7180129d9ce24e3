/**
 * `Keys` over @effect/sql (SQLite or PostgreSQL), table `mg_api_keys`. Only the SHA-256 hash of a
 * key is stored. Successful look-ups are cached in-process (bounded, short TTL), so a key revoked
 * by another process keeps working here for at most the TTL.
 *
 * Keys are looked up by their hash (in the cache and in the table). That is safe against timing
 * attacks: what is compared is a SHA-256 digest, and how long a comparison of digests takes says
 * nothing an attacker can use about the secret. The secret itself is never stored, so it cannot be
 * compared in constant time; `sameHash` after the query is a second check, not the protection.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Keys } from "@model-gateway/core"
import { Clock, Duration, Effect, Layer, Option } from "effect"
import * as crypto from "node:crypto"
import { hashSecret, keyIdOf, sameHash } from "./internal/keyHash.js"

// `crypto.hash` (Node >= 20.12) is a one-shot digest, several times cheaper than `hashSecret`'s `createHash` object;
// both give the same hex SHA-256.
const digestHex: (secret: string) => string = typeof crypto.hash === "function"
  ? (secret) => crypto.hash("sha256", secret, "hex")
  : hashSecret

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
  /** `Option.some(principal)`. */
  readonly found: Option.Option<Keys.Principal>
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
      cache.set(hash, { found: Option.some(principal), expiresAt: now + ttl })
    }

    const lookup = (hash: string, now: number): Effect.Effect<Option.Option<Keys.Principal>> =>
      Effect.gen(function*() {
        const rows = yield* sql<KeyRow>`SELECT key_hash, key_id, workspace, management, interns, label
          FROM mg_api_keys WHERE key_hash = ${hash}`
        const row = rows[0]
        if (row === undefined || !sameHash(row.key_hash, hash)) return Option.none()
        const principal = toPrincipal(row)
        remember(hash, principal, now)
        return Option.some(principal)
      }).pipe(Effect.orDie)

    // A cached key (nearly every request) costs one digest and one Map look-up, without a generator.
    const authenticate = (secret: string): Effect.Effect<Option.Option<Keys.Principal>> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const hash = digestHex(secret)
        const cached = cache.get(hash)
        if (cached !== undefined) {
          if (cached.expiresAt > now) return Effect.succeed(cached.found)
          cache.delete(hash)
        }
        return lookup(hash, now)
      })

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
