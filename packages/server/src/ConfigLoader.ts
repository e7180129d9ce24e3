/**
 * The configuration a process runs with: the file named by `GATEWAY_CONFIG` (else `./gateway.config.json` when it
 * exists), or the built-in catalogue of the providers whose keys are in the environment; then the environment's
 * overrides (`PORT`, `HOST`, `DATABASE_URL`, `GATEWAY_API_KEY`, `REDIS_URL`). Every problem is a `ConfigError` naming the key.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Config from "effect/Config"
import type * as EffectConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as BuiltinCatalogue from "./BuiltinCatalogue.js"
import { ConfigError, type GatewayConfig, parse } from "./Config.js"
import * as Environment from "./Environment.js"

export interface Resolved {
  readonly config: GatewayConfig
  /** The file it came from; none for the built-in catalogue. */
  readonly path: Option.Option<string>
  readonly warnings: ReadonlyArray<string>
}

const DEFAULT_PATH = "./gateway.config.json"

const fromEnvironment = <A>(config: Config.Config<A>) =>
  Effect.mapError(
    config,
    (error: EffectConfigError.ConfigError) =>
      new ConfigError({ message: `environment: ${String(error).replace(/^\((.*)\)$/s, "$1")}` })
  )

/** Reads and decodes a configuration file; `${VAR}` references are expanded from the process environment. */
export const readFile = (path: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(path).pipe(
      Effect.mapError((e) => new ConfigError({ message: `cannot read configuration file ${path}: ${e.message}` }))
    )
    return yield* Effect.try({
      try: () => parse(text, process.env),
      catch: (e) => e instanceof ConfigError ? e : new ConfigError({ message: String(e) })
    })
  })

/** Applies `PORT`, `HOST`, `DATABASE_URL`, `GATEWAY_API_KEY` and `REDIS_URL` over a configuration. */
export const withOverrides = (config: GatewayConfig) =>
  Effect.map(fromEnvironment(Environment.overrides), (env): GatewayConfig => {
    const keys = [...config.keys]
    if (Option.isSome(env.apiKey)) {
      const key = Redacted.value(env.apiKey.value)
      if (key !== "" && !keys.some((k) => k.key === key)) {
        keys.push({ key, workspace: "default", management: true, interns: true, label: "GATEWAY_API_KEY" })
      }
    }
    return {
      ...config,
      server: {
        ...config.server,
        port: Option.getOrElse(env.port, () => config.server.port),
        host: Option.getOrElse(env.host, () => config.server.host)
      },
      storage: Option.match(env.databaseUrl, { onNone: () => config.storage, onSome: Redacted.value }),
      limits: Option.match(env.redisUrl, {
        onNone: () => config.limits,
        onSome: (url) => ({ ...config.limits, redisUrl: Redacted.value(url) })
      }),
      keys
    }
  })

/** The configuration this process runs with. */
export const resolve: Effect.Effect<Resolved, ConfigError, FileSystem.FileSystem> = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const named = yield* fromEnvironment(Environment.overrides.pipe(Config.map((env) => env.configPath)))
  const path = Option.isSome(named)
    ? named
    : (yield* fs.exists(DEFAULT_PATH).pipe(Effect.orElseSucceed(() => false)))
    ? Option.some(DEFAULT_PATH)
    : Option.none()
  const loaded = Option.isSome(path)
    ? yield* readFile(path.value)
    : { config: BuiltinCatalogue.configFor(yield* fromEnvironment(Environment.providerKeys)), warnings: [] }
  return { config: yield* withOverrides(loaded.config), path, warnings: loaded.warnings }
})
