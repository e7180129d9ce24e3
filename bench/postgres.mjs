// PostgreSQL for the benchmarks that can use it (bench/growth.mjs, bench/batches.mjs): whether it is there, and
// dropping the schema a run made.
import { connect } from "node:net"

/** The benchmarks' PostgreSQL (BENCH_PG_URL). */
export const PG_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/** A gateway's storage URL for `schema` at PG_URL (the gateway creates the schema). */
export const schemaUrl = (schema) => `${PG_URL}${PG_URL.includes("?") ? "&" : "?"}schema=${schema}`

/** Whether a TCP connection to `url`'s host and port (PostgreSQL's by default) opens within 2 s. */
export const reachable = (url) =>
  new Promise((resolve) => {
    const target = new URL(url)
    const socket = connect({ host: target.hostname, port: Number(target.port || 5432) })
    const done = (ok) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(2000, () => done(false))
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
  })

/** Drops a run's schema at `url` with the `pg` client @effect/sql-pg brings along; a failure is only reported. */
export const dropSchema = async (url, schema) => {
  try {
    const { default: pg } = await import("pg")
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
    await client.end()
  } catch (error) {
    console.error(`  (could not drop schema ${schema}: ${error.message})`)
  }
}
