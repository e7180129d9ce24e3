/**
 * `model-gateway batches ...` as a subprocess (`packages/server/dist/bundle/model-gateway.js`, built by `npm test`) against a gateway
 * with its fake upstreams: submit a JSON Lines file with progress and a results file, list, get, cancel, delete.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FAST_WORKER } from "./BatchesHarness.js"
import type { Harness } from "./harness.js"
import { KEY, startHarness } from "./harness.js"
import { command, MAIN } from "./processes.js"

let h: Harness
let dir: string

beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\` (npm test does) first`)
  h = await startHarness({ batches: FAST_WORKER })
  dir = mkdtempSync(join(tmpdir(), "mg-batches-cli-"))
})
afterAll(() => h.close())

const cli = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  command({ GATEWAY_URL: `${h.url}/v1`, GATEWAY_API_KEY: KEY, ...env }, dir, ["batches", ...args])

const lines = (n: number) =>
  Array.from({ length: n }, (_, i) =>
    JSON.stringify({
      custom_id: `line-${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { messages: [{ role: "user", content: `Say ${i}` }], max_tokens: 8 }
    })).join("\n") + "\n"

// Each command is a process start (seconds on a loaded machine): generous time-outs.
describe("model-gateway batches", { timeout: 120_000 }, () => {
  it("submit: progress while it polls, then the results, one a line in submission order", async () => {
    h.openai.setDefault({ kind: "ok", latencyMs: 60 })
    const file = join(dir, "requests.jsonl")
    writeFileSync(file, lines(12))
    const { code, output } = await cli([
      "submit",
      file,
      "--endpoint",
      "/v1/chat/completions",
      "--model",
      "acme/gpt",
      "--interval-ms",
      "50"
    ])
    expect(output).toMatch(/submitted batch_[0-9a-f]{20}: 12 requests to \/v1\/chat\/completions/)
    expect(output).toMatch(/\[[#.]{24}\] \d+\/12 done, 0 failed · [\d.]+\/s · .* · (validating|in_progress)/)
    expect(output).toMatch(/\[#{24}\] 12\/12 done, 0 failed · [\d.]+\/s · done · completed/)
    expect(output).toMatch(/completed: 12 completed, 0 failed of 12; results in .*requests\.results\.jsonl; cost \$/)
    expect(code).toBe(0)
    const results = readFileSync(join(dir, "requests.results.jsonl"), "utf8").trim().split("\n").map((l) =>
      JSON.parse(l)
    )
    expect(results.map((r) => r.custom_id)).toEqual(Array.from({ length: 12 }, (_, i) => `line-${i}`))
    expect(results.every((r) => r.response.status_code === 200 && r.error === null)).toBe(true)
    h.openai.reset()
  })

  it("list, get (the results to a file), delete; cancel on an ended batch is refused", async () => {
    const file = join(dir, "small.jsonl")
    writeFileSync(file, lines(2))
    const submitted = await cli([
      "submit",
      file,
      "--model",
      "acme/gpt",
      "--interval-ms",
      "50",
      "--output",
      join(dir, "small.out")
    ])
    expect(submitted.code).toBe(0)
    const id = /submitted (batch_[0-9a-f]{20})/.exec(submitted.output)![1]
    const listed = await cli(["list", "--limit", "5"])
    expect(listed.code).toBe(0)
    expect(listed.output).toMatch(new RegExp(`${id}\\s+completed\\s+/v1/chat/completions\\s+acme/gpt\\s+2\\s+0\\s+2`))
    const json = await cli(["list", "--status", "completed", "--json"])
    expect(JSON.parse(json.output).data.some((b: any) => b.id === id)).toBe(true)
    const got = await cli(["get", id, "--output", join(dir, "got.jsonl")])
    expect(got.code).toBe(0)
    expect(JSON.parse(got.output)).toMatchObject({ id, status: "completed", request_counts: { total: 2 } })
    expect(readFileSync(join(dir, "got.jsonl"), "utf8").trim().split("\n")).toHaveLength(2)
    const cancelled = await cli(["cancel", id])
    expect(cancelled.code).toBe(1)
    expect(cancelled.output).toMatch(/409 a batch that is completed cannot take 'cancel'/)
    const deleted = await cli(["delete", id])
    expect(deleted.code).toBe(0)
    expect(deleted.output).toContain(`deleted ${id}`)
    const gone = await cli(["get", id])
    expect(gone.code).toBe(1)
    expect(gone.output).toMatch(/404 Batch '.*' not found/)
  })

  it("names the file and line of a bad request, and what the gateway refused", async () => {
    const file = join(dir, "bad.jsonl")
    writeFileSync(file, `${lines(2)}{not json\n`)
    const bad = await cli(["submit", file, "--model", "acme/gpt"])
    expect(bad.code).toBe(1)
    expect(bad.output).toMatch(/bad\.jsonl:3: not valid JSON/)
    writeFileSync(file, lines(2).replace("Say 1", "") + JSON.stringify({ custom_id: "line-0", body: {} }) + "\n")
    const refused = await cli(["submit", file, "--model", "acme/gpt"])
    expect(refused.code).toBe(1)
    expect(refused.output).toMatch(/POST \/batches: 400 requests\[2\]\.custom_id: "line-0" is already the custom_id/)
    const noKey = await cli(["list"], { GATEWAY_API_KEY: "" })
    expect(noKey.code).toBe(1)
    expect(noKey.output).toMatch(/401|GATEWAY_API_KEY/)
  })
})
