/**
 * Graceful shutdown of the gateway's `node:http` server. In-flight requests and streams finish (for up to the grace
 * period); a connection with no request in flight must not hold the process up for that long.
 *
 * Node alone does not manage that: `closeIdleConnections()` closes only connections that have served a request and
 * read nothing since; a connection that has not sent a whole request head yet (a client that connected and sent
 * nothing, as node's own `fetch` does after a client cancels a response body; or half a head) is not idle to node,
 * and `close()` stops the headers time-out check that would otherwise have closed it. Each such connection kept the
 * process for the whole grace period (30 s). So the server's connections are tracked here: a Set-like map of sockets
 * (added on `connection`, removed on `close`), each with the response it is serving, recorded on each request (a map
 * look-up and a field write: the only cost on the hot path).
 *
 * On shutdown:
 * - the server stops accepting connections;
 * - a connection between requests (node's idle: its last response sent, nothing of a next request read) is closed at
 *   once, as keep-alive connections are: its client must expect that any time;
 * - a connection with no request in flight that opened less than `QUIET_MS` ago (a client that has just connected
 *   and is about to send its request) gets the rest of that time to send a whole request head, which is then served
 *   as any in-flight request; at the end of it, or at once for an older one, it is closed (a silent or half-sent
 *   connection is not a request, and nothing else would close it any more). This is what Go's `Server.Shutdown` does
 *   for new connections, with 5 s;
 * - a request in flight whose answer has not started, and a request arriving during shutdown, are answered with
 *   `Connection: close`: node closes their connection after the answer, and the client knows not to reuse it. A
 *   response whose head went out already (a stream) cannot say so; its connection is closed once it is sent whole;
 * - whatever is still open after the grace period is closed.
 */
import type { IncomingMessage, RequestListener, Server, ServerOptions, ServerResponse } from "node:http"
import { createServer } from "node:http"
import type { Socket } from "node:net"

/** How long a connection with no request in flight may have lived before shutdown closes it (see above). */
export const QUIET_MS = 1_000

/** How often a shutting-down server looks for connections that have become closable. */
const SWEEP_MS = 100

interface Connection {
  /** When it was opened (`performance.now()`). */
  readonly opened: number
  /** The response to its latest request; the request is in flight until the response is sent whole. */
  response: ServerResponse | undefined
}

interface Tracked {
  readonly connections: Map<Socket, Connection>
  closing: boolean
}

const tracked = new WeakMap<Server, Tracked>()

const inFlight = (connection: Connection) => connection.response !== undefined && !connection.response.writableFinished

/** Asks an answer that has not started to close its connection after it (as node does for `Connection: close`). */
const lastOnItsConnection = (response: ServerResponse) => {
  if (!response.headersSent) response.setHeader("connection", "close")
}

/** A `node:http` server for `listener` whose connections are tracked for `shutDown`. */
export const createTrackedServer = (options: ServerOptions, listener: RequestListener): Server => {
  const state: Tracked = { connections: new Map(), closing: false }
  const server = createServer(options, (req: IncomingMessage, res: ServerResponse) => {
    const connection = state.connections.get(req.socket)
    if (connection !== undefined) connection.response = res
    if (state.closing) lastOnItsConnection(res)
    listener(req, res)
  })
  server.on("connection", (socket: Socket) => {
    state.connections.set(socket, { opened: performance.now(), response: undefined })
    socket.once("close", () => state.connections.delete(socket))
  })
  tracked.set(server, state)
  return server
}

/**
 * Closes the connections with no request in flight that are past their quiet time. Between requests is left to
 * `closeIdleConnections`, which also knows whether a byte of the next request was read.
 */
const closeQuiet = (state: Tracked) => {
  const now = performance.now()
  for (const [socket, connection] of state.connections) {
    if (!inFlight(connection) && now - connection.opened >= QUIET_MS) socket.destroy()
  }
}

/**
 * Stops accepting, lets in-flight requests and streams finish for up to `graceMs`, closes connections with no
 * request in flight (see the module's comment), then closes what is left. A server not made by
 * `createTrackedServer` has only its idle connections closed early.
 */
export const shutDown = (server: Server, graceMs: number): Promise<void> =>
  new Promise<void>((resolve) => {
    if (!server.listening) return resolve()
    const state = tracked.get(server)
    const closeAll = () => {
      server.closeAllConnections()
      for (const socket of state?.connections.keys() ?? []) socket.destroy()
    }
    const timer = setTimeout(closeAll, graceMs)
    // Keep-alive connections become idle as their in-flight responses finish: close them as they do; and connections
    // with no request in flight as their quiet time runs out.
    const sweep = setInterval(() => {
      server.closeIdleConnections()
      if (state !== undefined) closeQuiet(state)
    }, SWEEP_MS)
    if (state !== undefined) {
      state.closing = true
      for (const connection of state.connections.values()) {
        if (inFlight(connection)) lastOnItsConnection(connection.response!)
      }
    }
    server.close(() => {
      clearTimeout(timer)
      clearInterval(sweep)
      resolve()
    })
    server.closeIdleConnections()
    if (state !== undefined) closeQuiet(state)
  })
