/**
 * In-process `Keys` adapter: a Map from key hash to principal. Only the SHA-256 hash of a key is
 * kept; for tests, examples and single-process embedding.
 */
import { Keys } from "@model-gateway/core"
import { Effect, Layer, Option } from "effect"
import { hashSecret, keyIdOf, sameHash } from "./internal/keyHash.js"

export interface MemoryKeysOptions {
  /** Keys provisioned when the layer is built. */
  readonly keys?: ReadonlyArray<Keys.ProvisionKey> | undefined
}

interface Stored {
  readonly hash: string
  readonly principal: Keys.Principal
}

const toPrincipal = (hash: string, key: Keys.ProvisionKey): Keys.Principal => ({
  keyId: keyIdOf(hash),
  workspace: key.workspace,
  management: key.management,
  interns: key.interns,
  ...(key.label !== undefined ? { label: key.label } : {})
})

/** Builds an empty in-memory key store. */
export const make: Effect.Effect<Keys.KeysService> = Effect.sync(() => {
  const byHash = new Map<string, Stored>()

  const provision = (key: Keys.ProvisionKey) =>
    Effect.sync(() => {
      const hash = hashSecret(key.secret)
      const principal = toPrincipal(hash, key)
      byHash.set(hash, { hash, principal })
      return principal
    })

  return Keys.Keys.of({
    authenticate: (secret) =>
      Effect.sync(() => {
        const hash = hashSecret(secret)
        const stored = byHash.get(hash)
        return stored !== undefined && sameHash(stored.hash, hash) ? Option.some(stored.principal) : Option.none()
      }),
    provision,
    revoke: (keyId) =>
      Effect.sync(() => {
        let removed = false
        for (const [hash, stored] of byHash) {
          if (stored.principal.keyId === keyId) {
            byHash.delete(hash)
            removed = true
          }
        }
        return removed
      })
  })
})

/** The in-memory `Keys` layer, optionally seeded with keys. */
export const layer = (options: MemoryKeysOptions = {}): Layer.Layer<Keys.Keys> =>
  Layer.effect(
    Keys.Keys,
    Effect.tap(make, (keys) => Effect.forEach(options.keys ?? [], keys.provision, { discard: true }))
  )
