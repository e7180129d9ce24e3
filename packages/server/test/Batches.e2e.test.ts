/**
 * Batches end to end: a real gateway server with its worker, fake upstreams speaking the real wire formats. Every
 * endpoint kind runs from submission to results; the list pages and filters; delete and cancel follow their rules; the
 * limits hold at their exact boundaries; validation names the request's index and field.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { call, chatRequests, FAST_WORKER, getBatch, submit, usageRecords, waitFor } from "./BatchesHarness.js"
import type { Harness } from "./harness.js"
import { KEY, startHarness, TEAM_KEY } from "./harness.js"

let h: Harness

const BATCH_BODY_LIMIT = 64_000
const MAX_REQUESTS = 40
/** A key of its own workspace, limited to 3 requests a minute. */
const RATE_KEY = "mg-test-batch-rate"

beforeAll(async () => {
  h = await startHarness({
    server: { maxBodyBytes: 20_000 },
    batches: {
      ...FAST_WORKER,
      maxRequests: MAX_REQUESTS,
      maxBodyBytes: BATCH_BODY_LIMIT,
      priceFactor: "0.5",
      perBatchConcurrency: 4
    }
  })
})
afterAll(() => h.close())
beforeEach(() => h.reset())

const completed = (id: string) => waitFor(h, id, ["completed", "failed", "expired", "cancelled"])

describe("a batch from submission to results", () => {
  it("chat completions: 202 validating, then completed with one result per request, in order, at the batch price", async () => {
    const created = await submit(h, {
      endpoint: "/v1/chat/completions",
      model: "acme/gpt",
      completion_window: "24h",
      requests: chatRequests(6)
    }, { "http-referer": "https://batch.example", "x-title": "Batcher", "x-openrouter-categories": "cli" })
    expect(created.status).toBe(202)
    expect(created.headers.get("content-type")).toBe("application/json")
    const record = created.json
    expect(record).toMatchObject({
      object: "batch",
      endpoint: "/v1/chat/completions",
      model: "acme/gpt",
      completion_window: "24h",
      status: "validating",
      finalized_at: null,
      request_counts: { total: 6, completed: 0, failed: 0 },
      results: null,
      error: null,
      usage: null
    })
    expect(record.id).toMatch(/^batch_[0-9a-f]{20}$/)
    expect(Number.isInteger(record.created_at)).toBe(true)
    const done = await completed(record.id)
    expect(done.status).toBe("completed")
    expect(done.request_counts).toEqual({ total: 6, completed: 6, failed: 0 })
    expect(done.finalized_at).toBeGreaterThanOrEqual(done.created_at)
    expect(done.results.map((r: any) => r.custom_id)).toEqual(chatRequests(6).map((r) => r.custom_id))
    for (const result of done.results) {
      expect(result.id).toMatch(/^batch_req_/)
      expect(result.error).toBeNull()
      expect(result.response.status_code).toBe(200)
      expect(result.response.request_id).toMatch(/^req_[0-9a-f]{32}$/)
      expect(result.response.body.object).toBe("chat.completion")
      expect(result.response.body.model).toBe("acme/gpt")
    }
    // The upstream got each request once, with the batch's model as the endpoint's, and nothing of the gateway's own.
    const upstream = h.openai.requests.filter((r) => r.path === "/v1/chat/completions")
    expect(upstream).toHaveLength(6)
    expect(upstream.every((r) => r.body.model === "gpt-fake-1" && r.body.trace === undefined)).toBe(true)
    // Each request has the usage record of a live one, at half price, with the batch and the app.
    const records = (await usageRecords(h)).filter((r) => r.route === "BATCH /v1/chat/completions")
      .filter((r) => (r.metadata as any)?.batch_id === record.id)
    expect(records).toHaveLength(6)
    const live = await call(h, "POST", "/chat/completions", { model: "acme/gpt", ...chatRequests(1)[0].body })
    const liveCost = (await live.json() as any).usage.cost as number
    expect(records.every((r) => r.status === 200 && r.workspace === "default" && r.model === "acme/gpt")).toBe(true)
    expect(records.every((r) => r.appReferer === "https://batch.example" && r.appTitle === "Batcher")).toBe(true)
    expect(records.every((r) => r.appCategories === "cli")).toBe(true)
    expect(Number(records.find((r) => (r.metadata as any).batch_custom_id === "req-0")!.cost)).toBeCloseTo(
      liveCost / 2,
      12
    )
    const first = done.results[0].response.body.usage
    expect(done.usage.prompt_tokens).toBeGreaterThan(0)
    expect(done.usage.total_tokens).toBe(done.usage.prompt_tokens + done.usage.completion_tokens)
    expect(first.cost).toBeCloseTo(liveCost / 2, 12)
    expect(done.usage.cost).toBeCloseTo(
      done.results.reduce((sum: number, r: any) => sum + r.response.body.usage.cost, 0),
      12
    )
  })

  it("responses, embeddings and messages run through their own executors", async () => {
    const kinds = [
      { endpoint: "/v1/responses", model: "acme/gpt", body: { input: "Hello" }, object: "response" },
      { endpoint: "/v1/embeddings", model: "acme/gpt", body: { input: ["a", "b"] }, object: "list" },
      {
        endpoint: "/v1/messages",
        model: "anthro/claude",
        body: { max_tokens: 32, messages: [{ role: "user", content: "Hi" }] },
        object: undefined
      }
    ]
    const ids = await Promise.all(kinds.map(async (kind) => {
      const created = await submit(h, {
        endpoint: kind.endpoint,
        model: kind.model,
        requests: [{ custom_id: "a", body: kind.body }, { custom_id: "b", body: { ...kind.body, model: kind.model } }]
      })
      expect(created.status).toBe(202)
      return created.json.id as string
    }))
    for (const [i, id] of ids.entries()) {
      const done = await completed(id)
      expect(done.status).toBe("completed")
      expect(done.request_counts).toEqual({ total: 2, completed: 2, failed: 0 })
      const body = done.results[0].response.body
      if (kinds[i].object !== undefined) expect(body.object).toBe(kinds[i].object)
      else expect(body).toMatchObject({ type: "message", role: "assistant", model: "anthro/claude" })
    }
    expect(h.openai.requests.filter((r) => r.path === "/v1/responses")).toHaveLength(2)
    expect(h.openai.requests.filter((r) => r.path === "/v1/embeddings")).toHaveLength(2)
    expect(h.anthropic.requests.filter((r) => r.path === "/v1/messages")).toHaveLength(2)
  })

  it("retries what may pass, not what cannot; a batch whose every request failed is completed", async () => {
    h.openai.script({ kind: "status", status: 429 }, { kind: "status", status: 503 })
    const retried = await submit(h, { endpoint: "/v1/chat/completions", model: "acme/gpt", requests: chatRequests(1) })
    const ok = await completed(retried.json.id)
    expect(ok.request_counts).toEqual({ total: 1, completed: 1, failed: 0 })
    expect(h.openai.requests).toHaveLength(3)
    h.reset()
    h.openai.setDefault({ kind: "status", status: 400 })
    const refused = await submit(h, { endpoint: "/v1/chat/completions", model: "acme/gpt", requests: chatRequests(3) })
    const done = await completed(refused.json.id)
    expect(done.status).toBe("completed")
    expect(done.request_counts).toEqual({ total: 3, completed: 0, failed: 3 })
    expect(h.openai.requests).toHaveLength(3)
    expect(done.results[0]).toMatchObject({
      custom_id: "req-0",
      response: null,
      error: { type: "invalid_request_error" }
    })
    expect(done.results[0].error).toHaveProperty("param")
    // the provider refusing the gateway's own credentials: a configuration to fix, not retried either
    h.reset()
    h.openai.setDefault({ kind: "status", status: 401 })
    const misconfigured = await submit(h, {
      endpoint: "/v1/chat/completions",
      model: "acme/gpt",
      requests: chatRequests(2)
    })
    const failed = await completed(misconfigured.json.id)
    expect(failed.request_counts).toEqual({ total: 2, completed: 0, failed: 2 })
    expect(h.openai.requests).toHaveLength(2)
    expect(failed.results[0].error.message).toContain("the provider refused the gateway's credentials")
  })
})

describe("the submitting key's limits", () => {
  it("hold for its batch's requests as for its live ones, which wait for the limit rather than fail", async () => {
    // a gateway of its own, whose worker does not retry failures: a refusal by the limits is waited out all the same
    const limited = await startHarness({
      batches: { ...FAST_WORKER, maxRetries: 0, retryMaxMs: 50 },
      keys: [{ key: RATE_KEY, workspace: "batch-rate", limits: { requestsPerMinute: 3 } }]
    })
    try {
      const created = await submit(
        limited,
        { endpoint: "/v1/chat/completions", model: "acme/gpt", requests: chatRequests(6) },
        {},
        RATE_KEY
      )
      expect(created.status).toBe(202)
      // past its 3 requests a minute, the rest wait: none failed, none sent
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      const waiting = await getBatch(limited, created.json.id, RATE_KEY)
      expect(waiting.json.status).toBe("in_progress")
      expect(waiting.json.request_counts).toEqual({ total: 6, completed: 3, failed: 0 })
      expect(limited.openai.requests).toHaveLength(3)
      // a minute on, the limit lets the rest through
      limited.clock.offset += 61_000
      const done = await waitFor(limited, created.json.id, ["completed", "failed"], 15_000, RATE_KEY)
      expect(done.request_counts).toEqual({ total: 6, completed: 6, failed: 0 })
      expect(limited.openai.requests).toHaveLength(6)
    } finally {
      await limited.close()
    }
  })

  it("fail a request the limit would let through only after the batch's window ends", async () => {
    const limited = await startHarness({
      batches: { ...FAST_WORKER, maxRetries: 0, retryMaxMs: 50 },
      keys: [{ key: RATE_KEY, workspace: "batch-rate", limits: { requestsPerMinute: 1 } }]
    })
    try {
      const created = await submit(
        limited,
        { endpoint: "/v1/chat/completions", model: "acme/gpt", requests: chatRequests(3) },
        {},
        RATE_KEY
      )
      await new Promise((resolve) => setTimeout(resolve, 500))
      expect(limited.openai.requests).toHaveLength(1)
      // the window's last 30 s: one more request gets through, and the limit's next minute would outlast the window
      limited.clock.offset += 24 * 60 * 60_000 - 30_000
      const done = await waitFor(limited, created.json.id, ["completed", "failed", "expired"], 15_000, RATE_KEY)
      expect(done.request_counts).toEqual({ total: 3, completed: 2, failed: 1 })
      expect(done.results.find((r: any) => r.error !== null).error.type).toBe("rate_limit_error")
      expect(limited.openai.requests).toHaveLength(2)
    } finally {
      await limited.close()
    }
  })
})

describe("submission is validated, naming the request's index and field", () => {
  const base = { endpoint: "/v1/chat/completions", model: "acme/gpt" }
  const cases: Array<[string, unknown, number, RegExp]> = [
    [
      "a model of another name",
      {
        ...base,
        requests: [...chatRequests(2), { custom_id: "x", body: { ...chatRequests(1)[0].body, model: "anthro/claude" } }]
      },
      400,
      /^requests\[2\]\.body\.model: must be the batch's model "acme\/gpt" or absent/
    ],
    [
      "a duplicate custom_id",
      { ...base, requests: [...chatRequests(3), chatRequests(2)[1]] },
      400,
      /^requests\[3\]\.custom_id: "req-1" is already the custom_id of requests\[1\]/
    ],
    [
      "a missing custom_id",
      { ...base, requests: [{ body: chatRequests(1)[0].body }] },
      400,
      /^requests\[0\]\.custom_id: is missing/
    ],
    [
      "a body without messages",
      { ...base, requests: [...chatRequests(4), { custom_id: "x", body: {} }] },
      400,
      /^requests\[4\]\.body\.messages: .*\(custom_id "x"\)$/
    ],
    [
      "a bad message",
      {
        ...base,
        requests: [{ custom_id: "x", body: { messages: [{ role: "robot", content: "hi" }] } }]
      },
      400,
      /^requests\[0\]\.body\.messages\[0\]\.role: /
    ],
    [
      "a streamed request",
      { ...base, requests: [{ custom_id: "x", body: { ...chatRequests(1)[0].body, stream: true } }] },
      400,
      /^requests\[0\]\.body\.stream: batch requests are not streamed/
    ],
    [
      "responses without input",
      { ...base, endpoint: "/v1/responses", requests: [{ custom_id: "x", body: {} }] },
      400,
      /^requests\[0\]\.body\.input: is missing/
    ],
    [
      "a messages body with a bad text block",
      {
        endpoint: "/v1/messages",
        model: "anthro/claude",
        requests: [
          { custom_id: "ok", body: { max_tokens: 5, messages: [{ role: "user", content: "hi" }] } },
          {
            custom_id: "x",
            body: { max_tokens: 5, messages: [{ role: "user", content: [{ type: "text", text: 42 }] }] }
          }
        ]
      },
      400,
      /^requests\[1\]\.body\.messages\[0\]\.content\[0\]\.text: .*\(custom_id "x"\)$/
    ],
    [
      "another provider key",
      { ...base, provider: { only: ["acme"], sort: "price" }, requests: chatRequests(1) },
      400,
      /^provider\.sort: not supported in batches/
    ],
    [
      "a provider that serves none of the model",
      { ...base, provider: { only: ["anthro"] }, requests: chatRequests(1) },
      400,
      /^provider\.only: no endpoint of 'acme\/gpt' is served by anthro/
    ],
    [
      "another completion window",
      { ...base, completion_window: "48h", requests: chatRequests(1) },
      400,
      /^completion_window: Expected "24h", actual "48h"/
    ],
    [
      "an unknown endpoint",
      { ...base, endpoint: "/v1/audio/speech", requests: chatRequests(1) },
      400,
      /^endpoint: Expected "\/v1\/chat\/completions" \| /
    ],
    ["no requests", { ...base, requests: [] }, 400, /^requests: at least 1 request is required/],
    [
      "an unknown model",
      { ...base, model: "nope/nothing", requests: chatRequests(1) },
      404,
      /^model: 'nope\/nothing' is not a model of this gateway/
    ],
    ["not JSON", "{", 400, /^Malformed JSON/]
  ]
  for (const [what, body, status, message] of cases) {
    it(`${what}: ${status}`, async () => {
      const response = await submit(h, body)
      expect(response.status).toBe(status)
      expect(response.json.error.code).toBe(status)
      expect(response.json.error.message).toMatch(message)
    })
  }

  it("provider only and allow_fallbacks are applied to every request", async () => {
    const created = await submit(h, {
      ...base,
      provider: { only: ["ACME"], allow_fallbacks: false },
      requests: [{ custom_id: "x", body: { ...chatRequests(1)[0].body, provider: { only: ["other"], sort: "price" } } }]
    })
    expect(created.status).toBe(202)
    expect((await completed(created.json.id)).request_counts.completed).toBe(1)
  })
})

describe("limits, at their exact boundaries", () => {
  /** A submission whose JSON is exactly `bytes` long. */
  const sized = (bytes: number) => {
    const body = {
      endpoint: "/v1/chat/completions",
      model: "acme/gpt",
      requests: [{ custom_id: "pad", body: { messages: [{ role: "user", content: "" }], max_tokens: 4 } }]
    }
    const text = JSON.stringify(body)
    body.requests[0].body.messages[0].content = "x".repeat(bytes - text.length)
    const out = JSON.stringify(body)
    expect(Buffer.byteLength(out)).toBe(bytes)
    return out
  }

  it(`accepts a body of exactly the batches' limit (above the gateway's own), and answers 413 one byte past it`, async () => {
    expect((await submit(h, sized(BATCH_BODY_LIMIT))).status).toBe(202)
    const over = await submit(h, sized(BATCH_BODY_LIMIT + 1))
    expect(over.status).toBe(413)
    expect(over.json.error).toEqual({
      code: 413,
      message: `Request body exceeds the limit of ${BATCH_BODY_LIMIT} bytes`
    })
    // Without a declared length too (chunked).
    const chunked = (text: string) =>
      fetch(`${h.url}/v1/batches`, {
        method: "POST",
        headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        body: new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode(text))
            controller.close()
          }
        }),
        duplex: "half"
      } as RequestInit)
    expect((await chunked(sized(BATCH_BODY_LIMIT))).status).toBe(202)
    expect((await chunked(sized(BATCH_BODY_LIMIT + 1))).status).toBe(413)
    // Other routes keep the gateway's own limit.
    const messages = await call(h, "POST", "/chat/completions", sized(30_000))
    expect(messages.status).toBe(413)
  })

  it(`accepts exactly ${MAX_REQUESTS} requests, and answers 413 for one more`, async () => {
    const base = { endpoint: "/v1/embeddings", model: "acme/gpt" }
    const requests = (n: number) => Array.from({ length: n }, (_, i) => ({ custom_id: `e${i}`, body: { input: "x" } }))
    const ok = await submit(h, { ...base, requests: requests(MAX_REQUESTS) })
    expect(ok.status).toBe(202)
    const over = await submit(h, { ...base, requests: requests(MAX_REQUESTS + 1) })
    expect(over.status).toBe(413)
    expect(over.json.error.message).toBe(
      `requests: at most ${MAX_REQUESTS} requests per batch, got ${MAX_REQUESTS + 1}`
    )
    await completed(ok.json.id)
  })
})

describe("listing", () => {
  it("pages newest first with every filter; bad parameters are 400", async () => {
    const workspaceKey = TEAM_KEY
    const made: Array<any> = []
    for (let i = 0; i < 5; i++) {
      made.push(
        (await submit(
          h,
          { endpoint: "/v1/embeddings", model: "acme/gpt", requests: [{ custom_id: "a", body: { input: "x" } }] },
          {},
          workspaceKey
        )).json
      )
    }
    // A batch in a later second than the others, for the strict time filters.
    await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 10))
    made.push(
      (await submit(
        h,
        { endpoint: "/v1/embeddings", model: "acme/gpt", requests: [{ custom_id: "a", body: { input: "x" } }] },
        {},
        workspaceKey
      )).json
    )
    for (const batch of made) await waitFor(h, batch.id, ["completed"], 15_000, workspaceKey)
    const list = async (query: string) => {
      const response = await call(h, "GET", `/batches${query}`, undefined, {}, workspaceKey)
      return { status: response.status, json: await response.json() as any }
    }
    const ids = made.map((b) => b.id).reverse()
    const first = await list("?limit=2")
    expect(first.status).toBe(200)
    expect(first.json).toEqual({
      object: "list",
      data: first.json.data,
      first_id: ids[0],
      last_id: ids[1],
      has_more: true
    })
    expect(first.json.data.map((b: any) => b.id)).toEqual(ids.slice(0, 2))
    expect(first.json.data.every((b: any) => b.results === null)).toBe(true)
    const second = await list(`?limit=2&after=${first.json.last_id}`)
    expect(second.json.data.map((b: any) => b.id)).toEqual(ids.slice(2, 4))
    const rest = await list(`?limit=100&after=${second.json.last_id}`)
    expect(rest.json.data.map((b: any) => b.id)).toEqual(ids.slice(4))
    expect(rest.json.has_more).toBe(false)
    expect((await list("")).json.data.map((b: any) => b.id)).toEqual(ids)
    // The management key's workspace sees none of them.
    const other = await call(h, "GET", "/batches?limit=100", undefined, {}, KEY)
    expect((await other.json() as any).data.some((b: any) => ids.includes(b.id))).toBe(false)
    // Status: repeated means any of them.
    await call(h, "POST", `/batches/${made[1].id}/cancel`, undefined, {}, workspaceKey)
    const statuses = new Map<string, string>()
    for (const b of (await list("?limit=100")).json.data) statuses.set(b.id, b.status)
    const completedIds = ids.filter((id) => statuses.get(id) === "completed")
    expect((await list("?status=completed")).json.data.map((b: any) => b.id)).toEqual(completedIds)
    expect((await list("?status=completed&status=cancelled&status=cancelling")).json.data.map((b: any) => b.id))
      .toEqual(ids.filter((id) => ["completed", "cancelled", "cancelling"].includes(statuses.get(id)!)))
    expect((await list("?status=failed")).json).toEqual({
      object: "list",
      data: [],
      first_id: null,
      last_id: null,
      has_more: false
    })
    // created_after / created_before: strict, in unix seconds.
    const late = made[5]
    const early = made[4]
    expect(late.created_at).toBeGreaterThan(early.created_at)
    const after = (await list(`?created_after=${early.created_at}`)).json.data.map((b: any) => b.id)
    expect(after).toEqual([late.id])
    expect((await list(`?created_after=${late.created_at}`)).json.data).toEqual([])
    const before = (await list(`?created_before=${late.created_at}`)).json.data.map((b: any) => b.id)
    expect(before).toEqual(ids.slice(1).filter((id) => made.find((b) => b.id === id).created_at < late.created_at))
    expect(before).not.toContain(late.id)
    expect(
      (await list(`?created_after=${early.created_at - 1}&created_before=${late.created_at}`)).json.data
        .map((b: any) => b.id)
    ).toEqual(made.slice(0, 5).filter((b) => b.created_at === early.created_at).map((b) => b.id).reverse())
    for (
      const bad of [
        "?limit=0",
        "?limit=101",
        "?limit=abc",
        "?limit=1.5",
        "?status=bogus",
        "?created_after=-1",
        "?created_before=soon",
        "?after=a&after=b"
      ]
    ) {
      const response = await list(bad)
      expect(response.status, bad).toBe(400)
      expect(response.json.error.code).toBe(400)
    }
    expect((await list("?limit=100")).status).toBe(200)
    expect((await list("?limit=1")).json.data).toHaveLength(1)
  })
})

describe("delete, cancel, and other workspaces", () => {
  it("deletes only terminal batches (409 in progress), keeps usage, and hides batches from other workspaces", async () => {
    h.openai.setDefault({ kind: "ok", latencyMs: 400 })
    const slow = await submit(h, { endpoint: "/v1/chat/completions", model: "acme/gpt", requests: chatRequests(2) })
    const id = slow.json.id
    const conflict = await call(h, "DELETE", `/batches/${id}`)
    expect(conflict.status).toBe(409)
    expect((await conflict.json() as any).error).toMatchObject({
      code: 409,
      metadata: { reason: "batch_in_progress", retryable: false }
    })
    for (
      const [method, path] of [["GET", `/batches/${id}`], ["DELETE", `/batches/${id}`], [
        "POST",
        `/batches/${id}/cancel`
      ]]
    ) {
      const response = await call(h, method, path, undefined, {}, TEAM_KEY)
      expect(response.status).toBe(404)
      expect(await response.json()).toEqual({
        error: { code: 404, message: `Batch '${id}' not found`, metadata: { reason: "not_found", retryable: false } }
      })
    }
    await completed(id)
    const deleted = await call(h, "DELETE", `/batches/${id}`)
    expect(deleted.status).toBe(200)
    const record = await deleted.json() as any
    expect(record).toMatchObject({ id, object: "batch", deleted: true, deletion: { status: "deleted" } })
    expect((await getBatch(h, id)).status).toBe(404)
    expect((await call(h, "DELETE", `/batches/${id}`)).status).toBe(404)
    const usage = (await usageRecords(h)).filter((r) => (r.metadata as any)?.batch_id === id)
    expect(usage).toHaveLength(2)
  })

  it("cancel stops new requests, lets running ones finish, then the batch is cancelled with partial results", async () => {
    h.openai.setDefault({ kind: "ok", latencyMs: 300 })
    const created = await submit(h, { endpoint: "/v1/chat/completions", model: "acme/gpt", requests: chatRequests(20) })
    const id = created.json.id
    await waitFor(h, id, ["in_progress"])
    const deadline = Date.now() + 5000
    while (h.openai.inFlight() === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
    const cancelled = await call(h, "POST", `/batches/${id}/cancel`)
    expect(cancelled.status).toBe(200)
    expect((await cancelled.json() as any).status).toBe("cancelling")
    const again = await call(h, "POST", `/batches/${id}/cancel`)
    expect((await again.json() as any).status).toMatch(/^cancell(ing|ed)$/)
    const done = await waitFor(h, id, ["cancelled"])
    expect(done.request_counts.completed).toBeGreaterThan(0)
    expect(done.request_counts.completed).toBeLessThan(20)
    expect(done.results).toHaveLength(20)
    const ran = done.results.filter((r: any) => r.response !== null)
    expect(ran).toHaveLength(done.request_counts.completed)
    const skipped = done.results.filter((r: any) => r.response === null)
    expect(skipped.every((r: any) => r.error.type === "batch_cancelled")).toBe(true)
    expect(h.openai.requests).toHaveLength(done.request_counts.completed)
    const terminal = await call(h, "POST", `/batches/${id}/cancel`)
    expect(terminal.status).toBe(409)
    expect((await terminal.json() as any).error.metadata).toEqual({ reason: "invalid_state", retryable: false })
  })
})

describe("expiry", () => {
  it("a batch whose window ends before its requests ran is expired, with the results of those that did", async () => {
    const short = await startHarness({
      batches: { ...FAST_WORKER, completionWindowSeconds: 1, perBatchConcurrency: 1 }
    })
    try {
      short.openai.setDefault({ kind: "ok", latencyMs: 300 })
      const created = await submit(short, {
        endpoint: "/v1/chat/completions",
        model: "acme/gpt",
        requests: chatRequests(10)
      })
      expect(created.json.expires_at).toBe(created.json.created_at + 1)
      const done = await waitFor(short, created.json.id, ["expired", "completed"], 10_000)
      expect(done.status).toBe("expired")
      expect(done.request_counts.completed).toBeGreaterThan(0)
      expect(done.request_counts.completed).toBeLessThan(10)
      expect(done.results.filter((r: any) => r.error?.type === "batch_expired")).toHaveLength(
        10 - done.request_counts.completed
      )
      expect((await call(short, "DELETE", `/batches/${created.json.id}`)).status).toBe(200)
    } finally {
      await short.close()
    }
  })
})

describe("on SQLite", () => {
  it("runs a batch from submission to results", async () => {
    const sqlite = await startHarness({ storage: "sqlite::memory:", batches: FAST_WORKER })
    try {
      const created = await submit(sqlite, {
        endpoint: "/v1/chat/completions",
        model: "acme/gpt",
        requests: chatRequests(30)
      })
      const done = await waitFor(sqlite, created.json.id, ["completed"])
      expect(done.request_counts).toEqual({ total: 30, completed: 30, failed: 0 })
      expect(done.results.map((r: any) => r.custom_id)).toEqual(chatRequests(30).map((r) => r.custom_id))
      expect(done.usage.cost).toBeGreaterThan(0)
    } finally {
      await sqlite.close()
    }
  })
})
