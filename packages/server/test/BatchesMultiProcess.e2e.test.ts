/**
 * Three gateway processes (`packages/server/dist/bundle/model-gateway.js`) on one PostgreSQL database run one batch of 2,000 requests
 * against upstreams that answer in 20 ms. One process is killed with SIGKILL halfway: its leases run out, the others
 * take its requests over, and the batch completes with exactly 2,000 results, none twice. Each process has an upstream
 * of its own, whose answers name it, so the test sees which process answered what.
 */
import { randomUUID } from "node:crypto"
import { existsSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeOpenAi } from "../../../packages/provider-adapters/test/fakes/index.js"
import { dropSchema, pgUrl, skipPostgres } from "../../core/test/contract/Postgres.js"
import { call, getBatch, processConfig, submit } from "./BatchesHarness.js"
import { listening, MAIN, type Proc, run } from "./processes.js"

const skip = skipPostgres("the multi-process batch test")
const schema = `mg_test_batchmp_${randomUUID().replaceAll("-", "")}`
const KEY = "mg-multi-process-key"
const N = 2_000
const LEASE_MS = 2_000

const upstreams: Array<FakeUpstream> = []
const procs: Array<Proc> = []
let dir: string

const databaseUrl = () => {
  const url = new URL(pgUrl)
  url.searchParams.set("schema", schema)
  return url.toString()
}

const configFor = (upstream: FakeUpstream) =>
  processConfig(upstream.url, KEY, {
    leaseMs: LEASE_MS,
    pollMs: 100,
    perBatchConcurrency: 16,
    perProcessConcurrency: 32,
    retryBaseMs: 50
  })

const start = (i: number): Proc => {
  const path = join(dir, `config-${i}.json`)
  writeFileSync(path, JSON.stringify(configFor(upstreams[i])))
  const proc = run({ GATEWAY_CONFIG: path, DATABASE_URL: databaseUrl(), PORT: "0" }, dir)
  procs[i] = proc
  return proc
}

describe.skipIf(skip)("batches shared by three gateway processes on PostgreSQL", () => {
  beforeAll(async () => {
    if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\` (npm test does) first`)
    dir = mkdtempSync(join(tmpdir(), "mg-batches-mp-"))
    for (let i = 0; i < 3; i++) {
      const upstream = await startFakeOpenAi({ default: { kind: "ok", latencyMs: 20 } })
      upstream.setReply(() => ({ text: `process ${i}`, usage: { input: 10, output: 2 } }))
      upstreams.push(upstream)
    }
  }, 60_000)

  afterAll(async () => {
    for (const proc of procs) if (proc !== undefined && proc.child.exitCode === null) proc.child.kill("SIGKILL")
    await Promise.all(upstreams.map((u) => u.close()))
    await dropSchema(schema)
  }, 60_000)

  it("completes a 2,000-request batch with exactly one result per request after one process is SIGKILLed", async () => {
    // One process first, so that it migrates the schema; then the two others.
    const urls = [await listening(start(0))]
    urls.push(...await Promise.all([1, 2].map((i) => listening(start(i)))))
    const gateways = urls.map((url) => ({ url }))
    const requests = Array.from({ length: N }, (_, i) => ({
      custom_id: `item-${i}`,
      body: { messages: [{ role: "user", content: `item-${i}` }], max_tokens: 4 }
    }))
    const created = await submit(
      gateways[0],
      { endpoint: "/v1/chat/completions", model: "acme/gpt", requests },
      {},
      KEY
    )
    expect(created.status).toBe(202)
    const id = created.json.id
    // Halfway, kill the process serving the third upstream, in the middle of its requests.
    const victim = 2
    const deadline = Date.now() + 120_000
    let killedAt: any
    while (Date.now() < deadline) {
      const batch = (await getBatch(gateways[0], id, KEY)).json
      if (batch.request_counts.completed >= N / 2 && upstreams[victim].inFlight() > 0) {
        procs[victim].child.kill("SIGKILL")
        killedAt = batch.request_counts
        break
      }
      if (batch.status !== "in_progress" && batch.status !== "validating") throw new Error(JSON.stringify(batch))
      await new Promise((r) => setTimeout(r, 20))
    }
    expect(killedAt, "the batch never got halfway with the victim busy").toBeDefined()
    expect(await procs[victim].exited).toBe(null)
    const asked = upstreams[victim].requests.length
    expect(killedAt.completed).toBeLessThan(N)
    // The survivors finish the batch (after the victim's leases run out).
    let done: any
    while (Date.now() < deadline) {
      done = (await getBatch(gateways[1], id, KEY)).json
      if (done.status === "completed") break
      expect(["in_progress", "finalizing"]).toContain(done.status)
      await new Promise((r) => setTimeout(r, 100))
    }
    expect(done.status).toBe("completed")
    expect(done.request_counts).toEqual({ total: N, completed: N, failed: 0 })
    expect(done.results).toHaveLength(N)
    expect(done.results.map((r: any) => r.custom_id)).toEqual(requests.map((r) => r.custom_id))
    expect(new Set(done.results.map((r: any) => r.id)).size).toBe(N)
    expect(done.usage).toMatchObject({ prompt_tokens: 10 * N, completion_tokens: 2 * N })
    // Which process answered each request: every process did some, and the victim's unanswered requests were
    // answered by the others.
    const answeredBy = done.results.map((r: any) => r.response.body.choices[0].message.content as string)
    const byProcess = [0, 1, 2].map((i) => answeredBy.filter((text: string) => text === `process ${i}`).length)
    expect(byProcess.every((n) => n > 0)).toBe(true)
    expect(byProcess.reduce((a, b) => a + b, 0)).toBe(N)
    const victimAsked = new Set(
      upstreams[victim].requests.slice(0, asked).map((r) => r.body.messages[0].content as string)
    )
    const takenOver = done.results.filter((r: any) =>
      victimAsked.has(r.custom_id) && r.response.body.choices[0].message.content !== `process ${victim}`
    )
    expect(takenOver.length).toBeGreaterThan(0)
    // Every request reached an upstream at least once; those cut by the kill twice.
    const total = upstreams.reduce((sum, u) => sum + u.requests.length, 0)
    expect(total - N).toBeGreaterThanOrEqual(takenOver.length)
    // The survivors still serve, and stop gracefully.
    expect((await call(gateways[1], "GET", "/batches?limit=1", undefined, {}, KEY)).status).toBe(200)
    for (const i of [0, 1]) {
      procs[i].child.kill("SIGTERM")
      expect(await procs[i].exited).toBe(0)
    }
  }, 180_000)
})
