/**
 * A terminal client of an intern's daemon: asks the gateway for the daemon's access (`GET /interns/{id}/daemon-access`
 * with an API key of the intern's workspace), then attaches to the daemon with the token it got (`GET /attach` with
 * `Upgrade: model-gateway-terminal`) and exchanges newline-delimited JSON: `{"type":"message","content"}` out;
 * `ready`, then per turn `delta`s and a `done` (or an `error`) in. Only Node's own modules.
 */
import { request } from "node:http"
import { request as requestTls } from "node:https"
import type { Duplex } from "node:stream"
import { StringDecoder } from "node:string_decoder"

export const PROTOCOL = "model-gateway-terminal"

/** Where the daemon is and the short-lived token it accepts. */
export interface DaemonAccess {
  readonly origin: string
  readonly token: string
}

/** What the daemon says. */
export type DaemonLine =
  | { readonly type: "ready"; readonly intern: string; readonly session_id: string | null }
  | { readonly type: "delta"; readonly content: string }
  | { readonly type: "done"; readonly session_id: string; readonly usage: unknown }
  | { readonly type: "error"; readonly message: string; readonly reason: string }

/** A refusal from the gateway or the daemon, with the generic error body's reason. */
export class TerminalError extends Error {
  constructor(readonly status: number, message: string, readonly reason: string | undefined) {
    super(message)
  }
}

const errorOf = (status: number, text: string): TerminalError => {
  try {
    const { error } = JSON.parse(text) as { error: { message: string; metadata?: { reason?: string } } }
    return new TerminalError(status, `${status}: ${error.message}`, error.metadata?.reason)
  } catch {
    return new TerminalError(status, `${status}: ${text}`, undefined)
  }
}

/** `GET {gateway}/interns/{internId}/daemon-access`; `gateway` includes the base path (`http://host:8080/v1`). */
export const daemonAccess = async (gateway: string, apiKey: string, internId: string): Promise<DaemonAccess> => {
  const response = await fetch(`${gateway.replace(/\/+$/, "")}/interns/${encodeURIComponent(internId)}/daemon-access`, {
    headers: { authorization: `Bearer ${apiKey}` }
  })
  const text = await response.text()
  if (response.status !== 200) throw errorOf(response.status, text)
  return JSON.parse(text) as DaemonAccess
}

/** An attached terminal: send messages, receive the daemon's lines. */
export interface Terminal {
  /** The session the daemon continues (null until the first turn ends, for a new one). */
  readonly sessionId: string | null
  readonly send: (content: string) => void
  /** Every line the daemon sends, until the connection closes. */
  readonly lines: AsyncIterable<DaemonLine>
  readonly close: () => void
}

/** Attaches to the daemon at `origin` with `token`; resumes `sessionId` when given. */
export const attach = (access: DaemonAccess, sessionId?: string): Promise<Terminal> =>
  new Promise((resolve, reject) => {
    const url = new URL("/attach", access.origin)
    if (sessionId !== undefined) url.searchParams.set("session_id", sessionId)
    const req = (url.protocol === "https:" ? requestTls : request)(url, {
      headers: { connection: "Upgrade", upgrade: PROTOCOL, authorization: `Bearer ${access.token}` }
    })
    req.on("response", (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (chunk: string) => (text += chunk))
      res.on("end", () => reject(errorOf(res.statusCode ?? 0, text)))
    })
    req.on("upgrade", (_res, socket: Duplex, head: Buffer) => {
      const queue: Array<DaemonLine | null> = []
      let wake: (() => void) | undefined
      let buffered = ""
      const decoder = new StringDecoder("utf8")
      const push = (line: DaemonLine | null) => {
        queue.push(line)
        wake?.()
      }
      const read = (chunk: Buffer) => {
        buffered += decoder.write(chunk)
        let newline = buffered.indexOf("\n")
        while (newline !== -1) {
          const line = buffered.slice(0, newline).trim()
          buffered = buffered.slice(newline + 1)
          if (line !== "") push(JSON.parse(line) as DaemonLine)
          newline = buffered.indexOf("\n")
        }
      }
      read(head)
      socket.on("data", read)
      socket.on("close", () => push(null))
      socket.on("error", () => socket.destroy())
      const lines: AsyncIterable<DaemonLine> = {
        async *[Symbol.asyncIterator]() {
          for (;;) {
            while (queue.length === 0) await new Promise<void>((r) => (wake = r))
            const line = queue.shift()!
            if (line === null) return
            yield line
          }
        }
      }
      resolve({
        sessionId: sessionId ?? null,
        send: (content) => socket.write(`${JSON.stringify({ type: "message", content })}\n`),
        lines,
        close: () => socket.end()
      })
    })
    req.on("error", reject)
    req.end()
  })
