import * as crypto from "node:crypto"

// `crypto.hash` (Node >= 20.12) is a one-shot digest, several times cheaper than a `createHash` object per call.
const sha256Hex: (secret: string) => string = typeof crypto.hash === "function"
  ? (secret) => crypto.hash("sha256", secret, "hex")
  : (secret) => crypto.createHash("sha256").update(secret, "utf8").digest("hex")

/** SHA-256 of a raw key, hex encoded: what gets stored instead of the secret. */
export const hashSecret = (secret: string): string => sha256Hex(secret)

/** The non-secret id of a key: a prefix of its hash. */
export const keyIdOf = (hash: string): string => hash.slice(0, 12)

/** The bytes of a hex hash, to keep next to it for `sameDigest`. */
export const digestOf = (hash: string): Buffer => Buffer.from(hash, "hex")

/** Constant-time comparison of a hex hash with stored digest bytes. */
export const sameDigest = (digest: Buffer, hash: string): boolean => {
  const other = Buffer.from(hash, "hex")
  return other.length === digest.length && crypto.timingSafeEqual(digest, other)
}
