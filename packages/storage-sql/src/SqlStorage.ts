/**
 * SQL storage layers: `Keys`, `UsageLog`, `EndpointStats`, `SessionAffinity`, `InternStore` and `BatchStore` on SQLite
 * (a file or `:memory:`) or PostgreSQL, with the migrations applied when the layer is built. The SQL client stays inside
 * the layer. Each driver is loaded when a layer of its database is built (`import()`): a process on SQLite never loads
 * `pg`, one on PostgreSQL never loads `better-sqlite3`.
 */
import type { MigrationError } from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { Stores as CoreStores } from "@model-gateway/core"
import type * as ConfigError from "effect/ConfigError"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { mkdirSync, statSync } from "node:fs"
import * as NodePath from "node:path"
import * as Migrations from "./Migrations.js"
import * as SqlBatchStore from "./SqlBatchStore.js"
import * as SqlEndpointStats from "./SqlEndpointStats.js"
import * as SqlInternStore from "./SqlInternStore.js"
import * as SqlKeys from "./SqlKeys.js"
import * as SqlQuotaStore from "./SqlQuotaStore.js"
import * as SqlSessionAffinity from "./SqlSessionAffinity.js"
import * as SqlUsageLog from "./SqlUsageLog.js"

/** A storage configuration that cannot work (bad URL, bad schema name, unusable path). */
export class SqlStorageError extends Data.TaggedError("SqlStorageError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** Everything that can fail while building a storage layer. */
export type StorageBuildError = SqlStorageError | SqlError | MigrationError | ConfigError.ConfigError

export interface StoreOptions
  extends
    SqlKeys.SqlKeysOptions,
    SqlUsageLog.SqlUsageLogOptions,
    SqlEndpointStats.SqlEndpointStatsOptions,
    SqlSessionAffinity.SqlSessionAffinityOptions
{}

type Stores = CoreStores.Stores

export interface SqliteOptions extends StoreOptions {
  /** A file path (its directory is created if missing) or `:memory:`. */
  readonly filename: string
  /**
   * Whether a worker thread writes the usage log's batches to a database file, on a connection of its own (default
   * true; a `:memory:` database is always written on the event loop, where its one connection lives).
   */
  readonly usageWriterThread?: boolean | undefined
}

export interface PgOptions extends StoreOptions {
  /** `postgres://user:password@host:port/database`. */
  readonly url: string | Redacted.Redacted<string>
  /** A schema to keep the tables in, created if missing (default: the server's search_path). */
  readonly schema?: string | undefined
}

/**
 * `Keys`, `UsageLog`, `EndpointStats`, `SessionAffinity`, `InternStore`, `BatchStore` and `QuotaStore` over the
 * `SqlClient` in context, after running the migrations.
 */
export const layer = (
  options: StoreOptions = {},
  usagePlacement: SqlUsageLog.Placement = {}
): Layer.Layer<Stores, SqlError | MigrationError, SqlClient.SqlClient> =>
  Layer.mergeAll(
    SqlKeys.layer(options),
    SqlUsageLog.layer(options, usagePlacement),
    SqlEndpointStats.layer(options),
    SqlSessionAffinity.layer(options),
    SqlInternStore.layer,
    SqlBatchStore.layer,
    SqlQuotaStore.layer
  ).pipe(Layer.provide(Migrations.layer))

/** A database driver, loaded when its storage is built; a driver that cannot load (a missing native module) fails it. */
const loadDriver = <A>(database: string, load: () => Promise<A>): Effect.Effect<A, SqlStorageError> =>
  Effect.tryPromise({
    try: load,
    catch: (cause) => new SqlStorageError({ message: `Cannot load the ${database} driver`, cause })
  })

/** Storage in a SQLite database file (or `:memory:`). */
export const layerSqlite = (options: SqliteOptions): Layer.Layer<Stores, StorageBuildError> => {
  const client = Layer.unwrapEffect(
    Effect.try({
      try: () => {
        if (isFilePath(options.filename)) {
          makeDirectory(NodePath.dirname(NodePath.resolve(options.filename)))
        }
      },
      catch: (cause) => new SqlStorageError({ message: "Cannot create the directory of the SQLite database", cause })
    }).pipe(
      Effect.zipRight(loadDriver("SQLite", () => import("@effect/sql-sqlite-node/SqliteClient"))),
      Effect.map((SqliteClient) => SqliteClient.layer({ filename: options.filename }))
    )
  )
  const usageOffThread = options.usageWriterThread !== false && isFilePath(options.filename)
  return layer(options, usageOffThread ? { sqliteFile: NodePath.resolve(options.filename) } : {}).pipe(
    Layer.provide(client)
  )
}

/**
 * `mkdirSync(dir, { recursive: true })`, one level at a time: node 20's own never returns for a directory under
 * `/proc` (a `mkdir` there fails with ENOENT, which it takes for a parent still to make), and the gateway hung at start
 * at full CPU, deaf to SIGTERM, for `sqlite:/proc/x/gateway.db`.
 */
const makeDirectory = (dir: string): void => {
  if (madeOrThere(dir)) return
  const parent = NodePath.dirname(dir)
  if (parent === dir) mkdirSync(dir)
  makeDirectory(parent)
  if (!madeOrThere(dir)) mkdirSync(dir)
}

/** Makes `dir` when its parent is there: true when it is a directory now, false when its parent is missing. */
const madeOrThere = (dir: string): boolean => {
  try {
    mkdirSync(dir)
    return true
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "EEXIST" && statSync(dir).isDirectory()) return true
    if (code === "ENOENT") return false
    throw error
  }
}

const isFilePath = (filename: string) => filename !== "" && filename !== ":memory:" && !filename.startsWith("file:")

const schemaName = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/

/** Storage in PostgreSQL, optionally in its own schema. */
export const layerPg = (options: PgOptions): Layer.Layer<Stores, StorageBuildError> => {
  const schema = options.schema
  if (schema !== undefined && !schemaName.test(schema)) {
    return Layer.fail(new SqlStorageError({ message: `Invalid PostgreSQL schema name "${schema}"` }))
  }
  const raw = Redacted.isRedacted(options.url) ? Redacted.value(options.url) : options.url
  let url: string
  try {
    url = schema === undefined ? raw : withSearchPath(raw, schema)
  } catch (cause) {
    return Layer.fail(new SqlStorageError({ message: "Invalid PostgreSQL URL", cause }))
  }
  const client = Layer.unwrapEffect(
    Effect.map(
      loadDriver("PostgreSQL", () => import("@effect/sql-pg/PgClient")),
      (PgClient) => PgClient.layer({ url: Redacted.make(url), applicationName: "model-gateway" })
    )
  )
  const stores = layer(options)
  const withSchema = schema === undefined ? stores : stores.pipe(Layer.provide(ensureSchema(schema)))
  return withSchema.pipe(Layer.provide(client))
}

// Every pooled connection gets the schema first on its search_path (libpq `options`).
const withSearchPath = (raw: string, schema: string): string => {
  const url = new URL(raw)
  const existing = url.searchParams.get("options")
  const option = `-c search_path=${schema}`
  url.searchParams.set("options", existing ? `${existing} ${option}` : option)
  return url.toString()
}

const ensureSchema = (schema: string): Layer.Layer<never, SqlError, SqlClient.SqlClient> =>
  Layer.effectDiscard(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE SCHEMA IF NOT EXISTS ${sql(schema)}`.pipe(
      // Another process may create it at the same moment; only fail when it still does not exist.
      Effect.catchAll((error) =>
        Effect.flatMap(
          sql`SELECT 1 FROM pg_namespace WHERE nspname = ${schema}`,
          (rows) => rows.length > 0 ? Effect.void : Effect.fail(error)
        )
      )
    )
  }))

/**
 * Storage chosen by URL: `sqlite:PATH`, `sqlite::memory:` or `postgres://...` (`postgresql://...`).
 * A PostgreSQL URL may carry `schema=NAME` in its query to use a schema of its own.
 */
export const layerFromUrl = (
  url: string,
  options: StoreOptions = {}
): Layer.Layer<Stores, StorageBuildError> => {
  const parsed = parseUrl(url)
  if (parsed._tag === "Invalid") return Layer.fail(new SqlStorageError({ message: parsed.message }))
  return parsed._tag === "Sqlite"
    ? layerSqlite({ ...options, filename: parsed.filename })
    : layerPg({ ...options, url: Redacted.make(parsed.url), schema: parsed.schema })
}

/** What a storage URL designates; the message of `Invalid` never repeats the URL (it may hold a password). */
export type ParsedUrl =
  | { readonly _tag: "Sqlite"; readonly filename: string }
  | { readonly _tag: "Pg"; readonly url: string; readonly schema: string | undefined }
  | { readonly _tag: "Invalid"; readonly message: string }

const expected = "expected sqlite:PATH, sqlite::memory: or postgres://user@host:port/database"

/** Reads a storage URL (see `layerFromUrl`). */
export const parseUrl = (url: string): ParsedUrl => {
  const trimmed = url.trim()
  if (trimmed.startsWith("sqlite:")) {
    let filename = trimmed.slice("sqlite:".length)
    if (filename.startsWith("//")) filename = filename.slice(2)
    return filename === ""
      ? { _tag: "Invalid", message: `Storage URL has no SQLite path; ${expected}` }
      : { _tag: "Sqlite", filename }
  }
  if (trimmed.startsWith("postgres://") || trimmed.startsWith("postgresql://")) {
    let parsed: URL
    try {
      parsed = new URL(trimmed)
    } catch {
      return { _tag: "Invalid", message: `Storage URL is not a valid PostgreSQL URL; ${expected}` }
    }
    if (parsed.hostname === "" && !parsed.searchParams.has("host")) {
      return { _tag: "Invalid", message: `PostgreSQL storage URL has no host; ${expected}` }
    }
    const schema = parsed.searchParams.get("schema") ?? undefined
    parsed.searchParams.delete("schema")
    return { _tag: "Pg", url: parsed.toString(), schema }
  }
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(trimmed)?.[1]
  return {
    _tag: "Invalid",
    message: scheme === undefined
      ? `Storage URL has no scheme; ${expected}`
      : `Unsupported storage URL scheme "${scheme}:"; ${expected}`
  }
}
