// The gateway's storage in a benchmark run: `memory` (the default of bench/run.mjs), `sqlite` (a fresh file in the
// run's temporary folder) or `postgres` (a schema of its own at BENCH_PG_URL, dropped by `cleanup`). Shared by
// bench/run.mjs (BENCH_STORAGE) and bench/growth.mjs (BENCH_GROWTH_STORAGE).
import { randomUUID } from "node:crypto"
import { join } from "node:path"
import { onAbort, tempDir } from "./children.mjs"
import { dropSchema, PG_URL, reachable, schemaUrl } from "./postgres.mjs"

export const STORAGES = ["memory", "sqlite", "postgres"]

/**
 * A storage URL for one gateway process: `{ url, cleanup }`, or `{ skipped }` (why) when PostgreSQL is unreachable.
 * `label` names the file or schema (a run's gateway and baseline each get their own).
 */
export const storageFor = async (storage, label) => {
  if (storage === "memory") return { url: "memory:", cleanup: async () => {} }
  const id = `${label}_${randomUUID().replaceAll("-", "")}`
  if (storage === "sqlite") return { url: `sqlite:${join(tempDir(), `${id}.db`)}`, cleanup: async () => {} }
  if (!(await reachable(PG_URL))) return { skipped: `PostgreSQL at ${new URL(PG_URL).host} is unreachable` }
  const schema = `mg_bench_${id}`.toLowerCase().replace(/[^a-z0-9_]/g, "_")
  const cleanup = () => dropSchema(PG_URL, schema)
  // Dropped by the caller at its end, or by a run that fails or is interrupted before (`DROP ... IF EXISTS`).
  onAbort(cleanup)
  return { url: schemaUrl(schema), cleanup }
}
