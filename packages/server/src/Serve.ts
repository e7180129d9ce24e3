/**
 * `model-gateway serve` (what `npm start` runs): resolves the configuration, starts the gateway, says where it
 * listens, and serves until SIGTERM or SIGINT, then shuts down gracefully (in-flight requests, streams and batch
 * requests finish, pending usage records are written, storage and upstream pools close). SIGHUP reads the
 * configuration again and takes its models, keys and HTTP providers (see `Reload`), or says in one line why not and
 * goes on with the one it has.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import { ApiKeys } from "@model-gateway/http-adapter"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { ConfigError, type GatewayConfig } from "./Config.js"
import * as ConfigLoader from "./ConfigLoader.js"
import * as Gateway from "./Gateway.js"
import * as LineWriter from "./LineWriter.js"
import type * as Logging from "./Logging.js"
import * as Reload from "./Reload.js"
import { describeStorage, type ListenError, type StorageError } from "./StartupErrors.js"
import * as V8Flags from "./V8Flags.js"

/**
 * With no key configured at all, one management key for this run only: revoked at the next start. A reload without
 * keys keeps the run's key (`generated`), so that whoever holds it is not locked out.
 */
const withGeneratedKey = (
  config: GatewayConfig,
  existing?: string
): { config: GatewayConfig; generated: string | undefined } => {
  if (config.keys.length > 0) return { config, generated: undefined }
  const generated = existing ?? ApiKeys.generate()
  return {
    config: {
      ...config,
      keys: [{ key: generated, workspace: "default", management: true, interns: true, label: "generated" }]
    },
    generated
  }
}

/** Serves until interrupted (the process entry interrupts on SIGTERM/SIGINT). */
export const serve = (
  logging: Logging.Logging
): Effect.Effect<never, ConfigError | StorageError | ListenError, FileSystem.FileSystem> =>
  Effect.scoped(Effect.gen(function*() {
    const resolved = yield* ConfigLoader.resolve
    for (const warning of resolved.warnings) yield* Effect.logWarning(warning)
    yield* Option.match(resolved.path, {
      onNone: () => Effect.logInfo("no configuration file; serving the providers whose keys are in the environment"),
      onSome: (path) => Effect.logInfo(`configuration from ${path}`)
    })
    const { config, generated } = withGeneratedKey(resolved.config)
    yield* Effect.addFinalizer(() => Effect.logInfo("stopped"))
    const serving = yield* Gateway.serve(config, { logging })
    yield* onHangUp(reloading(serving.gateway, generated))
    // Start-up is over: the young generation may grow again (V8Flags.ts).
    yield* Effect.sync(V8Flags.serving)
    yield* Effect.addFinalizer(() => Effect.logInfo("shutting down: finishing in-flight requests"))
    const models = Object.keys(config.models)
    yield* Effect.logInfo(
      `listening on ${serving.url}${config.server.basePath} (storage: ${describeStorage(config.storage)})`
    )
    yield* Effect.logInfo(`${models.length} model(s): ${models.join(", ") || "none (configure providers)"}`)
    if (generated !== undefined) {
      // Printed, not logged: shown once to whoever started the process, and kept out of log pipelines.
      LineWriter.stdout.flush()
      yield* Console.log(
        `model-gateway: no API key configured; generated a management key for this run (shown once):\n  ${generated}`
      )
    }
    return yield* Effect.never
  }))

/** The configuration read again and taken (its models, keys and HTTP providers), or why not: one line either way. */
const reloading = (gateway: Gateway.Gateway, generated: string | undefined) =>
  Effect.gen(function*() {
    const resolved = yield* ConfigLoader.resolve
    for (const warning of resolved.warnings) yield* Effect.logWarning(warning)
    const next = withGeneratedKey(resolved.config, generated).config
    const done = yield* Effect.tryPromise({ try: () => gateway.reload(next), catch: (error) => error })
    const from = Option.match(resolved.path, { onNone: () => "the environment", onSome: (path) => path })
    yield* Effect.logInfo(
      `configuration reloaded from ${from}: ${done.models} model(s); keys ${done.keys.added} added, ` +
        `${done.keys.revoked} revoked; providers rebuilt: ${done.providers.join(", ") || "none"}`
    )
  }).pipe(
    Effect.catchAll((error) =>
      Effect.logError(
        error instanceof Reload.ReloadRefused
          ? error.message
          : `configuration not reloaded: ${error instanceof ConfigError ? error.message : String(error)}`
      )
    )
  )

/**
 * Runs `effect` at each SIGHUP for as long as the scope lasts, one after the other. Without a listener SIGHUP would
 * end the process (its default action); with one, a closed terminal no longer stops a gateway started from it.
 */
const onHangUp = <R>(effect: Effect.Effect<void, never, R>): Effect.Effect<void, never, Scope.Scope | R> =>
  Effect.flatMap(Effect.runtime<R>(), (runtime) => {
    const run = Runtime.runFork(runtime)
    let last: Promise<unknown> = Promise.resolve()
    const listener = () => {
      last = last.then(() => new Promise((done) => run(effect).addObserver(done)))
    }
    return Effect.acquireRelease(
      Effect.sync(() => process.on("SIGHUP", listener)),
      () => Effect.sync(() => process.off("SIGHUP", listener))
    )
  })
