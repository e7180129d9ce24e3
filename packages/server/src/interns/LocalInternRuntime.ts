/**
 * The gateway's own `InternRuntime`: each intern's daemon is a child process on this machine (`InternDaemonMain`), an
 * HTTP server on a loopback port that a terminal client attaches to. Provisioning reports three steps (start the
 * process, wait for it to listen, check its health); suspending or deleting an intern stops its process
 * (SIGTERM, then SIGKILL after 5 s), and so does closing the runtime; a daemon also exits by itself when the gateway
 * process goes away (its IPC channel closes).
 *
 * Access tokens are signed with the intern's daemon key, derived from a secret (`INTERNS_TOKEN_SECRET`, else random
 * per process: daemons do not outlive the gateway anyway). The daemon relays each turn typed at its terminal back over
 * IPC, and the runtime runs it through the intern chat use case as the intern's workspace.
 */
import type { GatewayError } from "@model-gateway/core"
import { InternChat, InternIds, InternRuntime } from "@model-gateway/core"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { fileURLToPath } from "node:url"
import type { FromDaemon, ToDaemon } from "./DaemonProtocol.js"
import * as DaemonToken from "./DaemonToken.js"

export interface LocalInternRuntimeOptions {
  /** The daemon program; `InternDaemonMain.js` beside this module by default. */
  readonly entry?: string | undefined
  /**
   * The daemon's public origin, a template: `{intern}` is replaced by the intern id and `{port}` by the daemon's
   * loopback port (`https://{intern}.interns.example.com` behind a proxy that maps each host to its daemon). Default:
   * the loopback address itself, `http://127.0.0.1:{port}`.
   */
  readonly publicOrigin?: string | undefined
  /** The interface daemons listen on (default 127.0.0.1). */
  readonly host?: string | undefined
  /** The secret daemon keys are derived from; random per process by default. */
  readonly secret?: Redacted.Redacted<string> | undefined
  /** How long a revealed token is valid (default 300 s). */
  readonly tokenTtlSeconds?: number | undefined
  /** How long a daemon has to start listening (default 15 s). */
  readonly startTimeout?: Duration.DurationInput | undefined
}

interface Daemon {
  readonly internId: string
  readonly workspace: string
  readonly child: ChildProcess
  readonly port: number
  readonly origin: string
  readonly key: Buffer
  /** The turns being relayed for its terminal, by turn number. */
  readonly turns: Map<number, Fiber.RuntimeFiber<void>>
}

const DEFAULT_ENTRY = fileURLToPath(new URL("./InternDaemonMain.js", import.meta.url))

const STEPS = 3

const failure = (message: string) => new InternRuntime.InternRuntimeError({ message })

/** The origin of a daemon from the template (see `publicOrigin`). */
export const originOf = (template: string | undefined, host: string, internId: string, port: number): string =>
  (template ?? `http://${host.includes(":") ? `[${host}]` : host}:{port}`)
    .replaceAll("{intern}", internId)
    .replaceAll("{port}", String(port))
    .replace(/\/+$/, "")

/** Stops a child process: SIGTERM, then SIGKILL after `graceMs`; done when it has exited. */
const stopProcess = (child: ChildProcess, graceMs = 5_000): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs)
    child.once("exit", () => {
      clearTimeout(timer)
      resume(Effect.void)
    })
    child.kill("SIGTERM")
  })

/** The daemon's first words: the port it listens on; a failure if it exits or stays silent first. */
const listening = (child: ChildProcess, timeoutMs: number, stderr: () => string) =>
  Effect.async<number, InternRuntime.InternRuntimeError>((resume) => {
    const done = () => {
      clearTimeout(timer)
      child.off("message", onMessage)
      child.off("exit", onExit)
      child.off("error", onError)
    }
    const onMessage = (message: FromDaemon) => {
      if (message.type !== "listening") return
      done()
      resume(Effect.succeed(message.port))
    }
    const onExit = (code: number | null, signal: string | null) => {
      done()
      const why = stderr().trim()
      resume(
        Effect.fail(failure(`the daemon exited (${signal ?? `code ${code}`}) before listening${why ? `: ${why}` : ""}`))
      )
    }
    const onError = (error: Error) => {
      done()
      resume(Effect.fail(failure(`the daemon could not start: ${error.message}`)))
    }
    const timer = setTimeout(() => {
      done()
      resume(Effect.fail(failure(`the daemon did not listen within ${timeoutMs} ms`)))
    }, timeoutMs)
    child.on("message", onMessage)
    child.once("exit", onExit)
    child.once("error", onError)
    return Effect.sync(done)
  })

/** `GET /health` of a daemon: it must answer for its intern. */
const healthy = (host: string, port: number, internId: string) =>
  Effect.tryPromise({
    try: async (signal) => {
      const response = await fetch(`http://${host.includes(":") ? `[${host}]` : host}:${port}/health`, { signal })
      const body = (await response.json()) as { intern?: unknown }
      if (response.status !== 200 || body.intern !== internId) {
        throw new Error(`it answered ${response.status} for ${String(body.intern)}`)
      }
    },
    catch: (error) => failure(`the daemon's health check failed: ${(error as Error).message}`)
  }).pipe(
    Effect.timeoutFail({
      duration: Duration.seconds(5),
      onTimeout: () => failure("the daemon's health check timed out")
    })
  )

/** The reason a daemon shows for a turn the gateway refused. */
const reasonOf = (error: GatewayError.GatewayError): string => {
  switch (error._tag) {
    case "Conflict":
      return error.reason
    case "NotFound":
      return "not_found"
    case "InvalidRequest":
      return "bad_request"
    case "RateLimited":
      return "rate_limited"
    default:
      return "turn_failed"
  }
}

/** Builds the runtime; closing the scope stops every daemon. */
export const make = (
  options: LocalInternRuntimeOptions = {}
): Effect.Effect<InternRuntime.InternRuntimeService, never, InternChat.InternChat | Scope.Scope> =>
  Effect.gen(function*() {
    const chat = yield* InternChat.InternChat
    const runtime = yield* Effect.runtime<never>()
    const entry = options.entry ?? DEFAULT_ENTRY
    const host = options.host ?? "127.0.0.1"
    const secret = options.secret === undefined ? randomBytes(32) : Redacted.value(options.secret)
    const ttl = options.tokenTtlSeconds ?? 300
    const startTimeoutMs = Duration.toMillis(options.startTimeout ?? Duration.seconds(15))
    const daemons = new Map<string, Daemon>()
    const requestId = InternIds.timeOrdered("req_daemon_")

    const send = (daemon: Daemon, message: ToDaemon) => {
      if (daemon.child.connected) daemon.child.send(message)
    }

    /** Relays one turn of a daemon's terminal through the intern chat use case, as the intern's workspace. */
    const relay = (daemon: Daemon, turn: number, sessionId: string | undefined, content: string) =>
      Effect.gen(function*() {
        const context: InternChat.ChatContext = {
          principal: {
            keyId: "daemon",
            workspace: daemon.workspace,
            management: false,
            interns: true,
            label: `daemon of ${daemon.internId}`
          },
          requestId: yield* Effect.flatMap(Clock.currentTimeMillis, requestId),
          route: "DAEMON /interns/{internId}/attach",
          app: { referer: undefined, title: "intern daemon", categories: undefined }
        }
        const body = {
          messages: [{ role: "user", content }],
          stream: true,
          ...(sessionId ? { session_id: sessionId } : {})
        }
        const prepared = yield* chat.prepare(context, daemon.internId, body)
        const chunks = yield* chat.run(context, prepared)
        let failed = false
        yield* Stream.runForEach(chunks, (chunk) =>
          Effect.sync(() => {
            const error = chunk.error as { message?: string; metadata?: { reason?: string } } | undefined
            const choices = chunk.choices as ReadonlyArray<{ delta?: { content?: unknown } }>
            if (error !== undefined) {
              failed = true
              send(daemon, {
                type: "error",
                turn,
                message: error.message ?? "the turn failed",
                reason: error.metadata?.reason ?? "turn_failed"
              })
            } else if (choices.length === 0 && !failed) {
              send(daemon, { type: "done", turn, sessionId: prepared.sessionId, usage: chunk.usage ?? null })
            } else if (typeof choices[0]?.delta?.content === "string" && choices[0].delta.content !== "") {
              send(daemon, { type: "delta", turn, content: choices[0].delta.content })
            }
          }))
      }).pipe(
        Effect.catchAll((error) =>
          Effect.sync(() => send(daemon, { type: "error", turn, message: error.message, reason: reasonOf(error) }))
        ),
        Effect.catchAllDefect((defect) =>
          Effect.zipRight(
            Effect.logError("intern daemon turn failed", Cause.die(defect)),
            Effect.sync(() => send(daemon, { type: "error", turn, message: "the turn failed", reason: "turn_failed" }))
          )
        ),
        Effect.ensuring(Effect.sync(() => daemon.turns.delete(turn)))
      )

    const listen = (daemon: Daemon) => {
      daemon.child.on("message", (message: FromDaemon) => {
        if (message.type === "chat") {
          const fiber = Runtime.runFork(runtime)(relay(daemon, message.turn, message.sessionId, message.content))
          daemon.turns.set(message.turn, fiber)
        } else if (message.type === "cancel") {
          daemon.turns.get(message.turn)?.unsafeInterruptAsFork(FiberId.none)
        }
      })
      daemon.child.once("exit", () => {
        if (daemons.get(daemon.internId) === daemon) daemons.delete(daemon.internId)
        for (const fiber of daemon.turns.values()) fiber.unsafeInterruptAsFork(FiberId.none)
      })
    }

    const stop = (internId: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const daemon = daemons.get(internId)
        if (daemon === undefined) return Effect.void
        daemons.delete(internId)
        return stopProcess(daemon.child)
      })

    const step = (stepNumber: number, stepLabel: string): InternRuntime.ProvisionEvent => ({
      _tag: "Progress",
      progress: { stepLabel, stepNumber, totalSteps: STEPS }
    })

    const provision = (spec: InternRuntime.DaemonSpec): Stream.Stream<
      InternRuntime.ProvisionEvent,
      InternRuntime.InternRuntimeError
    > =>
      Stream.asyncScoped<InternRuntime.ProvisionEvent, InternRuntime.InternRuntimeError>((emit) =>
        Effect.gen(function*() {
          let child: ChildProcess | undefined
          let handedOver = false
          // Interrupted or failed before the daemon was handed over: it goes.
          yield* Effect.addFinalizer(() => (handedOver || child === undefined ? Effect.void : stopProcess(child)))
          const work = Effect.gen(function*() {
            yield* stop(spec.internId)
            void emit.single(step(1, "Starting the intern's daemon process"))
            let stderr = ""
            child = yield* Effect.try({
              try: () =>
                spawn(process.execPath, [entry], {
                  stdio: ["ignore", "ignore", "pipe", "ipc"],
                  env: { PATH: process.env.PATH ?? "" }
                }),
              catch: (error) => failure(`could not start the daemon process: ${(error as Error).message}`)
            })
            child.stderr?.setEncoding("utf8").on("data", (data: string) => (stderr = (stderr + data).slice(-2000)))
            const key = DaemonToken.daemonKey(secret, spec.internId)
            void emit.single(step(2, "Waiting for the daemon to listen"))
            const started = child
            started.send({ type: "start", internId: spec.internId, key: key.toString("base64"), host } as ToDaemon)
            const port = yield* listening(started, startTimeoutMs, () => stderr)
            void emit.single(step(3, "Checking the daemon's health"))
            yield* healthy(host, port, spec.internId)
            const daemon: Daemon = {
              internId: spec.internId,
              workspace: spec.workspace,
              child: started,
              port,
              origin: originOf(options.publicOrigin, host, spec.internId, port),
              key,
              turns: new Map()
            }
            daemons.set(spec.internId, daemon)
            listen(daemon)
            handedOver = true
            void emit.single({ _tag: "Ready", hostname: new URL(daemon.origin).host })
            void emit.end()
          })
          yield* Effect.forkScoped(Effect.catchAll(work, (error) => Effect.sync(() => void emit.fail(error))))
        })
      )

    const access = (internId: string) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const daemon = daemons.get(internId)
        if (daemon === undefined || daemon.child.exitCode !== null || daemon.child.signalCode !== null) {
          return Option.none()
        }
        const seconds = Math.floor(now / 1000)
        return Option.some({
          origin: daemon.origin,
          token: DaemonToken.sign(daemon.key, internId, seconds, ttl),
          expiresAt: (seconds + ttl) * 1000
        })
      })

    yield* Effect.addFinalizer(() =>
      Effect.forEach([...daemons.keys()], stop, { discard: true, concurrency: "unbounded" })
    )

    return InternRuntime.InternRuntime.of({ provision, suspend: stop, destroy: stop, access })
  })

/** The local runtime, given the intern chat use case. */
export const layer = (
  options: LocalInternRuntimeOptions = {}
): Layer.Layer<InternRuntime.InternRuntime, never, InternChat.InternChat> =>
  Layer.scoped(InternRuntime.InternRuntime, make(options))

/** The local runtime with its token secret from `INTERNS_TOKEN_SECRET` when set (random per process otherwise). */
export const layerConfig = (
  options: Omit<LocalInternRuntimeOptions, "secret"> = {}
): Layer.Layer<InternRuntime.InternRuntime, never, InternChat.InternChat> =>
  Layer.unwrapEffect(
    Config.option(Config.redacted("INTERNS_TOKEN_SECRET")).pipe(
      Effect.map((secret) => layer({ ...options, secret: Option.getOrUndefined(secret) })),
      Effect.catchAll(() => Effect.succeed(layer(options)))
    )
  )
