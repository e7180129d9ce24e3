/**
 * The contract of the storage ports (`Keys`, `UsageLog`), run against every adapter: each adapter
 * package calls `storageContract` with its layer. Tests use their own workspaces and keys, so the
 * layer is shared by the whole suite.
 */
import { assert, describe, layer as layerTest } from "@effect/vitest"
import { Keys, UsageLog } from "@model-gateway/core"
import type { Layer } from "effect"
import { Effect, Option } from "effect"
import { createHash } from "node:crypto"

/** The digest of a key, as the HTTP edge computes it. */
export const digestOf = (secret: string): string => createHash("sha256").update(secret).digest("hex")

const unique = (prefix: string) => `${prefix}-${globalThis.crypto.randomUUID()}`

/** A usage record with every field set; override what a test cares about. */
export const usageRecord = (overrides: Partial<UsageLog.UsageRecord> = {}): UsageLog.UsageRecord => ({
  requestId: unique("req"),
  createdAt: 1_750_000_000_123,
  route: "POST /v1/messages",
  keyId: "0123456789ab",
  workspace: "ws",
  model: "anthropic/claude-sonnet-4",
  provider: "anthropic",
  endpointId: "anthropic:claude-sonnet-4",
  stream: true,
  status: 200,
  errorType: null,
  inputTokens: 1234,
  outputTokens: 567,
  cacheReadTokens: 89,
  cacheWriteTokens: 10,
  cost: "0.000123456789",
  latencyMs: 1543.25,
  ttfbMs: 321.5,
  attempts: 2,
  sessionId: "session-1",
  user: "user-42",
  appReferer: "https://example.com/app",
  appTitle: "Example App",
  appCategories: "cli-agent,programming",
  metadata: { team: "search", run: 7, tags: ["a", "b"] },
  ...overrides
})

/** Defines a `describe` block that checks the `Keys` and `UsageLog` contracts against `layer`. */
export const storageContract = (name: string, layer: Layer.Layer<Keys.Keys | UsageLog.UsageLog, unknown>): void =>
  layerTest(layer, { excludeTestServices: true, timeout: "30 seconds" })(`storage contract: ${name}`, (it) => {
    describe("Keys", () => {
      it.effect("an unknown key authenticates as none", () =>
        Effect.gen(function*() {
          const keys = yield* Keys.Keys
          assert.isTrue(Option.isNone(yield* keys.authenticate(digestOf(unique("sk-unknown")))))
          assert.isTrue(Option.isNone(yield* keys.authenticate("")))
        }))

      it.effect("a provisioned key authenticates with its principal", () =>
        Effect.gen(function*() {
          const keys = yield* Keys.Keys
          const secret = unique("sk-mg")
          const workspace = unique("ws")
          const provisioned = yield* keys.provision({
            digest: digestOf(secret),
            source: "cli",
            workspace,
            management: true,
            interns: false,
            label: "ci key"
          })
          assert.match(provisioned.keyId, /^[0-9a-f]{12}$/)
          assert.deepStrictEqual(provisioned, {
            keyId: provisioned.keyId,
            workspace,
            management: true,
            interns: false,
            label: "ci key"
          })
          const found = yield* keys.authenticate(digestOf(secret))
          assert.deepStrictEqual(found, Option.some(provisioned))
          // A near miss is a different key.
          assert.isTrue(Option.isNone(yield* keys.authenticate(digestOf(secret + "x"))))
          assert.isTrue(Option.isNone(yield* keys.authenticate(digestOf(secret.slice(0, -1)))))
        }))

      it.effect("a key without a label, member of interns, has no label", () =>
        Effect.gen(function*() {
          const keys = yield* Keys.Keys
          const secret = unique("sk-mg")
          const workspace = unique("ws")
          const provisioned = yield* keys.provision({
            digest: digestOf(secret),
            source: "cli",
            workspace,
            management: false,
            interns: true
          })
          const found = Option.getOrThrow(yield* keys.authenticate(digestOf(secret)))
          assert.deepStrictEqual(found, provisioned)
          assert.strictEqual(found.workspace, workspace)
          assert.isFalse(found.management)
          assert.isTrue(found.interns)
          assert.isUndefined(found.label)
        }))

      it.effect("different keys get different ids", () =>
        Effect.gen(function*() {
          const keys = yield* Keys.Keys
          const workspace = unique("ws")
          const a = yield* keys.provision({
            digest: digestOf(unique("sk-a")),
            source: "cli",
            workspace,
            management: false,
            interns: false
          })
          const b = yield* keys.provision({
            digest: digestOf(unique("sk-b")),
            source: "cli",
            workspace,
            management: false,
            interns: false
          })
          assert.notStrictEqual(a.keyId, b.keyId)
        }))

      it.effect("provision is idempotent and updates workspace and flags", () =>
        Effect.gen(function*() {
          const keys = yield* Keys.Keys
          const secret = unique("sk-mg")
          const first = yield* keys.provision({
            digest: digestOf(secret),
            source: "cli",
            workspace: unique("ws"),
            management: false,
            interns: false
          })
          assert.deepStrictEqual(yield* keys.authenticate(digestOf(secret)), Option.some(first))
          const again = yield* keys.provision({
            digest: digestOf(secret),
            source: "cli",
            workspace: first.workspace,
            management: false,
            interns: false
          })
          assert.deepStrictEqual(again, first)

          const moved = unique("ws")
          const updated = yield* keys.provision({
            digest: digestOf(secret),
            source: "cli",
            workspace: moved,
            management: true,
            interns: true,
            label: "x"
          })
          assert.strictEqual(updated.keyId, first.keyId)
          assert.deepStrictEqual(yield* keys.authenticate(digestOf(secret)), Option.some(updated))
          assert.deepStrictEqual(
            Option.map(yield* keys.authenticate(digestOf(secret)), (p) => p.workspace),
            Option.some(moved)
          )
        }))

      it.effect("revoke removes a key by id", () =>
        Effect.gen(function*() {
          const keys = yield* Keys.Keys
          const secret = unique("sk-mg")
          const other = unique("sk-mg")
          const workspace = unique("ws")
          const principal = yield* keys.provision({
            digest: digestOf(secret),
            source: "cli",
            workspace,
            management: false,
            interns: false
          })
          yield* keys.provision({
            digest: digestOf(other),
            source: "cli",
            workspace,
            management: false,
            interns: false
          })
          assert.isTrue(Option.isSome(yield* keys.authenticate(digestOf(secret))))

          assert.isTrue(yield* keys.revoke(principal.keyId))
          assert.isTrue(Option.isNone(yield* keys.authenticate(digestOf(secret))))
          assert.isFalse(yield* keys.revoke(principal.keyId))
          assert.isFalse(yield* keys.revoke("ffffffffffff"))
          // Other keys are untouched.
          assert.isTrue(Option.isSome(yield* keys.authenticate(digestOf(other))))

          // A revoked key can be provisioned again.
          const back = yield* keys.provision({
            digest: digestOf(secret),
            source: "cli",
            workspace,
            management: false,
            interns: false
          })
          assert.deepStrictEqual(yield* keys.authenticate(digestOf(secret)), Option.some(back))
        }))

      it.effect("list shows every key with its source, never a digest", () =>
        Effect.gen(function*() {
          const keys = yield* Keys.Keys
          const workspace = unique("ws")
          const a = yield* keys.provision({
            digest: digestOf(unique("sk-a")),
            source: "cli",
            workspace,
            management: true,
            interns: false,
            label: "deploy"
          })
          const listed = (yield* keys.list).filter((k) => k.workspace === workspace)
          assert.strictEqual(listed.length, 1)
          const { createdAt, ...rest } = listed[0]
          assert.deepStrictEqual(rest, { ...a, source: "cli" })
          assert.isTrue(createdAt > 0)
          assert.notInclude(JSON.stringify(listed), digestOf("sk-a"))
        }))

      it.effect("sync makes a source's keys exactly the given ones and leaves the other source alone", () =>
        Effect.gen(function*() {
          const keys = yield* Keys.Keys
          const workspace = unique("ws")
          const [kept, dropped, added, cli] = ["kept", "dropped", "added", "cli"].map((n) => unique(`sk-${n}`))
          const entry = (secret: string, management = false) => ({
            digest: digestOf(secret),
            workspace,
            management,
            interns: false
          })
          yield* keys.provision({ ...entry(cli), source: "cli" })
          const first = yield* keys.sync("config", [entry(kept), entry(dropped)])
          assert.strictEqual(first.added, 2)
          const second = yield* keys.sync("config", [entry(kept, true), entry(added)])
          assert.deepStrictEqual(second, { added: 1, kept: 1, revoked: 1 })
          assert.isTrue(Option.isNone(yield* keys.authenticate(digestOf(dropped))))
          assert.isTrue(Option.getOrThrow(yield* keys.authenticate(digestOf(kept))).management)
          assert.isTrue(Option.isSome(yield* keys.authenticate(digestOf(added))))
          assert.isTrue(Option.isSome(yield* keys.authenticate(digestOf(cli))))
          const sources = (yield* keys.list).filter((k) => k.workspace === workspace).map((k) => k.source).sort()
          assert.deepStrictEqual(sources, ["cli", "config", "config"])
          // An empty configuration revokes every configuration key, and only those.
          yield* keys.sync("config", [])
          assert.isTrue(Option.isNone(yield* keys.authenticate(digestOf(kept))))
          assert.isTrue(Option.isSome(yield* keys.authenticate(digestOf(cli))))
        }))
    })

    describe("UsageLog", () => {
      it.effect("flush with nothing queued returns", () =>
        Effect.gen(function*() {
          const usage = yield* UsageLog.UsageLog
          yield* usage.flush
          yield* usage.flush
        }))

      it.effect("a recorded record is listed after flush with every field equal", () =>
        Effect.gen(function*() {
          const usage = yield* UsageLog.UsageLog
          const workspace = unique("ws")
          const full = usageRecord({ workspace, createdAt: 1_750_000_000_002 })
          const sparse = usageRecord({
            workspace,
            createdAt: 1_750_000_000_001,
            provider: null,
            endpointId: null,
            stream: false,
            status: 429,
            errorType: "rate_limit_error",
            inputTokens: 0,
            outputTokens: 0,
            cacheReadTokens: 0,
            cacheWriteTokens: 0,
            cost: "0",
            latencyMs: 12,
            ttfbMs: null,
            attempts: 1,
            sessionId: null,
            user: null,
            appReferer: null,
            appTitle: null,
            appCategories: null,
            metadata: null
          })
          const precise = usageRecord({ workspace, createdAt: 1_750_000_000_000, cost: "12345.678901234567890123" })
          yield* usage.record(full)
          yield* usage.record(sparse)
          yield* usage.record(precise)
          yield* usage.flush
          const listed = yield* usage.list({ workspace })
          assert.deepStrictEqual(listed, [full, sparse, precise])
          assert.strictEqual(listed[0].cost, "0.000123456789")
          assert.strictEqual(listed[2].cost, "12345.678901234567890123")
        }))

      it.effect("list is newest first, filtered by workspace, and respects the limit", () =>
        Effect.gen(function*() {
          const usage = yield* UsageLog.UsageLog
          const a = unique("ws-a")
          const b = unique("ws-b")
          const base = 1_760_000_000_000
          // Recorded out of time order: a request that started earlier may finish later.
          const inA = [3, 0, 4, 1, 2].map((i) => usageRecord({ workspace: a, createdAt: base + i * 1000 }))
          const inB = [0, 1, 2].map((i) => usageRecord({ workspace: b, createdAt: base + i * 1000 + 500 }))
          for (const record of [...inA, ...inB]) yield* usage.record(record)
          yield* usage.flush

          const listedA = yield* usage.list({ workspace: a })
          assert.deepStrictEqual(listedA, [...inA].sort((x, y) => y.createdAt - x.createdAt))
          assert.deepStrictEqual(
            (yield* usage.list({ workspace: a, limit: 2 })).map((r) => r.createdAt),
            [base + 4000, base + 3000]
          )
          assert.deepStrictEqual(yield* usage.list({ workspace: a, limit: 0 }), [])
          const listedB = yield* usage.list({ workspace: b, limit: 10 })
          assert.deepStrictEqual(listedB, [...inB].reverse())
          assert.deepStrictEqual(yield* usage.list({ workspace: unique("ws-none") }), [])

          const all = yield* usage.list({ limit: 3 })
          assert.strictEqual(all.length, 3)
          for (let i = 1; i < all.length; i++) assert.isAtLeast(all[i - 1].createdAt, all[i].createdAt)
        }))

      it.effect("records with the same time are listed most recently recorded first", () =>
        Effect.gen(function*() {
          const usage = yield* UsageLog.UsageLog
          const workspace = unique("ws")
          const records = [0, 1, 2].map(() => usageRecord({ workspace, createdAt: 1_770_000_000_000 }))
          for (const record of records) yield* usage.record(record)
          yield* usage.flush
          assert.deepStrictEqual(yield* usage.list({ workspace }), [...records].reverse())
        }))

      it.effect("2,000 records recorded then flushed are all stored", () =>
        Effect.gen(function*() {
          const usage = yield* UsageLog.UsageLog
          const workspace = unique("ws-many")
          const base = 1_780_000_000_000
          const records = Array.from({ length: 2000 }, (_, i) =>
            usageRecord({ workspace, createdAt: base + i, inputTokens: i, cost: `0.${String(i).padStart(6, "0")}1` }))
          yield* Effect.forEach(records, usage.record, { discard: true })
          yield* usage.flush

          const byDefault = yield* usage.list({ workspace })
          assert.strictEqual(byDefault.length, 100)
          assert.deepStrictEqual(byDefault[0], records[1999])

          const listed = yield* usage.list({ workspace, limit: 5000 })
          assert.strictEqual(listed.length, 2000)
          assert.deepStrictEqual(listed, [...records].reverse())
        }))

      it.effect("concurrent recorders and flushers lose nothing", () =>
        Effect.gen(function*() {
          const usage = yield* UsageLog.UsageLog
          const workspace = unique("ws-concurrent")
          const records = Array.from({ length: 600 }, (_, i) =>
            usageRecord({ workspace, createdAt: 1_790_000_000_000 + i }))
          yield* Effect.forEach(
            records,
            (record, i) =>
              i % 100 === 99 ? Effect.zipRight(usage.record(record), usage.flush) : usage.record(record),
            { concurrency: 16, discard: true }
          )
          yield* usage.flush
          const listed = yield* usage.list({ workspace, limit: 1000 })
          assert.strictEqual(listed.length, 600)
          assert.deepStrictEqual(
            new Set(listed.map((r) => r.requestId)),
            new Set(records.map((r) => r.requestId))
          )
        }))
    })
  })
