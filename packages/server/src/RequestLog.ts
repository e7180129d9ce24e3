/**
 * One log line per request, at its completion: every request leaves exactly one usage record (the use cases record
 * theirs, the HTTP layer those it refuses before any use case), so the line is written as the record is. It names the
 * route, status, model, provider, attempts, tokens, cost and duration; request id, key id (never a key) and workspace
 * are annotations. A request whose client went away before its answer has no record; its line (status 499) is written
 * when the HTTP layer tells of it (`UsageLog.abandoned`), and nothing is stored.
 *
 * The line is written directly, not through `Effect.log`: the fiber's log machinery, `annotateLogs` and Effect's
 * formatters cost some 20 µs per request under load (measured), more than a tenth of a request's whole CPU. It is the
 * same line, in the same format, that Effect's logger of the configured format would write.
 */
import { UsageLog } from "@model-gateway/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import * as FiberRefs from "effect/FiberRefs"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as List from "effect/List"
import type * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import type { Logging } from "./Logging.js"

/** The line's text: `POST /v1/messages 200 anthro/claude via anthro attempts=1 tokens=12/34 cost=0.0001 85ms`. */
export const describe = (r: UsageLog.UsageRecord): string => {
  const tokens = r.cacheReadTokens + r.cacheWriteTokens > 0
    ? `${r.inputTokens}+${r.cacheReadTokens}r+${r.cacheWriteTokens}w/${r.outputTokens}`
    : `${r.inputTokens}/${r.outputTokens}`
  return `${r.route} ${r.status}${r.errorType === null ? "" : ` ${r.errorType}`}${
    r.model === null ? "" : ` ${r.model}`
  }${r.provider === null ? "" : ` via ${r.provider}`} attempts=${r.attempts} tokens=${tokens} cost=${r.cost} ${
    Math.round(r.latencyMs)
  }ms`
}

const context = FiberRefs.unsafeMake(new Map())

/** The value of a logfmt pair, as Effect's logfmt logger writes it: bare when it can be, else JSON-quoted. */
const logfmtValue = (value: string): string => (/^[^\s"=]*$/.test(value) ? value : JSON.stringify(value))

/**
 * The line of a record, in the exact form Effect's `logfmtLogger` or `jsonLogger` gives the same entry (a test checks
 * it), built directly: Effect's formatters cost 5–7 µs a line, this 1–2.
 */
export const formatLine = (format: "logfmt" | "json", r: UsageLog.UsageRecord, date: Date): string => {
  const message = describe(r)
  if (format === "json") {
    return JSON.stringify({
      message,
      logLevel: "INFO",
      timestamp: date.toISOString(),
      annotations: { workspace: r.workspace, requestId: r.requestId, stream: r.stream, keyId: r.keyId },
      spans: {},
      fiberId: ""
    })
  }
  // In the order Effect's HashMap of these four annotations iterates.
  return `timestamp=${date.toISOString()} level=INFO fiber= message=${logfmtValue(message)} workspace=${
    logfmtValue(String(r.workspace))
  } requestId=${logfmtValue(r.requestId)} stream=${r.stream} keyId=${logfmtValue(String(r.keyId))}`
}

/** The entry Effect's loggers are given for a record (the pretty logger, and the test of `formatLine`). */
export const entryOf = (r: UsageLog.UsageRecord, date: Date): Logger.Logger.Options<string> => ({
  fiberId: FiberId.none,
  logLevel: LogLevel.Info,
  message: describe(r),
  cause: Cause.empty,
  context,
  spans: List.empty(),
  annotations: HashMap.make(
    ["requestId", r.requestId],
    ["keyId", r.keyId],
    ["workspace", r.workspace],
    ["stream", r.stream]
  ),
  date
})

/** Logs a request's record as `logging` logs, at Info. */
export const logRecord = (logging: Logging): (r: UsageLog.UsageRecord) => void => {
  const { format, writer } = logging
  return format === "pretty"
    ? (r) => logging.logger.log(entryOf(r, new Date()))
    : (r) => writer.write(formatLine(format, r, new Date()))
}

/**
 * Wraps the `UsageLog` in context so that every record is also logged, and every request abandoned by its client only
 * logged (unless Info is below `logging`'s level).
 */
export const layer = (logging: Logging): Layer.Layer<UsageLog.UsageLog, never, UsageLog.UsageLog> =>
  Layer.effect(
    UsageLog.UsageLog,
    Effect.map(UsageLog.UsageLog, (inner) => {
      if (LogLevel.lessThan(LogLevel.Info, logging.level)) return inner
      const log = logRecord(logging)
      return UsageLog.UsageLog.of({
        ...inner,
        record: (r) => Effect.zipRight(inner.record(r), Effect.sync(() => log(r))),
        abandoned: (r) => Effect.sync(() => log(r))
      })
    })
  )
