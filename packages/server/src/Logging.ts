/**
 * The gateway's one logger: Effect's `Logger`, human-readable on a terminal (`pretty`), `logfmt` when the output is
 * not a terminal, JSON lines with `LOG_FORMAT=json`; logfmt and JSON lines go out in batches (`LineWriter`). The same
 * logger serves the process entry, the request runtime and the per-request lines (`RequestLog`), so every line has
 * one format.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Environment from "./Environment.js"
import * as LineWriter from "./LineWriter.js"

export type LogFormat = "pretty" | "logfmt" | "json"

/** How the gateway logs: one logger, at a minimum level; logfmt and JSON lines through `writer`. */
export interface Logging {
  readonly format: LogFormat
  readonly logger: Logger.Logger<unknown, void>
  readonly level: LogLevel.LogLevel
  readonly writer: LineWriter.LineWriter
}

/** The logger of a format, writing through `writer` (standard output by default). */
export const make = (
  format: LogFormat,
  level: LogLevel.LogLevel = LogLevel.Info,
  writer: LineWriter.LineWriter = LineWriter.stdout
): Logging => ({
  format,
  writer,
  logger: format === "pretty"
    ? Logger.prettyLogger({ colors: "auto" })
    : Logger.map(format === "json" ? Logger.jsonLogger : Logger.logfmtLogger, writer.write),
  level
})

/** The layer that makes `logging` the logger of the fibers that run with it. */
export const layer = (logging: Logging): Layer.Layer<never> =>
  Layer.merge(Logger.replace(Logger.defaultLogger, logging.logger), Logger.minimumLogLevel(logging.level))

/** What the environment asks for (`LOG_FORMAT`, `LOG_LEVEL`). */
export const fromEnvironment = Effect.map(
  Effect.all([Environment.logFormat, Environment.logLevel]),
  ([format, level]) => ({
    format: Option.getOrElse(format, (): LogFormat => (process.stdout.isTTY ? "pretty" : "logfmt")),
    level
  })
)
