import { createHash, timingSafeEqual } from "node:crypto"

/** SHA-256 of a raw key, hex encoded: what gets stored instead of the secret. */
export const hashSecret = (secret: string): string => createHash("sha256").update(secret, "utf8").digest("hex")

/** The non-secret id of a key: a prefix of its hash. */
export const keyIdOf = (hash: string): string => hash.slice(0, 12)

/** Constant-time comparison of two hex hashes. */
export const sameHash = (a: string, b: string): boolean => {
  const left = Buffer.from(a, "hex")
  const right = Buffer.from(b, "hex")
  return left.length === right.length && timingSafeEqual(left, right)
}
