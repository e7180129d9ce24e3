/**
 * In-process `Keys` adapter: a Map from key digest to stored key, for tests, examples and single-process
 * embedding. Only digests are kept (see the port).
 */
import { Keys, Limits } from "@model-gateway/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

export interface MemoryKeysOptions {
  /** Keys provisioned when the layer is built. */
  readonly keys?: ReadonlyArray<Keys.ProvisionKey> | undefined
}

interface Stored {
  readonly digest: string
  readonly key: Keys.StoredKey
  /** `Option.some(principal)`, made once. */
  readonly found: Option.Option<Keys.Principal>
}

const principalOf = (key: Keys.ProvisionKey): Keys.Principal => ({
  keyId: Keys.keyIdOf(key.digest),
  workspace: key.workspace,
  management: key.management,
  interns: key.interns,
  ...(key.label !== undefined ? { label: key.label } : {}),
  ...(key.limits !== undefined && !Limits.isUnlimited(key.limits) ? { limits: key.limits } : {})
})

/** Builds an empty in-memory key store. */
export const make: Effect.Effect<Keys.KeysService> = Effect.sync(() => {
  const byDigest = new Map<string, Stored>()

  const store = (key: Keys.ProvisionKey, now: number): Keys.Principal => {
    const principal = principalOf(key)
    const createdAt = byDigest.get(key.digest)?.key.createdAt ?? now
    byDigest.set(key.digest, {
      digest: key.digest,
      key: { ...principal, source: key.source, createdAt },
      found: Option.some(principal)
    })
    return principal
  }

  const provision = (key: Keys.ProvisionKey) => Effect.map(Clock.currentTimeMillis, (now) => store(key, now))

  const sync = (source: Keys.KeySource, keys: ReadonlyArray<Omit<Keys.ProvisionKey, "source">>) =>
    Effect.map(Clock.currentTimeMillis, (now): Keys.SyncResult => {
      const wanted = new Set(keys.map((k) => k.digest))
      let added = 0
      let kept = 0
      let revoked = 0
      for (const [digest, stored] of byDigest) {
        if (stored.key.source === source && !wanted.has(digest)) {
          byDigest.delete(digest)
          revoked++
        }
      }
      for (const key of keys) {
        if (byDigest.has(key.digest)) kept++
        else added++
        store({ ...key, source }, now)
      }
      return { added, kept, revoked }
    })

  return Keys.Keys.of({
    authenticate: (digest) =>
      Effect.sync(() => {
        const stored = byDigest.get(digest)
        return stored !== undefined && Keys.sameDigest(stored.digest, digest) ? stored.found : Option.none()
      }),
    provision,
    revoke: (keyId) =>
      Effect.sync(() => {
        let removed = false
        for (const [digest, stored] of byDigest) {
          if (stored.key.keyId === keyId) {
            byDigest.delete(digest)
            removed = true
          }
        }
        return removed
      }),
    list: Effect.sync(() => [...byDigest.values()].map((s) => s.key).sort((a, b) => a.createdAt - b.createdAt)),
    sync
  })
})

/** The in-memory `Keys` layer, optionally seeded with keys. */
export const layer = (options: MemoryKeysOptions = {}): Layer.Layer<Keys.Keys> =>
  Layer.effect(
    Keys.Keys,
    Effect.tap(make, (keys) => Effect.forEach(options.keys ?? [], keys.provision, { discard: true }))
  )
