/**
 * What the process reads from its environment, declared with `effect/Config`: where the configuration file is, the
 * overrides of its server and storage settings, the gateway's own key and the providers' keys (secrets as
 * `Redacted`, so they never print), and how to log.
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Either from "effect/Either"
import * as LogLevel from "effect/LogLevel"

/** Overrides of the configuration file, and where it is. */
export const overrides = Config.all({
  /** The configuration file (default `./gateway.config.json` when it exists). */
  configPath: Config.option(Config.string("GATEWAY_CONFIG")),
  /** 0 picks a free port. */
  port: Config.option(
    Config.integer("PORT").pipe(Config.validate({
      message: "Expected a port number from 0 to 65535",
      validation: (port) => port >= 0 && port <= 65535
    }))
  ),
  host: Config.option(Config.string("HOST")),
  /** A storage URL: `sqlite:PATH`, `sqlite::memory:`, `memory:`, `postgres://user:password@host:5432/db`. */
  databaseUrl: Config.option(Config.redacted("DATABASE_URL")),
  /** A management key added to the configuration's keys. */
  apiKey: Config.option(Config.redacted("GATEWAY_API_KEY")),
  /** The Redis that keeps the limits' counters (`limits.redisUrl`). */
  redisUrl: Config.option(Config.redacted("REDIS_URL"))
})

/** The providers' keys that the built-in catalogue uses when there is no configuration file. */
export const providerKeys = Config.all({
  anthropic: Config.option(Config.redacted("ANTHROPIC_API_KEY")),
  openai: Config.option(Config.redacted("OPENAI_API_KEY")),
  openrouter: Config.option(Config.redacted("OPENROUTER_API_KEY"))
})

export type ProviderKeys = Config.Config.Success<typeof providerKeys>

/** `LOG_FORMAT`: `pretty` (default on a terminal), `logfmt` (default otherwise) or `json`. */
export const logFormat = Config.option(Config.literal("pretty", "logfmt", "json")("LOG_FORMAT"))

/** The names `LOG_LEVEL` takes, in any case: Effect's own (`warn`) and the usual spelling (`warning`). */
const LEVELS: Readonly<Record<string, LogLevel.LogLevel>> = {
  all: LogLevel.All,
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  warning: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  none: LogLevel.None
}

/** `LOG_LEVEL`: `info` by default; `warning` (or `warn`) silences the per-request lines. */
export const logLevel = Config.withDefault(
  Config.mapOrFail(Config.string("LOG_LEVEL"), (raw) => {
    const level = LEVELS[raw.trim().toLowerCase()]
    return level === undefined
      ? Either.left(
        ConfigError.InvalidData([], `LOG_LEVEL must be one of ${Object.keys(LEVELS).join(", ")} (got "${raw}")`)
      )
      : Either.right(level)
  }),
  LogLevel.Info
)
