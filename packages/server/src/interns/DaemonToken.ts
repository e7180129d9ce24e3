/**
 * Daemon tokens: the short-lived credential `GET /interns/{id}/daemon-access` reveals and the intern's daemon
 * verifies before it lets a terminal client attach.
 *
 * Format: `mgd1.<payload>.<signature>`, both base64url. The payload is the JSON `{sub, iat, exp, jti}` (the intern id,
 * issue and expiry times in unix seconds, a random id); the signature is HMAC-SHA256 over `mgd1.<payload>` with the
 * intern's daemon key. That key is HMAC-SHA256(secret, "model-gateway/intern-daemon/v1/" + intern id): each daemon is
 * given its own key only, so it can neither accept nor mint a token of another intern, and the gateway's secret never
 * leaves the gateway.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"

export const PREFIX = "mgd1"

export interface Claims {
  /** The intern id. */
  readonly sub: string
  /** Unix seconds. */
  readonly iat: number
  readonly exp: number
  readonly jti: string
}

/** Why a token is refused. */
export type Refusal = "malformed" | "bad_signature" | "wrong_intern" | "expired"

export type Verified = { readonly ok: true; readonly claims: Claims } | { readonly ok: false; readonly reason: Refusal }

/** The daemon key of an intern, derived from the gateway's secret. */
export const daemonKey = (secret: string | Uint8Array, internId: string): Buffer =>
  createHmac("sha256", secret).update(`model-gateway/intern-daemon/v1/${internId}`).digest()

const signature = (key: Uint8Array, signed: string): Buffer => createHmac("sha256", key).update(signed).digest()

/** A token for `internId`, valid for `ttlSeconds` from `nowSeconds`. */
export const sign = (key: Uint8Array, internId: string, nowSeconds: number, ttlSeconds: number): string => {
  const claims: Claims = {
    sub: internId,
    iat: nowSeconds,
    exp: nowSeconds + ttlSeconds,
    jti: randomBytes(12).toString("base64url")
  }
  const signed = `${PREFIX}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}`
  return `${signed}.${signature(key, signed).toString("base64url")}`
}

const isClaims = (u: unknown): u is Claims => {
  if (typeof u !== "object" || u === null) return false
  const c = u as Record<string, unknown>
  return typeof c.sub === "string" && typeof c.exp === "number" && typeof c.iat === "number" &&
    typeof c.jti === "string"
}

const BASE64URL = /^[A-Za-z0-9_-]+$/

/** Checks a token against the daemon key of `internId` at `nowSeconds`: signature first, then intern, then expiry. */
export const verify = (key: Uint8Array, token: string, internId: string, nowSeconds: number): Verified => {
  const parts = token.split(".")
  if (parts.length !== 3 || parts[0] !== PREFIX || !BASE64URL.test(parts[1]) || !BASE64URL.test(parts[2])) {
    return { ok: false, reason: "malformed" }
  }
  const expected = signature(key, `${parts[0]}.${parts[1]}`)
  const given = Buffer.from(parts[2], "base64url")
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return { ok: false, reason: "bad_signature" }
  }
  let claims: unknown
  try {
    claims = JSON.parse(Buffer.from(parts[1], "base64url").toString("utf8"))
  } catch {
    return { ok: false, reason: "malformed" }
  }
  if (!isClaims(claims)) return { ok: false, reason: "malformed" }
  if (claims.sub !== internId) return { ok: false, reason: "wrong_intern" }
  if (claims.exp <= nowSeconds) return { ok: false, reason: "expired" }
  return { ok: true, claims }
}
