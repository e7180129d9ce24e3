import { createHmac } from "node:crypto"
import { describe, expect, it } from "vitest"
import * as DaemonToken from "../src/interns/DaemonToken.js"

const SECRET = "gateway-secret"
const ADA = "intern_0001"
const BOB = "intern_0002"
const NOW = 1_800_000_000

const key = DaemonToken.daemonKey(SECRET, ADA)

/** A token over any payload text, correctly signed: for payloads `sign` would never make. */
const signedRaw = (payload: string, with_ = key) => {
  const signed = `mgd1.${Buffer.from(payload).toString("base64url")}`
  return `${signed}.${createHmac("sha256", with_).update(signed).digest("base64url")}`
}

describe("DaemonToken", () => {
  it("signs a token that verifies for its intern until it expires", () => {
    const token = DaemonToken.sign(key, ADA, NOW, 300)
    expect(token).toMatch(/^mgd1\.[\w-]+\.[\w-]{43}$/)
    const verified = DaemonToken.verify(key, token, ADA, NOW)
    expect(verified).toEqual({ ok: true, claims: { sub: ADA, iat: NOW, exp: NOW + 300, jti: expect.any(String) } })
    expect(DaemonToken.verify(key, token, ADA, NOW + 299).ok).toBe(true)
    expect(DaemonToken.verify(key, token, ADA, NOW + 300)).toEqual({ ok: false, reason: "expired" })
    expect(DaemonToken.sign(key, ADA, NOW, 300)).not.toBe(token)
  })

  it("derives one key per intern and per secret", () => {
    expect(key).toHaveLength(32)
    expect(DaemonToken.daemonKey(SECRET, ADA).equals(key)).toBe(true)
    expect(DaemonToken.daemonKey(SECRET, BOB).equals(key)).toBe(false)
    expect(DaemonToken.daemonKey("another-secret", ADA).equals(key)).toBe(false)
  })

  it("refuses a token of another intern, or signed with another key", () => {
    const bobKey = DaemonToken.daemonKey(SECRET, BOB)
    const bobs = DaemonToken.sign(bobKey, BOB, NOW, 300)
    expect(DaemonToken.verify(key, bobs, ADA, NOW)).toEqual({ ok: false, reason: "bad_signature" })
    // Signed with Ada's key but naming Bob: only a holder of Ada's key could make it, and it is still refused.
    expect(DaemonToken.verify(key, DaemonToken.sign(key, BOB, NOW, 300), ADA, NOW)).toEqual({
      ok: false,
      reason: "wrong_intern"
    })
    const foreign = DaemonToken.sign(DaemonToken.daemonKey("forged", ADA), ADA, NOW, 300)
    expect(DaemonToken.verify(key, foreign, ADA, NOW)).toEqual({ ok: false, reason: "bad_signature" })
  })

  it("refuses a token changed after signing", () => {
    const [prefix, payload, signature] = DaemonToken.sign(key, ADA, NOW, 300).split(".")
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString())
    const longer = Buffer.from(JSON.stringify({ ...claims, exp: NOW + 86_400 })).toString("base64url")
    expect(DaemonToken.verify(key, `${prefix}.${longer}.${signature}`, ADA, NOW).ok).toBe(false)
    const flipped = signature[0] === "A" ? `B${signature.slice(1)}` : `A${signature.slice(1)}`
    expect(DaemonToken.verify(key, `${prefix}.${payload}.${flipped}`, ADA, NOW)).toEqual({
      ok: false,
      reason: "bad_signature"
    })
    expect(DaemonToken.verify(key, `${prefix}.${payload}.${signature.slice(0, 20)}`, ADA, NOW)).toEqual({
      ok: false,
      reason: "bad_signature"
    })
  })

  it("refuses malformed tokens, even correctly signed ones", () => {
    for (const token of ["", "mgd1", "mgd1.a", "mgd1.a.b.c", "jwt.a.b", "mgd1.a+b.c", "mgd1..abc"]) {
      expect([token, DaemonToken.verify(key, token, ADA, NOW)]).toEqual([token, { ok: false, reason: "malformed" }])
    }
    for (
      const payload of ["not json", "[]", "{\"sub\":\"intern_0001\"}", "{\"sub\":1,\"iat\":1,\"exp\":2,\"jti\":\"x\"}"]
    ) {
      expect([payload, DaemonToken.verify(key, signedRaw(payload), ADA, NOW)]).toEqual([
        payload,
        { ok: false, reason: "malformed" }
      ])
    }
    const valid = signedRaw(JSON.stringify({ sub: ADA, iat: NOW, exp: NOW + 1, jti: "x" }))
    expect(DaemonToken.verify(key, valid, ADA, NOW).ok).toBe(true)
  })
})
