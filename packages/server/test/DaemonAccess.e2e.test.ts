/**
 * `GET /v1/interns/{internId}/daemon-access` end to end: the reveal (origin, token, `Cache-Control: no-store`, the
 * audit log), a terminal attached to the real daemon process with the token and chatting with the intern, the
 * daemon's refusal of forged, expired, other-intern and missing tokens, and every error reason: 404 not_found,
 * 409 intern_not_running, 429 after 10 reveals in a minute, 403 on a regional hostname, 408 timeout when the runtime
 * never answers.
 */
import { InternRuntime, InternStore } from "@model-gateway/core"
import { OpenRouter } from "@openrouter/sdk"
import { Effect, Stream } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as DaemonToken from "../src/interns/DaemonToken.js"
import type { InternsHarness } from "./InternsHarness.js"
import {
  ADMIN_KEY,
  attach,
  call,
  eventually,
  MEMBER_KEY,
  OTHER_KEY,
  REGIONAL_HOST,
  startInternsHarness,
  turn
} from "./InternsHarness.js"

const SECRET = "test-secret-for-daemon-tokens-0123456789"

let h: InternsHarness
let sdk: OpenRouter

beforeAll(async () => {
  // The runtime reads its secret from the environment once, when the gateway starts.
  const previous = process.env.INTERNS_TOKEN_SECRET
  process.env.INTERNS_TOKEN_SECRET = SECRET
  try {
    h = await startInternsHarness()
  } finally {
    if (previous === undefined) delete process.env.INTERNS_TOKEN_SECRET
    else process.env.INTERNS_TOKEN_SECRET = previous
  }
  sdk = new OpenRouter({ serverURL: `${h.url}/v1`, apiKey: MEMBER_KEY, retryConfig: { strategy: "none" } })
})
afterAll(() => h.close())

const v1 = (path: string) => `${h.url}/v1${path}`

const runningIntern = async (name: string, instructions = `You are ${name}.`) => {
  const intern = await sdk.interns.createIntern({ createInternRequest: { name, instructions, provision: true } })
  return eventually(
    "provisioning",
    () => sdk.interns.getIntern({ internId: intern.id }),
    (i) => i.status !== "provisioning"
  )
}

const reveal = (id: string, key = MEMBER_KEY, headers: Record<string, string> = {}) =>
  call(v1(`/interns/${id}/daemon-access`), { key, headers })

const now = () => Math.floor(Date.now() / 1000)

describe("daemon access", () => {
  it("reveals the daemon's origin and a token, never cached and logged; the daemon lets a terminal chat", async () => {
    const intern = await runningIntern("Grace", "You are Grace Hopper. Be brief.")
    expect(intern.status).toBe("running")
    const revealed = await reveal(intern.id)
    expect(revealed.status).toBe(200)
    expect(revealed.headers["cache-control"]).toBe("no-store")
    expect(Object.keys(revealed.body).sort()).toEqual(["origin", "token"])
    const { origin, token } = revealed.body
    expect(origin).toBe(`http://${intern.hostname}`)
    expect(token).toMatch(/^mgd1\.[\w-]+\.[\w-]+$/)

    const terminal = await attach(origin, token)
    expect(terminal.status).toBe(101)
    expect(await terminal.next()).toEqual({ type: "ready", intern: intern.id, session_id: null })
    h.anthropic.reset()
    const first = await turn(terminal, "Who found the first bug?")
    expect(first.text).toBe("Echo: Who found the first bug?")
    expect(first.last).toMatchObject({ type: "done", session_id: expect.stringMatching(/^sess_/) })
    expect(first.last.usage.completion_tokens).toBeGreaterThan(0)
    expect(h.anthropic.requests.at(-1)!.body).toMatchObject({
      model: "claude-fake-1",
      system: "You are Grace Hopper. Be brief.",
      messages: [{ role: "user", content: "Who found the first bug?" }]
    })
    const second = await turn(terminal, "Where?")
    expect(second.last.session_id).toBe(first.last.session_id)
    expect(h.anthropic.requests.at(-1)!.body.messages).toHaveLength(3)
    // One turn at a time; a line that is not a message is refused, and the terminal stays attached.
    terminal.send("not json")
    expect(await terminal.next()).toMatchObject({ type: "error", reason: "bad_request" })
    terminal.close()

    // A terminal can resume the session of an earlier one.
    const resumed = await attach(origin, (await reveal(intern.id)).body.token, first.last.session_id)
    expect(await resumed.next()).toEqual({ type: "ready", intern: intern.id, session_id: first.last.session_id })
    await turn(resumed, "Again?")
    expect(h.anthropic.requests.at(-1)!.body.messages).toHaveLength(5)
    resumed.close()

    const log = await h.gateway.gateway.runtime.runPromise(
      Effect.flatMap(InternStore.InternStore, (store) => store.reveals(intern.id))
    )
    expect(log).toHaveLength(2)
    expect(log[0]).toMatchObject({ internId: intern.id, workspace: "acme", outcome: "revealed" })
    expect(log[0].keyId).toMatch(/^[0-9a-f]{12}$/)
    expect(log[0].requestId).toMatch(/^req_/)
  })

  it("the daemon refuses forged, expired, other-intern and missing tokens", async () => {
    const ada = await runningIntern("Ada")
    const bob = await runningIntern("Bob")
    const adaAccess = (await reveal(ada.id)).body
    const bobAccess = (await reveal(bob.id)).body
    const [prefix, payload, signature] = adaAccess.token.split(".")
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString())
    const extended = Buffer.from(JSON.stringify({ ...claims, exp: claims.exp + 86_400 })).toString("base64url")
    const adaKey = DaemonToken.daemonKey(SECRET, ada.id)
    const refusals: ReadonlyArray<readonly [string, string | undefined, string]> = [
      ["a forged signature", `${prefix}.${payload}.${signature.slice(0, -4)}AAAA`, "bad_signature"],
      ["a payload changed after signing", `${prefix}.${extended}.${signature}`, "bad_signature"],
      [
        "a token signed with another secret",
        DaemonToken.sign(DaemonToken.daemonKey("other", ada.id), ada.id, now(), 60),
        "bad_signature"
      ],
      ["an expired token", DaemonToken.sign(adaKey, ada.id, now() - 600, 300), "expired"],
      ["another intern's token", bobAccess.token, "bad_signature"],
      ["a token naming another intern", DaemonToken.sign(adaKey, bob.id, now(), 60), "wrong_intern"],
      ["no token at all", undefined, "unauthorized"],
      ["garbage", "not-a-token", "malformed"]
    ]
    for (const [what, token, reason] of refusals) {
      const refused = await attach(adaAccess.origin, token)
      expect([what, refused.status, refused.body.error.metadata.reason]).toEqual([what, 401, reason])
    }
    // Bob's own token works at Bob's daemon, Ada's at Ada's.
    for (const access of [adaAccess, bobAccess]) {
      const ok = await attach(access.origin, access.token)
      expect(ok.status).toBe(101)
      ok.close()
    }
    const plain = await call(`${adaAccess.origin}/attach`)
    expect(plain.status).toBe(426)
  })
})

describe("daemon access errors", () => {
  it("404 not_found for an unknown intern or one of another workspace; 401 without a key", async () => {
    const unknown = await reveal("intern_00000000000000000000")
    expect([unknown.status, unknown.body]).toEqual([
      404,
      {
        error: {
          code: 404,
          message: "Intern 'intern_00000000000000000000' not found",
          metadata: { reason: "not_found", retryable: false }
        }
      }
    ])
    const intern = await runningIntern("Visible to acme only")
    const other = await reveal(intern.id, OTHER_KEY)
    expect([other.status, other.body.error.metadata]).toEqual([404, { reason: "not_found", retryable: false }])
    expect((await call(v1(`/interns/${intern.id}/daemon-access`))).status).toBe(401)
  })

  it("409 intern_not_running when the intern is not running", async () => {
    const queued = await sdk.interns.createIntern({ createInternRequest: { name: "Queued" } })
    const answer = await reveal(queued.id)
    expect([answer.status, answer.body.error]).toEqual([409, {
      code: 409,
      message: `Intern '${queued.id}' is not running (it is queued)`,
      metadata: { reason: "intern_not_running", retryable: false }
    }])
    const stopped = await runningIntern("Stopped")
    await sdk.interns.suspendIntern({ internId: stopped.id })
    expect((await reveal(stopped.id)).body.error.metadata.reason).toBe("intern_not_running")
  })

  it("429 after 10 reveals of one intern in a minute, with Retry-After; other interns are not limited", async () => {
    const busy = await runningIntern("Busy")
    for (let i = 0; i < 10; i++) expect((await reveal(busy.id, i % 2 === 0 ? MEMBER_KEY : ADMIN_KEY)).status).toBe(200)
    const limited = await reveal(busy.id)
    expect(limited.status).toBe(429)
    expect(Number(limited.headers["retry-after"])).toBeGreaterThanOrEqual(1)
    expect(Number(limited.headers["retry-after"])).toBeLessThanOrEqual(60)
    expect(limited.body.error).toMatchObject({ code: 429, metadata: { reason: "rate_limited", retryable: true } })
    const calm = await runningIntern("Calm")
    expect((await reveal(calm.id)).status).toBe(200)
  })

  it("403 on a regional hostname, for daemon access and every intern route", async () => {
    const intern = await runningIntern("Regional")
    // a fully qualified name's trailing dot names the same host
    for (
      const host of [REGIONAL_HOST, `${REGIONAL_HOST.toUpperCase()}:443`, `${REGIONAL_HOST}.`, `${REGIONAL_HOST}.:443`]
    ) {
      const refused = await reveal(intern.id, MEMBER_KEY, { host })
      expect([refused.status, refused.body.error.code, refused.body.error.metadata]).toEqual([
        403,
        403,
        { reason: "regional_hostname", retryable: false }
      ])
      expect(refused.body.error.message).toContain("regional hostname")
    }
    expect((await call(v1("/interns"), { key: MEMBER_KEY, headers: { host: REGIONAL_HOST } })).status).toBe(403)
    expect((await reveal(intern.id, MEMBER_KEY, { host: "gateway.test" })).status).toBe(200)
  })
})

describe("a runtime that never answers", () => {
  it("408 timeout after 10 seconds, logged as a timeout", async () => {
    const hung: InternRuntime.InternRuntimeService = {
      provision: () => Stream.make({ _tag: "Ready", hostname: "hung.invalid" } as const),
      suspend: () => Effect.void,
      destroy: () => Effect.void,
      access: () => Effect.never
    }
    const stuck = await startInternsHarness({ runtime: hung })
    try {
      const client = new OpenRouter({
        serverURL: `${stuck.url}/v1`,
        apiKey: MEMBER_KEY,
        retryConfig: { strategy: "none" }
      })
      const intern = await client.interns.createIntern({ createInternRequest: { name: "Hung", provision: true } })
      await eventually(
        "running",
        () => client.interns.getIntern({ internId: intern.id }),
        (i) => i.status === "running"
      )
      const started = Date.now()
      const answer = await call(`${stuck.url}/v1/interns/${intern.id}/daemon-access`, { key: MEMBER_KEY })
      const elapsed = Date.now() - started
      expect([answer.status, answer.body.error]).toEqual([408, {
        code: 408,
        message: "The intern runtime did not answer within 10 seconds",
        metadata: { reason: "timeout", retryable: true }
      }])
      expect(elapsed).toBeGreaterThanOrEqual(9_900)
      expect(elapsed).toBeLessThan(13_000)
      const log = await stuck.gateway.gateway.runtime.runPromise(
        Effect.flatMap(InternStore.InternStore, (store) => store.reveals(intern.id))
      )
      expect(log.map((r) => r.outcome)).toEqual(["timeout"])
    } finally {
      await stuck.close()
    }
  }, 20_000)
})
