/**
 * The keys port: API key digest → principal. A raw key (the secret a client sends) never reaches this port: the
 * HTTP edge and the key tools turn it into its SHA-256 digest first (`ApiKeys.digest` in the http adapter), and
 * stores keep only digests. Keys come from two sources: the configuration (synced at every start, so a key removed
 * from the configuration stops working) and the `model-gateway keys` command (kept until revoked).
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { Limits } from "../limits/Limits.js"

/** Who is calling: the workspace the key belongs to and what it may do. */
export interface Principal {
  /** A non-secret identifier of the key (a prefix of its digest). */
  readonly keyId: string
  readonly workspace: string
  readonly management: boolean
  /** Member of the interns programme. */
  readonly interns: boolean
  readonly label?: string | undefined
  /** The key's own limits (requests and tokens per minute, a budget); none when unlimited. */
  readonly limits?: Limits | undefined
}

/** Where a key came from: the configuration (synced at start-up) or the key command (kept until revoked). */
export type KeySource = "config" | "cli"

export interface ProvisionKey {
  /** The SHA-256 digest of the secret, lower-case hex. */
  readonly digest: string
  readonly workspace: string
  readonly management: boolean
  readonly interns: boolean
  readonly label?: string | undefined
  readonly limits?: Limits | undefined
  readonly source: KeySource
}

/** A stored key as listed: its principal, where it came from and when it was first stored. */
export interface StoredKey extends Principal {
  readonly source: KeySource
  /** Unix epoch milliseconds. */
  readonly createdAt: number
}

/** What a sync did: keys added, keys already stored (rewritten), keys revoked. */
export interface SyncResult {
  readonly added: number
  readonly kept: number
  readonly revoked: number
}

export interface KeysService {
  /** The principal of a key digest, or none when unknown. */
  readonly authenticate: (digest: string) => Effect.Effect<Option.Option<Principal>>
  /** Stores (or updates) a key. Idempotent. */
  readonly provision: (key: ProvisionKey) => Effect.Effect<Principal>
  /** Removes a key by its id; true when a key was removed. */
  readonly revoke: (keyId: string) => Effect.Effect<boolean>
  /** Every stored key, oldest first. */
  readonly list: Effect.Effect<ReadonlyArray<StoredKey>>
  /**
   * Makes the keys of `source` exactly `keys`: provisions each (a key stored under the other source moves to this
   * one) and revokes every other key of that source.
   */
  readonly sync: (source: KeySource, keys: ReadonlyArray<Omit<ProvisionKey, "source">>) => Effect.Effect<SyncResult>
}

/** Port: API key store. */
export class Keys extends Context.Tag("@model-gateway/core/Keys")<Keys, KeysService>() {}

/** The non-secret id of a key: the first 12 hex characters of its digest. */
export const keyIdOf = (digest: string): string => digest.slice(0, 12)

const HEX_DIGEST = /^[0-9a-f]{64}$/

/** True for a SHA-256 digest as this port takes it (64 lower-case hex characters). */
export const isDigest = (digest: string): boolean => HEX_DIGEST.test(digest)

/**
 * Compares two digests in time that depends only on their length: a second check after a look-up by digest. (The
 * look-up itself leaks nothing useful: how long comparing two SHA-256 digests takes says nothing about the secret.)
 */
export const sameDigest = (a: string, b: string): boolean => {
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return diff === 0
}
