/**
 * Why the gateway could not start, as tagged errors that say it in one line: the address that could not be listened
 * on, the storage that could not be opened (host, port and cause, never a password), a bad configuration.
 */
import * as Data from "effect/Data"

const causeText = (cause: unknown): string => {
  const error = cause as { code?: unknown; message?: unknown; cause?: unknown } | undefined
  const inner = error?.cause as { code?: unknown; message?: unknown } | undefined
  const code = typeof inner?.code === "string" ? inner.code : typeof error?.code === "string" ? error.code : undefined
  const message = typeof inner?.message === "string"
    ? inner.message
    : typeof error?.message === "string"
    ? error.message
    : String(cause)
  return code === undefined || message.includes(code) ? message : `${code}: ${message}`
}

/** The port could not be listened on. */
export class ListenError extends Data.TaggedError("ListenError")<{
  readonly host: string
  readonly port: number
  readonly cause: NodeJS.ErrnoException
}> {
  override get message(): string {
    const where = `${this.host}:${this.port}`
    switch (this.cause.code) {
      case "EADDRINUSE":
        return `cannot listen on ${where}: the port is in use (set PORT or server.port to another one)`
      case "EACCES":
        return `cannot listen on ${where}: permission denied (ports below 1024 need privileges)`
      case "EADDRNOTAVAIL":
        return `cannot listen on ${where}: no such address on this machine (check HOST or server.host)`
      default:
        return `cannot listen on ${where}: ${causeText(this.cause)}`
    }
  }
}

/** The storage could not be opened or migrated. */
export class StorageError extends Data.TaggedError("StorageError")<{
  /** Where, without credentials: `PostgreSQL at 127.0.0.1:5432 (database test)`, `SQLite file ./data/gateway.db`. */
  readonly target: string
  readonly reason: string
}> {
  override get message(): string {
    return `cannot open storage, ${this.target}: ${this.reason}`
  }

  /** The error for a storage URL and what its adapter failed with. */
  static of(url: string, cause: unknown): StorageError {
    return new StorageError({ target: describeStorage(url), reason: causeText(cause) })
  }
}

/** A storage URL as it may be shown: kind, host, port and database, never user or password. */
export const describeStorage = (url: string): string => {
  if (url.startsWith("postgres://") || url.startsWith("postgresql://")) {
    try {
      const parsed = new URL(url)
      const database = parsed.pathname.replace(/^\//, "")
      return `PostgreSQL at ${parsed.hostname}:${parsed.port || "5432"}${database ? ` (database ${database})` : ""}`
    } catch {
      return "PostgreSQL (unparsable URL)"
    }
  }
  if (url.startsWith("sqlite:")) {
    const file = url.slice("sqlite:".length)
    return file === ":memory:" ? "SQLite in memory" : `SQLite file ${file}`
  }
  return url.startsWith("memory") ? "memory" : `'${url.replace(/\/\/[^@/]*@/, "//***@")}'`
}
