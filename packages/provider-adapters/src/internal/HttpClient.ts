/**
 * The upstream HTTP client: `node:http`/`node:https` with one keep-alive `Agent` pair per provider, driven through a
 * small handler interface (connect, head, data with back-pressure, end, error), explicit time limits, and an abort.
 *
 * Why not `undici`: on this hot path `http.request` over a keep-alive Agent costs less CPU per request than undici's
 * dispatcher, and not loading undici keeps some 15 MB out of every process (measured; docs/benchmarks.md).
 *
 * Time limits: `connectMs` from the moment a new socket is opened until it is connected (a reused keep-alive socket has
 * none), `headersMs` from the request until the response head, and `bodyMs` as the longest silence between two body
 * reads, or, for a handler that `touches`, between two reads it counts as content. One timer per request, re-armed
 * rather than recreated per read.
 */
import * as http from "node:http"
import type { ClientRequest, IncomingHttpHeaders, IncomingMessage } from "node:http"
import * as https from "node:https"
import type { Socket } from "node:net"

/** A response's headers: lower-case names; repeated headers (`set-cookie`) as arrays. */
export type Headers = IncomingHttpHeaders

/** What a request's reader is told, in order: connect, then head, data and end, or an error at any point. */
export interface Handler {
  /**
   * The handler says which reads of the body are content: `bodyMs` is then re-armed by `touch` (given with the head),
   * not by every read. For a stream whose keep-alives are not content (see `EventStream`).
   */
  readonly touches?: boolean
  /** Called once, before anything else: `abort` ends the request at any point (no handler call follows). */
  onConnect(abort: (reason?: Error) => void): void
  /**
   * The response head; returning false pauses the body until `resume` is called. `touch` re-arms the body's time
   * limit, for a handler that `touches` (a no-op for the others, whose every read re-arms it).
   */
  onHeaders(status: number, headers: Headers, resume: () => void, touch: () => void): boolean
  /** One network read of the body; returning false pauses the body until `resume` (given with the head) is called. */
  onData(chunk: Buffer): boolean
  /** The body has ended. */
  onComplete(): void
  /** The request failed: not sent, not connected, timed out, or the connection broke before the body ended. */
  onError(error: Error): void
}

/** A request or its answer took longer than its time limit. */
export class TimeoutError extends Error {
  /** `touched`: the body's limit was re-armed by its handler, by content alone (see `Handler.touches`). */
  constructor(readonly phase: "connect" | "headers" | "body", readonly ms: number, touched = false) {
    super(
      phase === "connect"
        ? `connecting took longer than ${ms} ms`
        : phase === "headers"
        ? `no response head within ${ms} ms`
        : touched
        ? `the body sent no content for ${ms} ms`
        : `the body was silent for ${ms} ms`
    )
    this.name = "TimeoutError"
  }
}

/** The request was aborted by its reader. */
export class AbortedError extends Error {
  constructor() {
    super("request aborted")
    this.name = "AbortedError"
  }
}

/** The connection closed before the body's end. */
export class PrematureCloseError extends Error {
  readonly code = "UPSTREAM_PREMATURE_CLOSE"
  constructor() {
    super("the upstream closed the connection before the end of the body")
    this.name = "PrematureCloseError"
  }
}

/** An upstream URL split once: adapters call a few fixed URLs. */
export interface Target {
  readonly secure: boolean
  readonly hostname: string
  readonly port: number
  readonly path: string
  /** `scheme://host:port`, for messages. */
  readonly origin: string
}

const targets = new Map<string, Target>()

/** Splits `url` (cached); throws on a URL that is not http(s). */
export const targetOf = (url: string): Target => {
  let target = targets.get(url)
  if (target === undefined) {
    const parsed = new URL(url)
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw new TypeError(`invalid upstream URL protocol ${parsed.protocol}: the URL must start with http: or https:`)
    }
    const secure = parsed.protocol === "https:"
    target = {
      secure,
      // `new URL` keeps IPv6 literals in brackets; node:net wants them bare.
      hostname: parsed.hostname.startsWith("[") ? parsed.hostname.slice(1, -1) : parsed.hostname,
      port: parsed.port === "" ? (secure ? 443 : 80) : Number(parsed.port),
      path: `${parsed.pathname}${parsed.search}`,
      origin: parsed.origin
    }
    if (targets.size >= 1_000) targets.clear()
    targets.set(url, target)
  }
  return target
}

/**
 * One provider's connections: a keep-alive Agent per scheme, created when first used. No cap on connections in use
 * by default: HTTP/1.1 carries one request at a time, so a cap would queue streams inside the gateway, unseen, behind
 * others that may last minutes (the limits that apply are the keys' and workspaces' own, and the provider's). At most
 * `maxFreeSockets` idle connections are kept, each for `freeSocketMs`.
 */
export class Pool {
  private plain: http.Agent | undefined = undefined
  private secure: https.Agent | undefined = undefined
  /** Retired (see `retire`): keeps no connection. */
  private retired = false

  constructor(
    private readonly maxSockets = Infinity,
    private readonly maxFreeSockets = 256,
    private readonly freeSocketMs = 30_000,
    /** A connection idle at least this long before its reuse may have been closed by the upstream (see `isStale`). */
    readonly staleAfterMs = 1_000
  ) {}

  agent(secure: boolean): http.Agent {
    if (secure) return this.secure ??= watched(new https.Agent(this.agentOptions()))
    return this.plain ??= watched(new http.Agent(this.agentOptions()))
  }

  private agentOptions(): http.AgentOptions {
    return {
      keepAlive: !this.retired,
      maxSockets: this.maxSockets,
      maxFreeSockets: this.maxFreeSockets,
      timeout: this.freeSocketMs,
      scheduling: "lifo"
    }
  }

  /** Sockets in use and idle, for tests and diagnostics. */
  get openSockets(): number {
    let n = 0
    for (const agent of [this.plain, this.secure]) {
      if (agent === undefined) continue
      for (const list of Object.values(agent.sockets)) n += list?.length ?? 0
      for (const list of Object.values(agent.freeSockets)) n += list?.length ?? 0
    }
    return n
  }

  /**
   * Keeps no connection any more, without cutting a request: idle connections close now, those in use once their
   * request is over (a request made afterwards asks for `Connection: close`). For a pool whose provider was replaced
   * (a configuration reload): nothing of it is then left once its last request ends, no idle time to wait out.
   */
  retire(): void {
    this.retired = true
    for (const agent of [this.plain, this.secure]) {
      if (agent === undefined) continue
      // The agent's 'free' handler destroys a freed socket of an agent that does not keep connections alive.
      const notKeeping = agent as http.Agent & { keepAlive: boolean }
      notKeeping.keepAlive = false
      for (const list of Object.values(agent.freeSockets)) for (const socket of list ?? []) socket.destroy()
    }
  }

  /**
   * Closes the pool: idle connections at once, then waits up to `graceMs` for the requests still running before
   * ending every connection.
   */
  async drain(graceMs: number): Promise<void> {
    const deadline = Date.now() + graceMs
    for (;;) {
      for (const agent of [this.plain, this.secure]) {
        if (agent === undefined) continue
        for (const list of Object.values(agent.freeSockets)) for (const socket of list ?? []) socket.destroy()
      }
      if (!this.busy || Date.now() >= deadline) break
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    this.destroy()
  }

  private get busy(): boolean {
    for (const agent of [this.plain, this.secure]) {
      if (agent === undefined) continue
      for (const list of Object.values(agent.sockets)) if ((list?.length ?? 0) > 0) return true
    }
    return false
  }

  /** Ends every connection, running requests included. */
  destroy(): void {
    this.plain?.destroy()
    this.secure?.destroy()
  }
}

/** When a pooled connection last became free (a property of the socket, set by its agent's `free` event). */
const freedAt = Symbol("freedAt")

const markFreed = (socket: Socket): void => {
  ;(socket as Socket & { [freedAt]?: number })[freedAt] = Date.now()
}

const watched = <T extends http.Agent>(agent: T): T => agent.on("free", markFreed)

/** How long a reused connection was idle before this request; 0 for a new one. */
const idleMs = (socket: Socket): number => {
  const at = (socket as Socket & { [freedAt]?: number })[freedAt]
  return at === undefined ? 0 : Date.now() - at
}

/** A request body: one text, or the bytes of one in parts, written in order without being joined. */
export type Body = string | ReadonlyArray<Uint8Array>

/** Its length in bytes (the `content-length`). */
const byteLength = (body: Body): number => {
  if (typeof body === "string") return Buffer.byteLength(body)
  let length = 0
  for (const part of body) length += part.byteLength
  return length
}

/** One POST. */
export interface Request {
  readonly headers: Readonly<Record<string, string>>
  readonly body: Body
  readonly connectMs: number
  readonly headersMs: number
  readonly bodyMs: number
}

/**
 * Sends `request` to `target` through `pool` and tells `handler` what happens (see `Handler`). No closure here refers
 * to `request`: its body (a prompt, often hundreds of KB) is free once written, or, on a connection that had been idle
 * a while, once the response head comes (for a retry, see `isStale`); never held as long as the answer streams.
 */
export const post = (pool: Pool, target: Target, request: Request, handler: Handler): void => {
  const { bodyMs, connectMs, headersMs } = request
  const touched = handler.touches === true
  const options: http.RequestOptions = {
    agent: pool.agent(target.secure),
    hostname: target.hostname,
    port: target.port,
    path: target.path,
    method: "POST",
    // Object.assign rather than a spread: a spread object given a new key is slow on V8 11 (Node 20).
    headers: Object.assign({}, request.headers, { "content-length": byteLength(request.body) })
  }
  let done = false
  let req: ClientRequest | undefined = undefined
  let response: IncomingMessage | undefined = undefined
  let timer: NodeJS.Timeout | undefined = undefined
  /**
   * The body, for a retry (see `isStale`): let go once the response head comes, or as soon as the request goes out on
   * a connection other than one idle for `pool.staleAfterMs` or more.
   */
  let body: Body | undefined = request.body
  let retries = 0

  const finish = (error: Error | undefined): void => {
    if (done) return
    done = true
    if (timer !== undefined) clearTimeout(timer)
    if (error === undefined) handler.onComplete()
    else handler.onError(error)
  }
  const abort = (reason?: Error): void => {
    if (done) return
    done = true
    if (timer !== undefined) clearTimeout(timer)
    req?.destroy(reason ?? new AbortedError())
  }
  const expire = (phase: "connect" | "headers" | "body", ms: number): void => {
    if (done) return
    const error = new TimeoutError(phase, ms, touched && phase === "body")
    finish(error)
    req?.destroy(error)
  }
  const resume = (): void => {
    if (!done) response?.resume()
  }
  // Made for a handler that touches only: a request of the others makes no closure for it.
  const touch = touched
    ? (): void => {
      if (!done) timer!.refresh()
    }
    : ignore

  const send = (text: Body): void => {
    const sent = (target.secure ? https : http).request(options)
    req = sent
    // Before anything can destroy the request: a destroyed request emits its error, and an unheard one would throw.
    sent.on("error", (error) => {
      if (sent !== req) return
      // Another connection of the pool may have gone the same way (closed at the same moment): sent again while the
      // connection it went out on was a reused one, at most `STALE_RETRIES` times; a new connection's failure is final.
      if (body !== undefined && !done && sent.reusedSocket && isStale(error) && retries < STALE_RETRIES) {
        retries++
        send(body)
      } else finish(error)
    })
    sent.on("socket", (socket: Socket) => {
      if (done) return
      // Only a request on a connection idle long enough for the upstream to have closed it is sent again: for the
      // others (new connections, and those of a busy pool) the body need not be kept.
      if (!sent.reusedSocket || idleMs(socket) < pool.staleAfterMs) body = undefined
      if (!socket.connecting) return
      // A new connection: its own limit, then the head's limit again from the moment it is connected.
      clearTimeout(timer)
      timer = setTimeout(expire, connectMs, "connect", connectMs)
      socket.once("connect", () => {
        if (done || sent !== req) return
        clearTimeout(timer)
        timer = setTimeout(expire, headersMs, "headers", headersMs)
      })
    })
    sent.on("response", (res: IncomingMessage) => {
      if (done) {
        res.destroy()
        return
      }
      response = res
      body = undefined
      clearTimeout(timer)
      timer = setTimeout(expire, bodyMs, "body", bodyMs)
      res.on("data", (chunk: Buffer) => {
        if (done) return
        if (!touched) timer!.refresh()
        if (!handler.onData(chunk)) res.pause()
      })
      res.on("end", () => finish(undefined))
      res.on("error", (error) => finish(error))
      res.on("close", () => {
        if (!res.complete) finish(new PrematureCloseError())
      })
      if (!handler.onHeaders(res.statusCode ?? 0, res.headers, resume, touch)) res.pause()
    })
    sendAtTurnEnd(sent, text)
  }

  handler.onConnect(abort)
  if (done) return
  timer = setTimeout(expire, headersMs, "headers", headersMs)
  send(request.body)
}

const ignore = (): void => {}

/** At most this many times: the pool's other idle connections may have been closed at the same moment. */
const STALE_RETRIES = 3

/**
 * A keep-alive connection the upstream had closed (its idle time-out) as the request went out on it: reset, or closed,
 * before any answer on a reused connection. Such a request almost never reached the upstream's application, so it is
 * sent again on another connection, as node's documentation advises (`request.reusedSocket`; Go's client does the
 * same), while the one it failed on was reused (at most `STALE_RETRIES` times). Upstreams that do not announce their
 * idle time-out (`Keep-Alive: timeout=N`, which the agent heeds) close connections the pool still holds: uvicorn after
 * 5 s. Only a connection idle for `Pool.staleAfterMs` (1 s) or more can be one: a busy pool's connections are reused
 * within milliseconds, and their requests' bodies (prompts) are not kept for a retry. An upstream that reset a reused
 * connection while it worked on the request would get it twice; the gateway's fallback to another endpoint sends it
 * again anyway.
 */
const isStale = (error: Error): boolean => {
  const code = (error as NodeJS.ErrnoException).code
  return code === "ECONNRESET" || code === "EPIPE"
}

// Requests sent together at the end of the event loop's turn (one `setImmediate`), after the turn's other callbacks,
// rather than each between two of them: the same writes, fewer wake-ups of the upstream, the same code run back to
// back. The server's answers are ended the same way (http-adapter's TurnEnd, which says why; docs/benchmarks.md,
// "writes at the end of the event loop's turn").
let sending: Array<ClientRequest> = []
let bodies: Array<Body> = []

const sendAll = (): void => {
  const requests = sending
  const texts = bodies
  sending = []
  bodies = []
  for (let i = 0; i < requests.length; i++) {
    const req = requests[i]!
    // Aborted in the meantime (the client went away, a time limit): nothing to send.
    if (req.destroyed) continue
    try {
      const body = texts[i]!
      if (typeof body === "string") req.end(body)
      else {
        // The parts in one write of the socket (corked), none of them copied; `end` uncorks.
        req.cork()
        for (const part of body) req.write(part)
        req.end()
      }
    } catch (error) {
      // Its 'error' listener hands the failure to the request's handler; the rest of the turn's requests still go.
      req.destroy(error as Error)
    }
  }
}

const sendAtTurnEnd = (req: ClientRequest, body: Body): void => {
  if (sending.length === 0) setImmediate(sendAll)
  sending.push(req)
  bodies.push(body)
}
