/**
 * Interns end to end, with `@openrouter/sdk` against the real server (its zod validation of every answer included):
 * the lifecycle (create with an Idempotency-Key, list with filters and a cursor, get, update, provision to running,
 * chat streamed, suspend, provision again, delete), the chat's sessions as the upstream sees them, and workspace
 * isolation (another workspace's key, a key outside the programme: 404 on every route).
 */
import { UsageLog } from "@model-gateway/core"
import { OpenRouter } from "@openrouter/sdk"
import { InternLifecycleError } from "@openrouter/sdk/models/errors"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { InternsHarness } from "./InternsHarness.js"
import {
  ADMIN_KEY,
  call,
  eventually,
  MEMBER_KEY,
  OTHER_KEY,
  OUTSIDER_KEY,
  startInternsHarness
} from "./InternsHarness.js"

let h: InternsHarness
let sdk: OpenRouter
const sdkFor = (apiKey: string) =>
  new OpenRouter({ serverURL: `${h.url}/v1`, apiKey, retryConfig: { strategy: "none" } })

beforeAll(async () => {
  h = await startInternsHarness()
  sdk = sdkFor(MEMBER_KEY)
})
afterAll(() => h.close())

const v1 = (path: string) => `${h.url}/v1${path}`

/** Reads a streamed intern chat: the text, the last chunk (session and usage), every chunk. */
const chatOf = async (
  client: OpenRouter,
  internId: string,
  content: string,
  sessionId?: string
) => {
  const response = await client.interns.chat({
    internId,
    internChatCompletionRequest: {
      messages: [{ role: "user", content }],
      stream: true,
      ...(sessionId === undefined ? {} : { sessionId })
    }
  })
  const chunks: Array<any> = []
  let text = ""
  for await (const chunk of response.result as AsyncIterable<any>) {
    chunks.push(chunk)
    text += chunk.choices[0]?.delta?.content ?? ""
  }
  return { text, last: chunks.at(-1), chunks }
}

const running = (id: string) =>
  eventually("provisioning", () => sdk.interns.getIntern({ internId: id }), (i) => i.status !== "provisioning")

describe("the intern lifecycle through @openrouter/sdk", () => {
  it("creates, lists, reads, updates, provisions, chats, suspends, provisions again and deletes", async () => {
    const request = { name: "Ada", description: "reviews pull requests", instructions: "You are Ada. Be brief." }
    const created = await sdk.interns.createIntern({ idempotencyKey: "create-ada-1", createInternRequest: request })
    expect(created).toMatchObject({
      name: "Ada",
      description: "reviews pull requests",
      instructions: "You are Ada. Be brief.",
      model: "anthro/claude",
      status: "queued",
      progress: null,
      hostname: null,
      workspaceId: "acme",
      attachedVaultId: null,
      vaultId: null,
      lastFailureMessage: null
    })
    expect(created.id).toMatch(/^intern_[0-9a-f]{20}$/)
    expect(new Date(created.createdAt).getTime()).toBeGreaterThan(Date.now() - 60_000)

    // The same key and request: the same intern, 200 (201 the first time).
    const replayed = await sdk.interns.createIntern({ idempotencyKey: "create-ada-1", createInternRequest: request })
    expect(replayed.id).toBe(created.id)
    const raw = await call(v1("/interns"), {
      method: "POST",
      key: MEMBER_KEY,
      body: request,
      headers: { "idempotency-key": "create-ada-1" }
    })
    expect([raw.status, raw.body.id]).toEqual([200, created.id])
    const fresh = await call(v1("/interns"), { method: "POST", key: MEMBER_KEY, body: { name: "Tmp" } })
    expect(fresh.status).toBe(201)
    const reused = await call(v1("/interns"), {
      method: "POST",
      key: MEMBER_KEY,
      body: { ...request, name: "Not Ada" },
      headers: { "idempotency-key": "create-ada-1" }
    })
    expect([reused.status, reused.body.error.metadata]).toEqual([
      409,
      { reason: "idempotency_key_reused", retryable: false }
    ])

    const listed = await sdk.interns.listInterns({ status: ["queued"] })
    expect(listed.data.map((i) => i.id)).toEqual([fresh.body.id, created.id])
    expect(listed.hasMore).toBe(false)

    const updated = await sdk.interns.updateIntern({
      internId: created.id,
      updateInternRequest: {
        name: "Ada L.",
        instructions: "You are Ada Lovelace. Answer in one line.",
        model: "anthro/claude"
      }
    })
    expect(updated).toMatchObject({ name: "Ada L.", instructions: "You are Ada Lovelace. Answer in one line." })
    expect(new Date(updated.updatedAt).getTime()).toBeGreaterThanOrEqual(new Date(created.updatedAt).getTime())

    expect(await sdk.interns.provisionIntern({ internId: created.id })).toEqual({ provisioning: true })
    const up = await running(created.id)
    expect(up).toMatchObject({ status: "running", progress: null, lastFailureMessage: null })
    expect(up.hostname).toMatch(/^127\.0\.0\.1:\d+$/)
    // Provisioning a running intern is refused.
    const again = await call(v1(`/interns/${created.id}/provision`), { method: "POST", key: MEMBER_KEY })
    expect([again.status, again.body.error.metadata.reason]).toEqual([409, "invalid_state"])

    h.anthropic.reset()
    const first = await chatOf(sdk, created.id, "What is the Analytical Engine?")
    expect(first.text).toBe("Echo: What is the Analytical Engine?")
    expect(first.chunks[0].choices[0].delta).toEqual({ role: "assistant", content: "" })
    expect(first.chunks.at(-2).choices[0].finishReason).toBe("stop")
    expect(first.last.choices).toEqual([])
    expect(first.last.sessionId).toMatch(/^sess_/)
    expect(first.last.usage.completionTokens).toBeGreaterThan(0)
    expect(first.last.usage.totalTokens).toBe(first.last.usage.promptTokens + first.last.usage.completionTokens)
    expect(first.last.model).toBe("anthro/claude")
    const sent = h.anthropic.requests.at(-1)!.body
    expect(sent).toMatchObject({
      model: "claude-fake-1",
      stream: true,
      system: "You are Ada Lovelace. Answer in one line.",
      messages: [{ role: "user", content: "What is the Analytical Engine?" }]
    })

    // The session carries on: the upstream sees the earlier turn.
    const second = await chatOf(sdk, created.id, "And who built it?", first.last.sessionId)
    expect(second.text).toBe("Echo: And who built it?")
    expect(second.last.sessionId).toBe(first.last.sessionId)
    expect(h.anthropic.requests.at(-1)!.body.messages).toEqual([
      { role: "user", content: "What is the Analytical Engine?" },
      { role: "assistant", content: "Echo: What is the Analytical Engine?" },
      { role: "user", content: "And who built it?" }
    ])

    expect(await sdk.interns.suspendIntern({ internId: created.id })).toEqual({ suspended: true })
    expect(await sdk.interns.getIntern({ internId: created.id })).toMatchObject({ status: "stopped", hostname: null })
    const stopped = await call(v1(`/interns/${created.id}/chat/completions`), {
      method: "POST",
      key: MEMBER_KEY,
      body: { messages: [{ role: "user", content: "still there?" }], stream: true }
    })
    expect([stopped.status, stopped.body.error.metadata]).toEqual([409, {
      reason: "intern_not_ready",
      retryable: false
    }])
    const suspendedTwice = await call(v1(`/interns/${created.id}/suspend`), { method: "POST", key: MEMBER_KEY })
    expect([suspendedTwice.status, suspendedTwice.body.error.metadata.reason]).toEqual([409, "invalid_state"])

    expect(await sdk.interns.provisionIntern({ internId: created.id })).toEqual({ provisioning: true })
    expect((await running(created.id)).status).toBe("running")
    expect((await chatOf(sdk, created.id, "Back?")).text).toBe("Echo: Back?")

    expect(await sdk.interns.deleteIntern({ internId: created.id, deleteInternRequest: {} })).toEqual({
      deleting: true
    })
    await eventually(
      "deletion",
      () => call(v1(`/interns/${created.id}`), { key: MEMBER_KEY }),
      (answer) => answer.status === 404
    )
    const gone = await sdk.interns.getIntern({ internId: created.id }).catch((e) => e)
    expect(gone).toBeInstanceOf(InternLifecycleError)
    expect(gone.error).toMatchObject({ code: 404, metadata: { reason: "not_found", retryable: false } })
    expect((await sdk.interns.listInterns()).data.map((i) => i.id)).not.toContain(created.id)
  })

  it("pages the list newest first with a cursor, filtered by status", async () => {
    const client = sdkFor(ADMIN_KEY)
    const made: Array<string> = []
    for (const name of ["p1", "p2", "p3", "p4", "p5"]) {
      made.push((await client.interns.createIntern({ createInternRequest: { name } })).id)
    }
    await client.interns.provisionIntern({ internId: made[1] })
    await running(made[1])
    const ids: Array<string> = []
    let cursor: string | undefined
    for (;;) {
      const page = await client.interns.listInterns({ status: ["queued"], limit: 2, startingAfter: cursor })
      ids.push(...page.data.map((i) => i.id))
      expect(page.data.length).toBeLessThanOrEqual(2)
      if (!page.hasMore) {
        expect(page.nextCursor).toBeUndefined()
        break
      }
      cursor = page.nextCursor
      expect(cursor).toBe(page.data.at(-1)!.id)
    }
    const queued = [made[4], made[3], made[2], made[0]]
    expect(ids.filter((id) => made.includes(id))).toEqual(queued)
    const both = await client.interns.listInterns({ status: ["queued", "running"], limit: 100 })
    expect(both.data.map((i) => i.id).filter((id) => made.includes(id))).toEqual([...made].reverse())
    const bad = await call(v1("/interns?status=sleeping"), { key: ADMIN_KEY })
    expect([bad.status, bad.body.error.message]).toEqual([
      400,
      "status: 'sleeping' is not a status; expected a comma-separated list of queued, provisioning, running, failed, stopped, destroying, destroy_failed"
    ])
    expect((await call(v1("/interns?limit=101"), { key: ADMIN_KEY })).status).toBe(400)
    const own = await client.interns.listInterns({ workspaceId: "acme", limit: 1 })
    expect(own.data).toHaveLength(1)
    await client.interns.suspendIntern({ internId: made[1] })
  })

  it("refuses bad bodies with 400 naming the field", async () => {
    const noName = await call(v1("/interns"), { method: "POST", key: MEMBER_KEY, body: { description: "x" } })
    expect([noName.status, noName.body.error.message]).toEqual([400, "name: is missing"])
    const unknownModel = await call(v1("/interns"), {
      method: "POST",
      key: MEMBER_KEY,
      body: { name: "x", model: "nobody/nothing" }
    })
    expect([unknownModel.status, unknownModel.body.error.message]).toEqual([
      400,
      "model: 'nobody/nothing' is not a model of this gateway"
    ])
  })
})

describe("workspace isolation", () => {
  it("hides an intern from another workspace's key and from keys outside the programme: 404 on every route", async () => {
    const mine = await sdk.interns.createIntern({ createInternRequest: { name: "Private", provision: true } })
    await running(mine.id)
    const routes: ReadonlyArray<readonly [string, string, unknown?]> = [
      ["GET", `/interns/${mine.id}`],
      ["PATCH", `/interns/${mine.id}`, { name: "stolen" }],
      ["POST", `/interns/${mine.id}/provision`],
      ["POST", `/interns/${mine.id}/suspend`],
      ["GET", `/interns/${mine.id}/daemon-access`],
      ["POST", `/interns/${mine.id}/chat/completions`, { messages: [{ role: "user", content: "hi" }], stream: true }],
      ["DELETE", `/interns/${mine.id}`, { acknowledge_workspace_loss: false }]
    ]
    for (const key of [OTHER_KEY, OUTSIDER_KEY]) {
      for (const [method, path, body] of routes) {
        const answer = await call(v1(path), { method, key, body })
        expect([key, method, path, answer.status, answer.body.error?.metadata ?? answer.body]).toEqual([
          key,
          method,
          path,
          404,
          { reason: "not_found", retryable: false }
        ])
      }
    }
    const others = await sdkFor(OTHER_KEY).interns.listInterns()
    expect(others.data.map((i) => i.id)).not.toContain(mine.id)
    const named = await call(v1("/interns?workspace_id=acme"), { key: OTHER_KEY })
    expect(named.status).toBe(404)
    // Outside the programme even listing and creating are 404.
    for (const [method, body] of [["GET", undefined], ["POST", { name: "x" }]] as const) {
      const answer = await call(v1("/interns"), { method, key: OUTSIDER_KEY, body })
      expect([answer.status, answer.body.error.metadata.reason]).toEqual([404, "not_found"])
    }
    // Still there, untouched, for its own workspace.
    expect(await sdk.interns.getIntern({ internId: mine.id })).toMatchObject({ name: "Private", status: "running" })
    await sdk.interns.suspendIntern({ internId: mine.id })
  })
})

describe("usage records", () => {
  it("leaves exactly one record per intern request, refused ones too, the chat's by the messages use case", async () => {
    const intern = await sdk.interns.createIntern({ createInternRequest: { name: "Counted", provision: true } })
    await running(intern.id)
    const answers = [
      await call(v1("/interns"), { key: MEMBER_KEY }),
      await call(v1("/interns/intern_00000000000000000000"), { key: MEMBER_KEY }),
      await call(v1(`/interns/${intern.id}/provision`), { method: "POST", key: MEMBER_KEY }),
      await call(v1(`/interns/${intern.id}/chat/completions`), {
        method: "POST",
        key: MEMBER_KEY,
        body: { messages: [{ role: "user", content: "counted?" }], stream: true }
      }),
      await call(v1(`/interns/${intern.id}/chat/completions`), {
        method: "POST",
        key: MEMBER_KEY,
        body: { messages: [{ role: "tool", content: "x" }] }
      })
    ]
    expect(answers.map((a) => a.status)).toEqual([200, 404, 409, 200, 400])
    const records = await h.gateway.gateway.runtime.runPromise(
      Effect.flatMap(
        UsageLog.UsageLog,
        (log) => Effect.zipRight(log.flush, log.list({ workspace: "acme", limit: 1000 }))
      )
    )
    const of = (answer: (typeof answers)[number]) => records.filter((r) => r.requestId === answer.headers["request-id"])
    expect(answers.map((a) => of(a).map((r) => [r.route, r.status, r.errorType, r.model]))).toEqual([
      [["GET /v1/interns", 200, null, null]],
      [["GET /v1/interns/{internId}", 404, "not_found_error", null]],
      [["POST /v1/interns/{internId}/provision", 409, "invalid_request_error", null]],
      [["POST /v1/interns/{internId}/chat/completions", 200, null, "anthro/claude"]],
      [["POST /v1/interns/{internId}/chat/completions", 400, "invalid_request_error", null]]
    ])
    await sdk.interns.suspendIntern({ internId: intern.id })
  })
})
