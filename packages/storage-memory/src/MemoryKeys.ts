/**
 * In-process `Keys` adapter: a Map from key hash to principal. Only the SHA-256 hash of a key is
 * kept; for tests, examples and single-process embedding.
 *
 * Looking a key up by its hash is safe against timing attacks: the Map compares SHA-256 digests,
 * and how long a comparison of digests takes says nothing an attacker can use about the secret
 * (a matching prefix of digests is no step towards a matching secret). A constant-time comparison
 * of the raw secret is impossible here by design, since the secret is not stored; the
 * `timingSafeEqual` of the digest bytes after a hit is a cheap second check, not the protection.
 */
import { Keys } from "@model-gateway/core"
import { Effect, Layer, Option } from "effect"
import { digestOf, hashSecret, keyIdOf, sameDigest } from "./internal/keyHash.js"

export interface MemoryKeysOptions {
  /** Keys provisioned when the layer is built. */
  readonly keys?: ReadonlyArray<Keys.ProvisionKey> | undefined
}

interface Stored {
  readonly digest: Buffer
  readonly principal: Keys.Principal
  /** `Option.some(principal)`, made once. */
  readonly found: Option.Option<Keys.Principal>
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
      byHash.set(hash, { digest: digestOf(hash), principal, found: Option.some(principal) })
      return principal
    })

  return Keys.Keys.of({
    authenticate: (secret) =>
      Effect.sync(() => {
        const hash = hashSecret(secret)
        const stored = byHash.get(hash)
        return stored !== undefined && sameDigest(stored.digest, hash) ? stored.found : Option.none()
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
