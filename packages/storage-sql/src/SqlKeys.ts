/**
 * `Keys` over @effect/sql (SQLite or PostgreSQL), table `mg_api_keys`: digests only (see the port). Successful
 * look-ups are cached in-process (bounded, short TTL), so a key revoked by another process keeps working here for at
 * most the TTL.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Keys, Limits } from "@model-gateway/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Flag, Num, Text } from "./internal/Columns.js"

export interface SqlKeysOptions {
  /** Most principals kept in the in-process cache (default 10,000; 0 disables the cache). */
  readonly cacheCapacity?: number | undefined
  /** How long a cached principal is trusted (default 30 seconds). */
  readonly cacheTtl?: Duration.DurationInput | undefined
}

const KeyRow = Schema.Struct({
  key_hash: Schema.String,
  key_id: Schema.String,
  workspace: Schema.String,
  management: Flag,
  interns: Flag,
  label: Text,
  source: Schema.Literal("config", "cli"),
  limits: Schema.optionalWith(Text, { default: () => null }),
  created_at: Num
})
type KeyRow = typeof KeyRow.Type

interface CacheEntry {
  /** `Option.some(principal)`. */
  readonly found: Option.Option<Keys.Principal>
  readonly expiresAt: number
}

const limitsOf = (text: string | null): Limits.Limits | undefined => {
  if (text === null) return undefined
  try {
    return Limits.fromJson(JSON.parse(text))
  } catch {
    return undefined
  }
}

const principalOf = (row: KeyRow): Keys.Principal => {
  const limits = limitsOf(row.limits)
  return {
    keyId: row.key_id,
    workspace: row.workspace,
    management: row.management,
    interns: row.interns,
    ...(row.label !== null ? { label: row.label } : {}),
    ...(limits !== undefined ? { limits } : {})
  }
}

const storedOf = (row: KeyRow): Keys.StoredKey => ({
  ...principalOf(row),
  source: row.source,
  createdAt: row.created_at
})

/** Builds the SQL key store; the tables must exist (see `Migrations`). */
export const make = (options: SqlKeysOptions = {}): Effect.Effect<Keys.KeysService, never, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const capacity = Math.max(0, options.cacheCapacity ?? 10_000)
    const ttl = Duration.toMillis(options.cacheTtl ?? Duration.seconds(30))
    // Insertion-ordered, so the first entry is the oldest one to evict.
    const cache = new Map<string, CacheEntry>()

    const remember = (digest: string, principal: Keys.Principal, now: number) => {
      if (capacity === 0) return
      cache.delete(digest)
      if (cache.size >= capacity) {
        const oldest = cache.keys().next()
        if (!oldest.done) cache.delete(oldest.value)
      }
      cache.set(digest, { found: Option.some(principal), expiresAt: now + ttl })
    }

    const findByDigest = SqlSchema.findOne({
      Request: Schema.String,
      Result: KeyRow,
      execute: (digest) => sql`SELECT * FROM mg_api_keys WHERE key_hash = ${digest}`
    })

    const findAll = SqlSchema.findAll({
      Request: Schema.Void,
      Result: KeyRow,
      execute: () => sql`SELECT * FROM mg_api_keys ORDER BY created_at, key_id`
    })

    const lookup = (digest: string, now: number): Effect.Effect<Option.Option<Keys.Principal>> =>
      findByDigest(digest).pipe(
        Effect.map((row) => {
          if (Option.isNone(row) || !Keys.sameDigest(row.value.key_hash, digest)) return Option.none()
          const principal = principalOf(row.value)
          remember(digest, principal, now)
          return Option.some(principal)
        }),
        Effect.orDie
      )

    // A cached key (nearly every request) costs one Map look-up, without a generator.
    const authenticate = (digest: string): Effect.Effect<Option.Option<Keys.Principal>> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const cached = cache.get(digest)
        if (cached !== undefined) {
          if (cached.expiresAt > now) return Effect.succeed(cached.found)
          cache.delete(digest)
        }
        return lookup(digest, now)
      })

    const upsert = (key: Keys.ProvisionKey, now: number) => {
      const row = {
        key_hash: key.digest,
        key_id: Keys.keyIdOf(key.digest),
        workspace: key.workspace,
        management: key.management ? 1 : 0,
        interns: key.interns ? 1 : 0,
        label: key.label ?? null,
        source: key.source,
        limits: Limits.toJson(key.limits),
        created_at: now
      }
      return sql`INSERT INTO mg_api_keys ${sql.insert(row)}
        ON CONFLICT (key_hash) DO UPDATE SET
          workspace = excluded.workspace,
          management = excluded.management,
          interns = excluded.interns,
          label = excluded.label,
          source = excluded.source,
          limits = excluded.limits`.pipe(
        Effect.zipRight(Effect.sync(() => cache.delete(key.digest)))
      )
    }

    const provision = (key: Keys.ProvisionKey): Effect.Effect<Keys.Principal> =>
      Clock.currentTimeMillis.pipe(
        Effect.flatMap((now) => upsert(key, now)),
        Effect.as(principalOf({
          key_hash: key.digest,
          key_id: Keys.keyIdOf(key.digest),
          workspace: key.workspace,
          management: key.management,
          interns: key.interns,
          label: key.label ?? null,
          source: key.source,
          limits: Limits.toJson(key.limits),
          created_at: 0
        })),
        Effect.orDie
      )

    const revoke = (keyId: string): Effect.Effect<boolean> =>
      sql<{ readonly key_hash: string }>`DELETE FROM mg_api_keys WHERE key_id = ${keyId} RETURNING key_hash`.pipe(
        Effect.map((rows) => {
          for (const row of rows) cache.delete(row.key_hash)
          return rows.length > 0
        }),
        Effect.orDie
      )

    const list = findAll(undefined).pipe(Effect.map((rows) => rows.map(storedOf)), Effect.orDie)

    // One transaction: a key is never missing half-way through a sync, and two processes syncing at once serialise.
    // It writes first: on SQLite, a transaction that reads and then writes fails at once ("database is locked") when
    // another connection wrote in between (the usage records' thread, another process), where one that writes first
    // waits for the lock (a SIGHUP reload failed so under load).
    const sync = (source: Keys.KeySource, keys: ReadonlyArray<Omit<Keys.ProvisionKey, "source">>) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const wanted = keys.map((key) => key.digest)
        const stale = yield* sql<{ readonly key_hash: string }>`DELETE FROM mg_api_keys WHERE source = ${source}${
          wanted.length === 0 ? sql`` : sql` AND NOT ${sql.in("key_hash", wanted)}`
        } RETURNING key_hash`
        for (const row of stale) cache.delete(row.key_hash)
        const stored = new Set((yield* findAll(undefined)).map((row) => row.key_hash))
        for (const key of keys) yield* upsert({ ...key, source }, now)
        const added = keys.filter((key) => !stored.has(key.digest)).length
        return { added, kept: keys.length - added, revoked: stale.length } satisfies Keys.SyncResult
      }).pipe(sql.withTransaction, Effect.orDie)

    return Keys.Keys.of({ authenticate, provision, revoke, list, sync })
  })

/** `Keys` over the `SqlClient` in context. */
export const layer = (options: SqlKeysOptions = {}): Layer.Layer<Keys.Keys, never, SqlClient.SqlClient> =>
  Layer.effect(Keys.Keys, make(options))
