// Whether a server (PostgreSQL, by default port) is there before a benchmark tries to use it.
import { connect } from "node:net"

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
