/**
 * The Redis server tests share: 127.0.0.1:6379 (or MG_TEST_REDIS_URL). With CI=true the Redis suites always run, and
 * fail when the server is down; without CI they are skipped, with a printed reason, when it is unreachable. Each run
 * keeps its keys under a prefix of its own.
 */
import { connect } from "node:net"

export const redisUrl = process.env.MG_TEST_REDIS_URL ?? "redis://127.0.0.1:6379"

const target = new URL(redisUrl)

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

/** Whether the server accepted a TCP connection. */
export const redisUp = await reachable(target.hostname, Number(target.port || 6379), 2000)

/** Whether a suite named `what` should be skipped; prints why when it is. */
export const skipRedis = (what: string): boolean => {
  const skip = process.env.CI !== "true" && !redisUp
  if (skip) console.warn(`Redis at ${target.host} is unreachable: skipping ${what} (CI is not "true")`)
  return skip
}

/** A key prefix no other test run uses. */
export const redisPrefix = (): string => `mg-test-${globalThis.crypto.randomUUID()}:`
