/**
 * The PostgreSQL server tests share: 127.0.0.1:5432, database `test` (or MG_TEST_PG_URL). With
 * CI=true the PostgreSQL suites always run, and fail when the server is down; without CI they are
 * skipped, with a printed reason, when it is unreachable.
 */
import { connect } from "node:net"

export const pgUrl = process.env.MG_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

const reachable = (host: string, port: number, timeoutMs: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host, port })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(timeoutMs, () => done(false))
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
  })

const target = new URL(pgUrl)

/** Whether the server accepted a TCP connection. */
export const pgUp = await reachable(target.hostname, Number(target.port || 5432), 2000)

/** Whether a suite named `what` should be skipped; prints why when it is. */
export const skipPostgres = (what: string): boolean => {
  const skip = process.env.CI !== "true" && !pgUp
  if (skip) console.warn(`PostgreSQL at ${target.host} is unreachable: skipping ${what} (CI is not "true")`)
  return skip
}

/** Drops a schema the tests made (and everything in it), so that a run leaves nothing behind. */
export const dropSchema = async (schema: string): Promise<void> => {
  const { PgClient } = await import("@effect/sql-pg")
  const { Effect, Redacted } = await import("effect")
  await Effect.runPromise(
    Effect.flatMap(PgClient.PgClient, (sql) => sql`DROP SCHEMA IF EXISTS ${sql(schema)} CASCADE`).pipe(
      Effect.provide(PgClient.layer({ url: Redacted.make(pgUrl) })),
      Effect.scoped
    )
  )
}
