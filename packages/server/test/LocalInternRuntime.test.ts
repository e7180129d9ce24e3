/**
 * The local intern runtime with real daemon processes (`dist/interns/InternDaemonMain.js`, built by `npm test`): the
 * provisioning steps, the public origin template, the tokens it issues, stopping, and what a daemon that cannot start
 * (or is interrupted while starting) leaves behind: nothing.
 */
import { assert, describe, it } from "@effect/vitest"
import { InternChat, InternRuntime } from "@model-gateway/core"
import { Chunk, Effect, Exit, Fiber, Layer, Option, Redacted, Stream } from "effect"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as DaemonToken from "../src/interns/DaemonToken.js"
import * as LocalInternRuntime from "../src/interns/LocalInternRuntime.js"
import { DAEMON_MAIN } from "./InternsHarness.js"

const chat = Layer.succeed(
  InternChat.InternChat,
  InternChat.InternChat.of({ prepare: () => Effect.dieMessage("unused"), run: () => Effect.dieMessage("unused") })
)

const runtimeWith = (options: LocalInternRuntime.LocalInternRuntimeOptions) =>
  Layer.provide(LocalInternRuntime.layer(options), chat)

const spec = { internId: "intern_00000000000100000002", workspace: "acme", name: "Ada" }

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const dir = mkdtempSync(join(tmpdir(), "mg-runtime-"))

describe("LocalInternRuntime", () => {
  it("makes origins from the template, or the loopback address", () => {
    assert.strictEqual(LocalInternRuntime.originOf(undefined, "127.0.0.1", "intern_1", 4000), "http://127.0.0.1:4000")
    assert.strictEqual(LocalInternRuntime.originOf(undefined, "::1", "intern_1", 4000), "http://[::1]:4000")
    assert.strictEqual(
      LocalInternRuntime.originOf("https://{intern}.interns.example.com/", "127.0.0.1", "intern_1", 4000),
      "https://intern_1.interns.example.com"
    )
    assert.strictEqual(
      LocalInternRuntime.originOf("https://gw.example.com:{port}", "127.0.0.1", "intern_1", 4000),
      "https://gw.example.com:4000"
    )
  })

  it.live("provisions a daemon in three steps, issues tokens it verifies, and stops it", () =>
    Effect.gen(function*() {
      const runtime = yield* InternRuntime.InternRuntime
      assert.isTrue(Option.isNone(yield* runtime.access(spec.internId)))
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(runtime.provision(spec)))
      assert.deepStrictEqual(events.map((e) => (e._tag === "Progress" ? e.progress : e)), [
        { stepLabel: "Starting the intern's daemon process", stepNumber: 1, totalSteps: 3 },
        { stepLabel: "Waiting for the daemon to listen", stepNumber: 2, totalSteps: 3 },
        { stepLabel: "Checking the daemon's health", stepNumber: 3, totalSteps: 3 },
        { _tag: "Ready", hostname: `${spec.internId}.interns.example.com` }
      ])
      const access = Option.getOrThrow(yield* runtime.access(spec.internId))
      assert.strictEqual(access.origin, `https://${spec.internId}.interns.example.com`)
      const key = DaemonToken.daemonKey("runtime-test-secret", spec.internId)
      const verified = DaemonToken.verify(key, access.token, spec.internId, Math.floor(Date.now() / 1000))
      assert.isTrue(verified.ok)
      assert.strictEqual(verified.ok && verified.claims.exp - verified.claims.iat, 120)
      assert.strictEqual(access.expiresAt, verified.ok ? verified.claims.exp * 1000 : 0)
      // Provisioning again replaces the daemon.
      yield* Stream.runDrain(runtime.provision(spec))
      yield* runtime.suspend(spec.internId)
      assert.isTrue(Option.isNone(yield* runtime.access(spec.internId)))
      yield* runtime.destroy(spec.internId)
    }).pipe(
      Effect.provide(runtimeWith({
        entry: DAEMON_MAIN,
        publicOrigin: "https://{intern}.interns.example.com",
        secret: Redacted.make("runtime-test-secret"),
        tokenTtlSeconds: 120
      }))
    ))

  it.live("a daemon that dies before listening fails provisioning with what it printed", () =>
    Effect.gen(function*() {
      const entry = join(dir, "crash.mjs")
      writeFileSync(entry, "process.stderr.write('cannot bind: no such device\\n'); process.exit(3)\n")
      const runtime = yield* InternRuntime.InternRuntime
      const exit = yield* Effect.exit(Stream.runDrain(runtime.provision(spec)))
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? exit.cause : undefined
      assert.match(String(error), /the daemon exited \(code 3\) before listening: cannot bind: no such device/)
    }).pipe(Effect.provide(runtimeWith({ entry: join(dir, "crash.mjs") }))))

  it.live("interrupting provisioning stops the daemon it started; a silent one times out", () =>
    Effect.gen(function*() {
      const pidFile = join(dir, "pid")
      const entry = join(dir, "silent.mjs")
      writeFileSync(
        entry,
        `import { writeFileSync } from "node:fs"
writeFileSync(${JSON.stringify(pidFile)}, String(process.pid))
setInterval(() => {}, 1000)
`
      )
      const runtime = yield* InternRuntime.InternRuntime
      const fiber = yield* Effect.fork(Stream.runDrain(runtime.provision(spec)))
      const pid = yield* Effect.promise(async () => {
        for (;;) {
          try {
            return Number(readFileSync(pidFile, "utf8"))
          } catch {
            await new Promise((r) => setTimeout(r, 20))
          }
        }
      })
      assert.isTrue(alive(pid))
      yield* Fiber.interrupt(fiber)
      assert.isFalse(alive(pid))
      const timedOut = yield* Effect.exit(Stream.runDrain(runtime.provision(spec)))
      assert.match(String(Exit.isFailure(timedOut) && timedOut.cause), /did not listen within 300 ms/)
    }).pipe(Effect.provide(runtimeWith({ entry: join(dir, "silent.mjs"), startTimeout: "300 millis" }))))
})
