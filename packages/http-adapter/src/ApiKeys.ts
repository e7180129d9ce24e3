/**
 * API keys at the edge: reading the key a client presents, turning a key into the digest the `Keys` port takes, and
 * making new keys. The one place a raw key is hashed.
 */
import * as crypto from "node:crypto"
import type { Headers } from "./HttpTypes.js"
import { header } from "./HttpTypes.js"

// `crypto.hash` (Node >= 20.12) is a one-shot digest, several times cheaper than a `createHash` object per call.
const sha256Hex: (secret: string) => string = typeof crypto.hash === "function"
  ? (secret) => crypto.hash("sha256", secret, "hex")
  : (secret) => crypto.createHash("sha256").update(secret, "utf8").digest("hex")

/** The SHA-256 digest of a key, lower-case hex: what the `Keys` port takes and stores keep. */
export const digest = (secret: string): string => sha256Hex(secret)

/** A new random key: `mg-` and 32 url-safe characters (192 bits). */
export const generate = (): string => `mg-${crypto.randomBytes(24).toString("base64url")}`

/** The API key from `Authorization: Bearer <key>` or `x-api-key: <key>`. */
export const credential = (headers: Headers): string | undefined => {
  const authorization = header(headers, "authorization")
  if (authorization !== undefined) {
    const match = /^Bearer\s+(.+)$/i.exec(authorization.trim())
    if (match !== null) return match[1].trim()
  }
  const apiKey = header(headers, "x-api-key")
  return apiKey === undefined || apiKey.trim() === "" ? undefined : apiKey.trim()
}
