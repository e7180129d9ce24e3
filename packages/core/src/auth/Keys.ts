/**
 * The keys port: API key → principal. Adapters store only a hash of each key and compare in
 * constant time; the raw secret never leaves `authenticate`/`provision` and is never logged.
 */
import type { Effect, Option } from "effect"
import { Context } from "effect"

/** Who is calling: the workspace the key belongs to and what it may do. */
export interface Principal {
  /** A non-secret identifier of the key (a prefix of its hash). */
  readonly keyId: string
  readonly workspace: string
  readonly management: boolean
  /** Member of the interns programme. */
  readonly interns: boolean
  readonly label?: string | undefined
}

export interface ProvisionKey {
  readonly secret: string
  readonly workspace: string
  readonly management: boolean
  readonly interns: boolean
  readonly label?: string | undefined
}

export interface KeysService {
  /** The principal for a raw key, or none when unknown. */
  readonly authenticate: (secret: string) => Effect.Effect<Option.Option<Principal>>
  /** Stores (or updates) a key, hashed. Idempotent. */
  readonly provision: (key: ProvisionKey) => Effect.Effect<Principal>
  /** Removes a key by its id; true when a key was removed. */
  readonly revoke: (keyId: string) => Effect.Effect<boolean>
}

/** Port: API key store. */
export class Keys extends Context.Tag("@model-gateway/core/Keys")<Keys, KeysService>() {}
