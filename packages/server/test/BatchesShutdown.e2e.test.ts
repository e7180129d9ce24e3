/**
 * A graceful stop (SIGTERM) of the server process (`packages/server/dist/bundle/model-gateway.js`) in the middle of a
 * batch: the batch requests already sent upstream finish and are recorded before the process exits, no new one
 * starts, and a restarted process (on the same SQLite file) runs the rest. The upstream counts the calls of each
 * request: every one was called exactly once (a request cut by the stop would run, and be paid for, twice).
 */
import { existsSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeOpenAi } from "../../../packages/provider-adapters/test/fakes/index.js"
import { processConfig, submit, waitFor } from "./BatchesHarness.js"
import { listening, MAIN, type Proc, run } from "./processes.js"

const KEY = "mg-batches-shutdown-key"
const N = 10
/** How long the upstream takes to answer each request. */
const LATENCY_MS = 1_500

let upstream: FakeUpstream
let dir: string

beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\` (npm test does) first`)
  upstream = await startFakeOpenAi({ default: { kind: "ok", latencyMs: LATENCY_MS } })
  dir = mkdtempSync(join(tmpdir(), "mg-batches-shutdown-"))
  writeFileSync(
    join(dir, "config.json"),
    JSON.stringify({
      ...processConfig(upstream.url, KEY, { perBatchConcurrency: 2, pollMs: 100, leaseMs: 5_000 }),
      storage: `sqlite:${join(dir, "gateway.db")}`
    })
  )
})
afterAll(() => upstream.close())

const start = async (): Promise<{ proc: Proc; gateway: { url: string } }> => {
  const proc = run({ GATEWAY_CONFIG: join(dir, "config.json"), PORT: "0" }, dir)
  return { proc, gateway: { url: await listening(proc) } }
}

const until = async (check: () => boolean, what: string, ms = 15_000) => {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

/** How many times the upstream was called for each request (its content names it). */
const callsByRequest = () => {
  const calls = new Map<string, number>()
  for (const request of upstream.requests) {
    const content = request.body.messages[0].content as string
    calls.set(content, (calls.get(content) ?? 0) + 1)
  }
  return calls
}

describe("a graceful stop in the middle of a batch", { timeout: 90_000 }, () => {
  it("lets the batch requests under way finish and be recorded; after a restart each request ran exactly once", async () => {
    const first = await start()
    const requests = Array.from({ length: N }, (_, i) => ({
      custom_id: `item-${i}`,
      body: { messages: [{ role: "user", content: `item-${i}` }], max_tokens: 4 }
    }))
    const created = await submit(
      first.gateway,
      { endpoint: "/v1/chat/completions", model: "acme/gpt", requests },
      {},
      KEY
    )
    expect(created.status).toBe(202)
    const id = created.json.id
    // The first two have been answered, the next two are at the upstream.
    await until(() => upstream.requests.length >= 3 && upstream.inFlight() === 2, "the second pair of requests")
    const inFlightAtStop = upstream.requests.length
    const started = performance.now()
    first.proc.child.kill("SIGTERM")
    expect(await first.proc.exited).toBe(0)
    const stoppedIn = performance.now() - started
    // The two under way were waited for (well within the 30 s grace period), not cut.
    expect(upstream.aborted()).toBe(0)
    expect(upstream.inFlight()).toBe(0)
    expect(stoppedIn).toBeLessThan(10_000)
    expect(first.proc.output).toMatch(/batch worker: stopping; 2 running request\(s\) finish first/)
    // Nothing new was sent once the stop began.
    expect(upstream.requests.length).toBe(inFlightAtStop)

    const second = await start()
    const done = await waitFor(second.gateway, id, ["completed", "failed", "expired", "cancelled"], 60_000, KEY)
    expect(done.status).toBe("completed")
    expect(done.request_counts).toEqual({ total: N, completed: N, failed: 0 })
    expect(done.results.map((r: any) => r.custom_id)).toEqual(requests.map((r) => r.custom_id))
    expect(done.results.every((r: any) => r.response?.status_code === 200)).toBe(true)
    const calls = callsByRequest()
    expect(Object.fromEntries(calls)).toEqual(Object.fromEntries(requests.map((r) => [r.body.messages[0].content, 1])))
    second.proc.child.kill("SIGTERM")
    expect(await second.proc.exited).toBe(0)
  })
})
