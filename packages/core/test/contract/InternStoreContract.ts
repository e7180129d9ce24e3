/**
 * The contract of the `InternStore` port, run against every adapter (memory, SQLite, PostgreSQL): each adapter package
 * calls `internStoreContract` with its layer. Tests use workspaces and interns of their own, so the layer is shared by
 * the whole suite.
 */
import { assert, describe, layer as layerTest } from "@effect/vitest"
import type { Intern } from "@model-gateway/core"
import { InternStore } from "@model-gateway/core"
import type { Layer } from "effect"
import { Effect, Option } from "effect"

const unique = (prefix: string) => `${prefix}-${globalThis.crypto.randomUUID()}`

let sequence = 0

/** An intern id as the service makes them: creation time, then a sequence. */
export const internId = (ms: number) =>
  `intern_${ms.toString(16).padStart(12, "0")}${(sequence++).toString(16).padStart(8, "0")}`

/** An intern with every field set; override what a test cares about. */
export const anIntern = (overrides: Partial<Intern.Intern> = {}): Intern.Intern => ({
  id: internId(1_750_000_000_000),
  workspace: unique("ws"),
  name: "Ada",
  description: "reviews pull requests",
  instructions: "You are Ada. Be brief.",
  model: "anthro/claude",
  status: "queued",
  progress: null,
  hostname: null,
  vaultId: "vault-1",
  attachedVaultId: null,
  lastFailureMessage: null,
  createdAt: 1_750_000_000_000,
  updatedAt: 1_750_000_000_000,
  ...overrides
})

const reveal = (internId: string, at: number, overrides: Partial<InternStore.Reveal> = {}): InternStore.Reveal => ({
  id: unique("reveal"),
  internId,
  workspace: "ws",
  keyId: "0123456789ab",
  requestId: unique("req"),
  at,
  outcome: "pending",
  ...overrides
})

/** Defines a `describe` block that checks the `InternStore` contract against `layer`. */
export const internStoreContract = (name: string, layer: Layer.Layer<InternStore.InternStore, unknown>): void =>
  layerTest(layer, { excludeTestServices: true, timeout: "30 seconds" })(`intern store contract: ${name}`, (it) => {
    describe("interns", () => {
      it.effect("stores an intern and reads it back, only in its own workspace", () =>
        Effect.gen(function*() {
          const store = yield* InternStore.InternStore
          const intern = anIntern({ progress: { stepLabel: "Starting", stepNumber: 1, totalSteps: 3 } })
          assert.deepStrictEqual(yield* store.create(intern), { _tag: "Created", intern })
          assert.deepStrictEqual(yield* store.get(intern.workspace, intern.id), Option.some(intern))
          assert.isTrue(Option.isNone(yield* store.get(unique("other-ws"), intern.id)))
          assert.isTrue(Option.isNone(yield* store.get(intern.workspace, internId(1))))
          const bare = anIntern({ description: null, instructions: null, model: null, vaultId: null })
          yield* store.create(bare)
          assert.deepStrictEqual(yield* store.get(bare.workspace, bare.id), Option.some(bare))
        }))

      it.effect("an idempotency key is unique per workspace, and gives back the intern made with it", () =>
        Effect.gen(function*() {
          const store = yield* InternStore.InternStore
          const first = anIntern()
          const key = { key: unique("idem"), fingerprint: "[\"Ada\"]" }
          assert.strictEqual((yield* store.create(first, key))._tag, "Created")
          const again = yield* store.create(anIntern({ workspace: first.workspace, name: "Other" }), {
            key: key.key,
            fingerprint: "[\"Other\"]"
          })
          assert.deepStrictEqual(again, { _tag: "Existing", intern: first, fingerprint: "[\"Ada\"]" })
          const page = yield* store.list({ workspace: first.workspace, limit: 10 })
          assert.deepStrictEqual(page.interns.map((i) => i.id), [first.id])
          // Another workspace may use the same key; interns without a key never collide.
          assert.strictEqual((yield* store.create(anIntern(), key))._tag, "Created")
          const workspace = unique("ws")
          yield* store.create(anIntern({ workspace }))
          yield* store.create(anIntern({ workspace }))
          assert.strictEqual((yield* store.list({ workspace, limit: 10 })).interns.length, 2)
        }))

      it.effect("lists a workspace's interns newest first, by status, a page at a time", () =>
        Effect.gen(function*() {
          const store = yield* InternStore.InternStore
          const workspace = unique("ws")
          const made = Array.from({ length: 5 }, (_, i) =>
            anIntern({
              workspace,
              id: internId(1_750_000_000_000 + i),
              status: i % 2 === 0 ? "queued" : "running"
            }))
          for (const intern of made) yield* store.create(intern)
          yield* store.create(anIntern({ workspace: unique("other") }))
          const newest = [...made].reverse().map((i) => i.id)
          const all = yield* store.list({ workspace, limit: 10 })
          assert.deepStrictEqual(all.interns.map((i) => i.id), newest)
          assert.isFalse(all.hasMore)
          const first = yield* store.list({ workspace, limit: 2 })
          assert.deepStrictEqual(first.interns.map((i) => i.id), newest.slice(0, 2))
          assert.isTrue(first.hasMore)
          const second = yield* store.list({ workspace, limit: 2, startingAfter: newest[1] })
          assert.deepStrictEqual(second.interns.map((i) => i.id), newest.slice(2, 4))
          assert.isTrue(second.hasMore)
          const last = yield* store.list({ workspace, limit: 2, startingAfter: newest[3] })
          assert.deepStrictEqual(last.interns.map((i) => i.id), newest.slice(4))
          assert.isFalse(last.hasMore)
          const running = yield* store.list({ workspace, limit: 10, statuses: ["running"] })
          assert.deepStrictEqual(running.interns.map((i) => i.id), [newest[1], newest[3]])
          const either = yield* store.list({ workspace, limit: 10, statuses: ["running", "queued"] })
          assert.strictEqual(either.interns.length, 5)
          assert.deepStrictEqual((yield* store.list({ workspace, limit: 10, statuses: ["failed"] })).interns, [])
        }))

      it.effect("changes an intern only while its status is the expected one", () =>
        Effect.gen(function*() {
          const store = yield* InternStore.InternStore
          const intern = anIntern()
          yield* store.create(intern)
          const progress = { stepLabel: "Waiting for the daemon", stepNumber: 2, totalSteps: 3 }
          const moved = yield* store.update(intern.id, "queued", { status: "provisioning", progress, updatedAt: 5 })
          assert.deepStrictEqual(moved, Option.some({ ...intern, status: "provisioning", progress, updatedAt: 5 }))
          assert.isTrue(Option.isNone(yield* store.update(intern.id, "queued", { status: "running", updatedAt: 6 })))
          const running = yield* store.update(intern.id, "provisioning", {
            status: "running",
            progress: null,
            hostname: "127.0.0.1:4000",
            updatedAt: 7
          })
          assert.deepStrictEqual(
            running,
            Option.some({ ...intern, status: "running", hostname: "127.0.0.1:4000", updatedAt: 7 })
          )
          const edited = yield* store.update(intern.id, "running", {
            name: "Grace",
            description: null,
            instructions: "New prompt",
            model: null,
            lastFailureMessage: "earlier failure",
            updatedAt: 8
          })
          assert.deepStrictEqual(
            Option.map(edited, (i) => [i.name, i.description, i.instructions, i.model, i.lastFailureMessage, i.status]),
            Option.some(["Grace", null, "New prompt", null, "earlier failure", "running"])
          )
          assert.deepStrictEqual(yield* store.get(intern.workspace, intern.id), edited)
          assert.isTrue(Option.isNone(yield* store.update(internId(2), "running", { updatedAt: 9 })))
        }))

      it.effect("removes an intern only in the expected status, with its conversations", () =>
        Effect.gen(function*() {
          const store = yield* InternStore.InternStore
          const intern = anIntern({ status: "destroying" })
          yield* store.create(intern)
          yield* store.appendTurns(intern.id, "s1", [{ role: "user", content: "hi" }], 1)
          assert.isFalse(yield* store.remove(intern.id, "running"))
          assert.isTrue(Option.isSome(yield* store.get(intern.workspace, intern.id)))
          assert.isTrue(yield* store.remove(intern.id, "destroying"))
          assert.isTrue(Option.isNone(yield* store.get(intern.workspace, intern.id)))
          assert.deepStrictEqual(yield* store.conversation(intern.id, "s1", 10), [])
          assert.isFalse(yield* store.remove(intern.id, "destroying"))
        }))
    })

    describe("conversations", () => {
      it.effect("keeps each session's turns in order, and gives the last ones", () =>
        Effect.gen(function*() {
          const store = yield* InternStore.InternStore
          const id = internId(3)
          const turns = Array.from({ length: 6 }, (_, i): InternStore.Turn => ({
            role: i % 2 === 0 ? "user" : "assistant",
            content: `turn ${i} – ünïcødé`
          }))
          yield* store.appendTurns(id, "s1", turns.slice(0, 2), 1)
          yield* store.appendTurns(id, "s2", [{ role: "user", content: "elsewhere" }], 2)
          yield* store.appendTurns(id, "s1", turns.slice(2), 3)
          yield* store.appendTurns(id, "s1", [], 4)
          assert.deepStrictEqual(yield* store.conversation(id, "s1", 100), turns)
          assert.deepStrictEqual(yield* store.conversation(id, "s1", 2), turns.slice(4))
          assert.deepStrictEqual(yield* store.conversation(id, "s2", 100), [{ role: "user", content: "elsewhere" }])
          assert.deepStrictEqual(yield* store.conversation(internId(4), "s1", 100), [])
        }))
    })

    describe("reveals", () => {
      it.effect("logs reveals up to the limit in the window, then refuses with the oldest time", () =>
        Effect.gen(function*() {
          const store = yield* InternStore.InternStore
          const id = internId(5)
          const old = reveal(id, 1_000)
          assert.deepStrictEqual(yield* store.reserveReveal(old, { since: 0, max: 3 }), { _tag: "Reserved" })
          for (const at of [60_000, 60_500]) {
            assert.deepStrictEqual(yield* store.reserveReveal(reveal(id, at), { since: 2_000, max: 3 }), {
              _tag: "Reserved"
            })
          }
          // The first is outside the window: a third fits, a fourth does not.
          assert.deepStrictEqual(yield* store.reserveReveal(reveal(id, 61_000), { since: 2_000, max: 3 }), {
            _tag: "Reserved"
          })
          assert.deepStrictEqual(yield* store.reserveReveal(reveal(id, 61_500), { since: 2_000, max: 3 }), {
            _tag: "Limited",
            oldestAt: 60_000
          })
          // Other interns have limits of their own.
          assert.deepStrictEqual(yield* store.reserveReveal(reveal(internId(6), 61_500), { since: 2_000, max: 3 }), {
            _tag: "Reserved"
          })
          yield* store.settleReveal(old.id, "revealed")
          const log = yield* store.reveals(id)
          assert.deepStrictEqual(log.map((r) => r.at), [61_000, 60_500, 60_000, 1_000])
          assert.deepStrictEqual(log.at(-1), { ...old, outcome: "revealed" })
          assert.deepStrictEqual(log.slice(0, 3).map((r) => r.outcome), ["pending", "pending", "pending"])
        }))

      it.effect("never lets concurrent reveals past the limit", () =>
        Effect.gen(function*() {
          const store = yield* InternStore.InternStore
          const id = internId(7)
          const results = yield* Effect.all(
            Array.from({ length: 25 }, (_, i) => store.reserveReveal(reveal(id, 10_000 + i), { since: 0, max: 10 })),
            { concurrency: "unbounded" }
          )
          assert.strictEqual(results.filter((r) => r._tag === "Reserved").length, 10)
          assert.strictEqual((yield* store.reveals(id)).length, 10)
        }))

      it.effect("keeps the audit log of an intern that is gone", () =>
        Effect.gen(function*() {
          const store = yield* InternStore.InternStore
          const intern = anIntern({ status: "destroying" })
          yield* store.create(intern)
          const entry = reveal(intern.id, 42, { workspace: intern.workspace, keyId: "fedcba987654" })
          yield* store.reserveReveal(entry, { since: 0, max: 10 })
          yield* store.settleReveal(entry.id, "timeout")
          assert.isTrue(yield* store.remove(intern.id, "destroying"))
          assert.deepStrictEqual(yield* store.reveals(intern.id), [{ ...entry, outcome: "timeout" }])
        }))
    })
  })
