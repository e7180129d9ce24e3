/** The daemon's server in process, with a scripted relay: attach, turns, one at a time, refusals. */
import type { AddressInfo } from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import * as DaemonToken from "../src/interns/DaemonToken.js"
import * as InternDaemon from "../src/interns/InternDaemon.js"
import { attach, call } from "./InternsHarness.js"

const ADA = "intern_00000000000100000001"
const key = DaemonToken.daemonKey("secret", ADA)

interface Relayed {
  readonly sessionId: string | undefined
  readonly content: string
  readonly sink: InternDaemon.TurnSink
  cancelled: boolean
}

let daemon: InternDaemon.Daemon | undefined
afterEach(() => daemon?.close())

const start = async (now = () => 1_800_000_000_000) => {
  const relayed: Array<Relayed> = []
  daemon = InternDaemon.make({
    internId: ADA,
    key,
    now,
    relay: (turn, sink) => {
      const entry: Relayed = { ...turn, sink, cancelled: false }
      relayed.push(entry)
      return () => (entry.cancelled = true)
    }
  })
  const server = daemon.server
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const token = DaemonToken.sign(key, ADA, 1_800_000_000, 60)
  return { origin, token, relayed }
}

const settle = () => new Promise((r) => setTimeout(r, 20))

describe("InternDaemon", () => {
  it("answers its health check with its intern", async () => {
    const { origin } = await start()
    expect((await call(`${origin}/health`)).body).toEqual({ intern: ADA, status: "ok" })
    expect((await call(`${origin}/elsewhere`)).status).toBe(404)
  })

  it("relays each turn with the session so far, one at a time", async () => {
    const { origin, relayed, token } = await start()
    const terminal = await attach(origin, token)
    expect(await terminal.next()).toEqual({ type: "ready", intern: ADA, session_id: null })
    terminal.send({ type: "message", content: "hello" })
    await settle()
    expect(relayed.map((r) => [r.sessionId, r.content])).toEqual([[undefined, "hello"]])
    terminal.send({ type: "message", content: "too soon" })
    expect(await terminal.next()).toMatchObject({ type: "error", reason: "busy" })
    relayed[0].sink.delta("Hel")
    relayed[0].sink.delta("lo!")
    relayed[0].sink.done("sess_1", { total_tokens: 3 })
    expect(await terminal.next()).toEqual({ type: "delta", content: "Hel" })
    expect(await terminal.next()).toEqual({ type: "delta", content: "lo!" })
    expect(await terminal.next()).toEqual({ type: "done", session_id: "sess_1", usage: { total_tokens: 3 } })
    terminal.send({ type: "message", content: "again" })
    await settle()
    expect(relayed.map((r) => r.sessionId)).toEqual([undefined, "sess_1"])
    relayed[1].sink.error("upstream overloaded", "turn_failed")
    expect(await terminal.next()).toEqual({ type: "error", message: "upstream overloaded", reason: "turn_failed" })
    for (const bad of ["{", JSON.stringify({ type: "message", content: "  " }), JSON.stringify({ type: "other" })]) {
      terminal.send(bad)
      expect(await terminal.next()).toMatchObject({ type: "error", reason: "bad_request" })
    }
    terminal.send({ type: "message", content: "going away" })
    await settle()
    terminal.close()
    await settle()
    expect(relayed.map((r) => r.cancelled)).toEqual([false, false, true])
  })

  it("resumes a session named in the attach", async () => {
    const { origin, relayed, token } = await start()
    const terminal = await attach(origin, token, "sess_earlier")
    expect(await terminal.next()).toEqual({ type: "ready", intern: ADA, session_id: "sess_earlier" })
    terminal.send({ type: "message", content: "où en étions-nous ?" })
    await settle()
    expect(relayed.map((r) => [r.sessionId, r.content])).toEqual([["sess_earlier", "où en étions-nous ?"]])
    terminal.close()
  })

  it("refuses an attach without a valid token, before relaying anything", async () => {
    let now = 1_800_000_000_000
    const { origin, relayed, token } = await start(() => now)
    const missing = await attach(origin, undefined)
    expect([missing.status, missing.body.error.metadata]).toEqual([401, { reason: "unauthorized", retryable: false }])
    now += 61_000
    const late = await attach(origin, token)
    expect([late.status, late.body.error.message]).toEqual([401, "token refused (expired)"])
    expect(relayed).toEqual([])
  })
})
