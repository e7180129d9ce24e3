/**
 * An intern's daemon: a small HTTP server on a loopback port that a terminal client attaches to with the token that
 * `GET /interns/{id}/daemon-access` revealed. The daemon verifies the token (its signature with the intern's daemon
 * key, the intern, the expiry) before anything else, then lets the client chat with the intern; each turn is relayed
 * to the gateway (`ChatRelay`), which runs it through the intern chat use case.
 *
 * - `GET /health`: `{"intern": id, "status": "ok"}` (no credential; provisioning checks it).
 * - `GET /attach[?session_id=...]` with `Upgrade: model-gateway-terminal` and `Authorization: Bearer <token>`: 101,
 *   then newline-delimited JSON both ways. The client sends `{"type":"message","content":"..."}`; the daemon sends
 *   `{"type":"ready","intern","session_id"}` once, then per turn `{"type":"delta","content"}`s and a
 *   `{"type":"done","session_id","usage"}` (or `{"type":"error","message","reason"}`). One turn at a time; the
 *   session carries on from turn to turn. A refused attach is a 401 with the generic error body.
 */
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { Duplex } from "node:stream"
import { StringDecoder } from "node:string_decoder"
import * as DaemonToken from "./DaemonToken.js"

/** The protocol named in `Upgrade`. */
export const PROTOCOL = "model-gateway-terminal"

/** Where a relayed turn's answer goes. */
export interface TurnSink {
  readonly delta: (content: string) => void
  readonly done: (sessionId: string, usage: unknown) => void
  readonly error: (message: string, reason: string) => void
}

/** Sends one turn to the gateway; the function it returns cancels it (the client went away). */
export type ChatRelay = (
  turn: { readonly sessionId: string | undefined; readonly content: string },
  sink: TurnSink
) => () => void

export interface DaemonOptions {
  readonly internId: string
  /** The intern's daemon key (see `DaemonToken`). */
  readonly key: Uint8Array
  readonly relay: ChatRelay
  /** Epoch milliseconds (tests move it). */
  readonly now?: () => number
}

/** The longest line a client may send. */
const MAX_LINE = 1024 * 1024

const json = (value: unknown): string => `${JSON.stringify(value)}\n`

const refuse = (socket: Duplex, status: number, statusText: string, message: string, reason: string): void => {
  const body = JSON.stringify({ error: { code: status, message, metadata: { reason, retryable: false } } })
  socket.end(
    `HTTP/1.1 ${status} ${statusText}\r\ncontent-type: application/json\r\ncontent-length: ${
      Buffer.byteLength(body)
    }\r\nconnection: close\r\n\r\n${body}`
  )
}

const bearer = (req: IncomingMessage): string | undefined => {
  const value = req.headers.authorization
  return value !== undefined && /^bearer /i.test(value) ? value.slice(7).trim() : undefined
}

/** One attached terminal: its lines in, the intern's answers out, one turn at a time. */
const session = (options: DaemonOptions, socket: Duplex, initialSession: string | undefined): void => {
  let sessionId = initialSession
  let cancel: (() => void) | undefined
  let buffered = ""
  const send = (value: unknown) => {
    if (!socket.destroyed) socket.write(json(value))
  }
  const turn = (content: string) => {
    if (cancel !== undefined) return send({ type: "error", message: "a turn is already running", reason: "busy" })
    cancel = options.relay({ sessionId, content }, {
      delta: (text) => send({ type: "delta", content: text }),
      done: (id, usage) => {
        cancel = undefined
        sessionId = id
        send({ type: "done", session_id: id, usage })
      },
      error: (message, reason) => {
        cancel = undefined
        send({ type: "error", message, reason })
      }
    })
  }
  const line = (text: string) => {
    if (text.trim() === "") return
    let message: unknown
    try {
      message = JSON.parse(text)
    } catch {
      return send({ type: "error", message: "each line must be a JSON object", reason: "bad_request" })
    }
    const m = message as { type?: unknown; content?: unknown }
    if (m?.type !== "message" || typeof m.content !== "string" || m.content.trim() === "") {
      return send({
        type: "error",
        message: "expected {\"type\":\"message\",\"content\":\"...\"}",
        reason: "bad_request"
      })
    }
    turn(m.content)
  }
  // The socket of an upgraded request refuses `setEncoding`: decode (UTF-8 split across chunks included) here.
  const decoder = new StringDecoder("utf8")
  socket.on("data", (chunk: Buffer) => {
    buffered += decoder.write(chunk)
    let newline = buffered.indexOf("\n")
    while (newline !== -1) {
      line(buffered.slice(0, newline))
      buffered = buffered.slice(newline + 1)
      newline = buffered.indexOf("\n")
    }
    if (buffered.length > MAX_LINE) {
      send({ type: "error", message: "line too long", reason: "payload_too_large" })
      socket.end()
    }
  })
  // HTTP servers keep half-open sockets: the client's end is the end of the session.
  const closed = () => {
    cancel?.()
    cancel = undefined
  }
  socket.on("end", () => {
    closed()
    socket.end()
  })
  socket.on("close", closed)
  socket.on("error", () => socket.destroy())
  send({ type: "ready", intern: options.internId, session_id: sessionId ?? null })
}

/** A daemon's server, and how to close it with its attached terminals (which an HTTP server's `close` waits for). */
export interface Daemon {
  readonly server: Server
  readonly close: () => Promise<void>
}

/** The daemon's HTTP server (not listening yet). */
export const make = (options: DaemonOptions): Daemon => {
  const now = options.now ?? Date.now
  const terminals = new Set<Duplex>()
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]
    if (req.method === "GET" && path === "/health") {
      res.writeHead(200, { "content-type": "application/json" })
      return res.end(JSON.stringify({ intern: options.internId, status: "ok" }))
    }
    const status = path === "/attach" ? 426 : 404
    res.writeHead(status, { "content-type": "application/json", ...(status === 426 ? { upgrade: PROTOCOL } : {}) })
    res.end(JSON.stringify({
      error: {
        code: status,
        message: status === 426 ? `attach with Upgrade: ${PROTOCOL}` : "not found",
        metadata: { reason: status === 426 ? "bad_request" : "not_found", retryable: false }
      }
    }))
  })
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? "/", "http://daemon")
    if (url.pathname !== "/attach" || req.headers.upgrade?.toLowerCase() !== PROTOCOL) {
      return refuse(socket, 404, "Not Found", "not found", "not_found")
    }
    const token = bearer(req)
    if (token === undefined) {
      return refuse(socket, 401, "Unauthorized", "missing token: send Authorization: Bearer <token>", "unauthorized")
    }
    const verified = DaemonToken.verify(options.key, token, options.internId, Math.floor(now() / 1000))
    if (!verified.ok) {
      return refuse(
        socket,
        401,
        "Unauthorized",
        `token refused (${verified.reason.replace("_", " ")})`,
        verified.reason
      )
    }
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nupgrade: ${PROTOCOL}\r\nconnection: Upgrade\r\n\r\n`
    )
    // What the client sent right after its request is already read: give it back to the session.
    if (head.length > 0) socket.unshift(head)
    terminals.add(socket)
    socket.once("close", () => terminals.delete(socket))
    session(options, socket, url.searchParams.get("session_id") ?? undefined)
  })
  const close = () =>
    new Promise<void>((resolve) => {
      for (const socket of terminals) socket.destroy()
      server.closeAllConnections()
      server.close(() => resolve())
    })
  return { server, close }
}
