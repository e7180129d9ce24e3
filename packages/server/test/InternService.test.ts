/**
 * The interns use case (core `InternService`) over the memory store and a scripted runtime, with the test clock: the
 * daemon-access time-out at exactly 10 seconds, the reveal limit's sliding minute, provisioning progress and failure,
 * suspension interrupting provisioning, runtime failures, a daemon lost, and who may see what.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Keys } from "@model-gateway/core"
import { Catalogue, GatewayError, InternRuntime, InternService, InternStore } from "@model-gateway/core"
import { MemoryInternStore } from "@model-gateway/storage-memory"
import { Duration, Effect, Either, Exit, Fiber, Layer, Option, Queue, Stream, TestClock } from "effect"

const member: Keys.Principal = { keyId: "0123456789ab", workspace: "acme", management: false, interns: true }
const caller = (principal: Keys.Principal = member, host?: string): InternService.InternCaller => ({
  principal,
  requestId: "req_test",
  host
})

type Step = Either.Either<InternRuntime.ProvisionEvent, InternRuntime.InternRuntimeError>

/** A runtime whose provisioning plays the steps a test offers, and whose other answers the test chooses. */
const scripted = Effect.gen(function*() {
  const steps = yield* Queue.unbounded<Step>()
  const state = {
    access: Effect.succeed(Option.some({ origin: "https://d.example", token: "t", expiresAt: 0 })) as Effect.Effect<
      Option.Option<InternRuntime.DaemonAccess>,
      InternRuntime.InternRuntimeError
    >,
    suspend: Effect.void as Effect.Effect<void, InternRuntime.InternRuntimeError>,
    destroy: Effect.void as Effect.Effect<void, InternRuntime.InternRuntimeError>,
    provisionsInterrupted: 0
  }
  const runtime: InternRuntime.InternRuntimeService = {
    provision: () =>
      Stream.fromQueue(steps).pipe(
        Stream.mapEffect((step) => step),
        Stream.takeUntil((event) => event._tag === "Ready"),
        Stream.ensuringWith((exit) => Effect.sync(() => Exit.isInterrupted(exit) && state.provisionsInterrupted++))
      ),
    suspend: () => Effect.suspend(() => state.suspend),
    destroy: () => Effect.suspend(() => state.destroy),
    access: () => Effect.suspend(() => state.access)
  }
  return { steps, state, runtime }
})

const progress = (stepNumber: number): Step =>
  Either.right({ _tag: "Progress", progress: { stepLabel: `step ${stepNumber}`, stepNumber, totalSteps: 3 } })
const ready: Step = Either.right({ _tag: "Ready", hostname: "d.example" })

const catalogue = Layer.succeed(
  Catalogue.Catalogue,
  Catalogue.fromSnapshot(Catalogue.makeSnapshot([{ id: "m/one", name: "One", endpoints: [] }]))
)

/** Runs a test with the service over a fresh store and a scripted runtime. */
const withService = <A, E>(
  test: (
    interns: InternService.InternsShape,
    script: Effect.Effect.Success<typeof scripted>,
    store: InternStore.InternStoreService
  ) => Effect.Effect<A, E>
) =>
  Effect.gen(function*() {
    const script = yield* scripted
    const layer = InternService.layer({ regionalHostnames: ["eu.example.com"], defaultModel: "m/one" }).pipe(
      Layer.provideMerge(MemoryInternStore.layer),
      Layer.provide(Layer.succeed(InternRuntime.InternRuntime, script.runtime)),
      Layer.provide(catalogue)
    )
    return yield* Effect.gen(function*() {
      return yield* test(yield* InternService.Interns, script, yield* InternStore.InternStore)
    }).pipe(Effect.provide(layer))
  })

/** Lets background fibers run until `check` holds. */
const until = <A, E>(read: Effect.Effect<A, E>, check: (a: A) => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1000; i++) {
      const value = yield* read
      if (check(value)) return value
      yield* Effect.yieldNow()
    }
    return yield* Effect.dieMessage("condition never held")
  })

const create = (interns: InternService.InternsShape, name = "Ada") =>
  Effect.map(interns.create(caller(), { name }, undefined), ({ intern }) => intern)

const runningIntern = (interns: InternService.InternsShape, script: Effect.Effect.Success<typeof scripted>) =>
  Effect.gen(function*() {
    const intern = yield* create(interns)
    yield* interns.provision(caller(), intern.id)
    yield* Queue.offer(script.steps, ready)
    return yield* until(interns.get(caller(), intern.id), (i) => i.status === "running")
  })

describe("InternService", () => {
  it.effect("records each provisioning step, then running with the daemon's host", () =>
    withService((interns, script) =>
      Effect.gen(function*() {
        const intern = yield* create(interns)
        assert.strictEqual(intern.model, "m/one")
        assert.strictEqual((yield* interns.provision(caller(), intern.id)).status, "provisioning")
        const read = interns.get(caller(), intern.id)
        yield* Queue.offer(script.steps, progress(1))
        const first = yield* until(read, (i) => i.progress !== null)
        assert.deepStrictEqual(first.progress, { stepLabel: "step 1", stepNumber: 1, totalSteps: 3 })
        yield* Queue.offer(script.steps, progress(2))
        yield* until(read, (i) => i.progress?.stepNumber === 2)
        yield* Queue.offer(script.steps, ready)
        const up = yield* until(read, (i) => i.status === "running")
        assert.deepStrictEqual([up.progress, up.hostname, up.lastFailureMessage], [null, "d.example", null])
      })
    ))

  it.effect("a failed provisioning leaves the intern failed with the reason; it may be provisioned again", () =>
    withService((interns, script) =>
      Effect.gen(function*() {
        const intern = yield* create(interns)
        yield* interns.provision(caller(), intern.id)
        yield* Queue.offer(script.steps, progress(1))
        yield* Queue.offer(script.steps, Either.left(new InternRuntime.InternRuntimeError({ message: "no room" })))
        const failed = yield* until(interns.get(caller(), intern.id), (i) => i.status === "failed")
        assert.deepStrictEqual([failed.progress, failed.lastFailureMessage], [null, "no room"])
        yield* interns.provision(caller(), intern.id)
        yield* Queue.offer(script.steps, ready)
        const up = yield* until(interns.get(caller(), intern.id), (i) => i.status === "running")
        assert.strictEqual(up.lastFailureMessage, null)
      })
    ))

  it.effect("suspending while provisioning interrupts the runtime's provisioning", () =>
    withService((interns, script) =>
      Effect.gen(function*() {
        const intern = yield* create(interns)
        yield* interns.provision(caller(), intern.id)
        yield* Queue.offer(script.steps, progress(1))
        yield* until(interns.get(caller(), intern.id), (i) => i.progress !== null)
        const stopped = yield* interns.suspend(caller(), intern.id)
        assert.deepStrictEqual([stopped.status, stopped.progress], ["stopped", null])
        assert.strictEqual(script.state.provisionsInterrupted, 1)
      })
    ))

  it.effect("a runtime that cannot stop a daemon leaves the intern failed, and answers 500", () =>
    withService((interns, script) =>
      Effect.gen(function*() {
        const intern = yield* runningIntern(interns, script)
        script.state.suspend = Effect.fail(new InternRuntime.InternRuntimeError({ message: "stuck" }))
        const error = yield* Effect.flip(interns.suspend(caller(), intern.id))
        assert.strictEqual(GatewayError.describe(error).status, 500)
        const after = yield* interns.get(caller(), intern.id)
        assert.deepStrictEqual([after.status, after.lastFailureMessage], ["failed", "stuck"])
      })
    ))

  it.effect("a failed deletion leaves destroy_failed; deleting again removes the intern", () =>
    withService((interns, script) =>
      Effect.gen(function*() {
        const intern = yield* runningIntern(interns, script)
        script.state.destroy = Effect.fail(new InternRuntime.InternRuntimeError({ message: "disk busy" }))
        assert.strictEqual((yield* interns.remove(caller(), intern.id, undefined)).status, "destroying")
        const stuck = yield* until(interns.get(caller(), intern.id), (i) => i.status !== "destroying")
        assert.deepStrictEqual([stuck.status, stuck.lastFailureMessage], ["destroy_failed", "disk busy"])
        assert.strictEqual((yield* interns.update(caller(), intern.id, { name: "Renamed" })).name, "Renamed")
        script.state.destroy = Effect.void
        yield* interns.remove(caller(), intern.id, { acknowledge_workspace_loss: true })
        const gone = yield* until(Effect.either(interns.get(caller(), intern.id)), Either.isLeft)
        assert.strictEqual(Either.isLeft(gone) && gone.left._tag, "NotFound")
      })
    ))

  it.effect("refuses moves the intern's status does not allow, with 409 invalid_state", () =>
    withService((interns, script) =>
      Effect.gen(function*() {
        const intern = yield* create(interns)
        const suspend = yield* Effect.flip(interns.suspend(caller(), intern.id))
        assert.deepStrictEqual(
          [suspend._tag, suspend._tag === "Conflict" && suspend.reason],
          ["Conflict", "invalid_state"]
        )
        yield* runningIntern(interns, script).pipe(Effect.asVoid)
        const running = (yield* interns.list(caller(), { status: "running" })).interns[0]
        const provision = yield* Effect.flip(interns.provision(caller(), running.id))
        assert.strictEqual(provision.message, `Cannot provision intern '${running.id}': it is running`)
      })
    ))
})

describe("daemon access", () => {
  it.effect("times out after exactly 10 seconds when the runtime does not answer (408, logged)", () =>
    withService((interns, script, store) =>
      Effect.gen(function*() {
        const intern = yield* runningIntern(interns, script)
        script.state.access = Effect.never
        const fiber = yield* Effect.fork(Effect.either(interns.daemonAccess(caller(), intern.id)))
        yield* TestClock.adjust(Duration.millis(9_999))
        assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)))
        yield* TestClock.adjust(Duration.millis(1))
        const result = yield* Fiber.join(fiber)
        assert.isTrue(Either.isLeft(result))
        const error = (result as Either.Left<GatewayError.GatewayError, never>).left
        assert.deepStrictEqual([error._tag, GatewayError.describe(error).status], ["RequestTimeout", 408])
        const log = yield* store.reveals(intern.id)
        assert.deepStrictEqual(log.map((r) => [r.outcome, r.keyId, r.workspace]), [["timeout", "0123456789ab", "acme"]])
      })
    ))

  it.effect("allows 10 reveals per intern in any minute", () =>
    withService((interns, script) =>
      Effect.gen(function*() {
        const intern = yield* runningIntern(interns, script)
        for (let i = 0; i < 10; i++) {
          yield* interns.daemonAccess(caller(), intern.id)
          yield* TestClock.adjust(Duration.seconds(1))
        }
        const limited = yield* Effect.flip(interns.daemonAccess(caller(), intern.id))
        // The first was 10 seconds ago: the window frees a place in 50 seconds.
        assert.deepStrictEqual(
          limited,
          new GatewayError.RateLimited({
            message: "At most 10 daemon-access reveals per minute per intern; try again later",
            retryAfterMs: 50_000,
            reason: "rate_limited"
          })
        )
        yield* TestClock.adjust(Duration.seconds(49))
        assert.strictEqual((yield* Effect.flip(interns.daemonAccess(caller(), intern.id)))._tag, "RateLimited")
        yield* TestClock.adjust(Duration.seconds(1))
        assert.deepStrictEqual(yield* interns.daemonAccess(caller(), intern.id), {
          origin: "https://d.example",
          token: "t"
        })
      })
    ))

  it.effect("a running intern whose daemon is gone: 409 intern_not_running, and the intern is failed", () =>
    withService((interns, script) =>
      Effect.gen(function*() {
        const intern = yield* runningIntern(interns, script)
        script.state.access = Effect.succeedNone
        const error = yield* Effect.flip(interns.daemonAccess(caller(), intern.id))
        assert.deepStrictEqual(
          [error._tag, error._tag === "Conflict" && error.reason],
          ["Conflict", "intern_not_running"]
        )
        const after = yield* interns.get(caller(), intern.id)
        assert.deepStrictEqual(after.status, "failed")
        assert.match(after.lastFailureMessage!, /daemon stopped unexpectedly/)
      })
    ))

  it.effect("hides interns from other workspaces and from keys outside the programme; refuses regional hosts", () =>
    withService((interns, script) =>
      Effect.gen(function*() {
        const intern = yield* runningIntern(interns, script)
        const others = [
          { ...member, workspace: "globex" },
          { ...member, interns: false }
        ]
        for (const principal of others) {
          for (
            const attempt of [
              interns.get(caller(principal), intern.id),
              interns.update(caller(principal), intern.id, { name: "x" }),
              interns.provision(caller(principal), intern.id),
              interns.suspend(caller(principal), intern.id),
              interns.remove(caller(principal), intern.id, undefined),
              interns.daemonAccess(caller(principal), intern.id)
            ] as ReadonlyArray<Effect.Effect<unknown, GatewayError.GatewayError>>
          ) {
            assert.strictEqual((yield* Effect.flip(attempt))._tag, "NotFound")
          }
        }
        assert.strictEqual((yield* Effect.flip(interns.list(caller(others[1]), {})))._tag, "NotFound")
        assert.deepStrictEqual((yield* interns.list(caller(others[0]), {})).interns, [])
        const regional = yield* Effect.flip(interns.daemonAccess(caller(member, "EU.example.com:443"), intern.id))
        assert.strictEqual(regional._tag, "PermissionDenied")
      })
    ))
})
