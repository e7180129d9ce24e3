import * as Http from "node:http"
import * as Net from "node:net"
import type { AddressInfo } from "node:net"
import type { Socket } from "node:net"

/**
 * What the fake does with one request. Queued with `script`, or the fallback set with `setDefault`.
 * `afterEvents` counts SSE frames (every `event:`/`data:` frame, `ping` and `[DONE]` included).
 */
export type Behaviour =
  | {
    readonly kind: "ok"
    readonly latencyMs?: number
    readonly chunkDelayMs?: number
    /** A stream's body ends this long after its last event (the chunked encoding's last chunk), not at once. */
    readonly endDelayMs?: number
  }
  | {
    readonly kind: "status"
    readonly status: number
    readonly body?: unknown
    readonly headers?: Record<string, string>
  }
  | { readonly kind: "hang" }
  | { readonly kind: "cut"; readonly afterEvents: number; readonly chunkDelayMs?: number }
  | { readonly kind: "malformed"; readonly afterEvents: number; readonly chunkDelayMs?: number }
  | { readonly kind: "stall"; readonly afterEvents: number; readonly chunkDelayMs?: number }
  /**
   * After that many frames, nothing but the protocol's keep-alives (see `Protocol.keepAlives`), `everyMs` apart (50 ms
   * by default), for `forMs` (5 s); then the body ends, without its terminal frame. JSON: as `stall`.
   */
  | {
    readonly kind: "keepAliveStall"
    readonly afterEvents: number
    readonly everyMs?: number
    readonly forMs?: number
    readonly chunkDelayMs?: number
  }
  /** Ends the answer cleanly after that many frames, without its terminal frame (JSON: a clean half body). */
  | { readonly kind: "end"; readonly afterEvents: number; readonly chunkDelayMs?: number }
  | {
    readonly kind: "errorEvent"
    readonly afterEvents: number
    readonly status?: number
    readonly chunkDelayMs?: number
    /** The body ends this long after the error event, not at once. */
    readonly endDelayMs?: number
  }
  | { readonly kind: "destroy" }

/** One tool call of a reply; the fake assigns `toolu_fake_<n>` / `call_fake_<n>` when `id` is absent. */
export interface ReplyToolCall {
  readonly id?: string
  readonly name: string
  readonly input: unknown
  /**
   * The Anthropic fake streams these `input_json_delta` fragments instead of its input's JSON in pieces: `[""]` (what
   * Anthropic sends for a tool without input) or `[]` (no delta at all).
   */
  readonly fragments?: ReadonlyArray<string>
}

/**
 * Token counts of a reply, with Anthropic's meaning: `input` excludes cached tokens. The OpenAI fake
 * reports `prompt_tokens = input + cacheRead` and `cached_tokens = cacheRead` (it has no cache writes).
 */
export interface ReplyUsage {
  readonly input?: number
  readonly output?: number
  readonly cacheRead?: number
  readonly cacheWrite?: number
}

/** What an `ok` answer contains. `stopReason` may use either provider's vocabulary; it is mapped. */
export type Reply =
  & (
    | { readonly text: string; readonly thinking?: string }
    | { readonly toolCalls: ReadonlyArray<ReplyToolCall>; readonly text?: string; readonly thinking?: string }
  )
  & { readonly usage?: ReplyUsage; readonly stopReason?: string }

/** One request as received by a fake. `body` is the parsed JSON (the raw text when it was not JSON), `text` the text. */
export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly headers: Record<string, string | string[] | undefined>
  readonly body: any
  readonly text: string
}

/** A running fake provider: a real HTTP server on 127.0.0.1 with fault knobs. */
export interface FakeUpstream {
  /** Base URL as the provider's clients expect it (Anthropic without `/v1`, OpenAI with it). */
  readonly url: string
  readonly port: number
  readonly requests: Array<RecordedRequest>
  /** Requests whose client disconnected before the response was complete. */
  readonly aborted: () => number
  readonly inFlight: () => number
  /** Connections open now (keep-alive ones included). */
  readonly connections: () => number
  /** Queues behaviours, consumed one per model request; when empty, the default applies. */
  script(...behaviours: Array<Behaviour>): void
  setDefault(b: Behaviour): void
  /** Overrides what an `ok` (and the faulty stream kinds) answer. */
  setReply(fn: (body: any) => Reply): void
  /** Clears requests, queue, counters, the reply override and the default. */
  reset(): void
  close(): Promise<void>
}

export interface FakeUpstreamOptions {
  readonly default?: Behaviour
  readonly reply?: (body: any) => Reply
  /** When set, the credential must equal it (otherwise only its presence is checked). */
  readonly apiKey?: string
}

/** Deterministic per-fake id sequences; reset with the fake. */
export interface Ids {
  readonly next: (name: string) => number
}

export interface ErrorAnswer {
  readonly status: number
  readonly body: unknown
  readonly headers?: Record<string, string>
}

/** The wire-format half of a fake: everything that differs between providers. */
export interface Protocol {
  readonly basePath: string
  readonly route: (method: string, path: string) => boolean
  /**
   * Other routes, by `"METHOD /path"`: each answers JSON (its body given the request's), after the same behaviour
   * (faults), credential check and latency as the main route.
   */
  readonly extra?: Readonly<Record<string, (body: any, ids: Ids) => unknown>> | undefined
  /**
   * A route answering binary audio (`POST path`), after the same behaviour, credential check and latency as the main
   * route: the answer's chunks are written one by one (`chunkDelayMs` apart); `afterEvents` of the faulty kinds counts
   * chunks (`cut` drops the connection, `stall` stops writing); `malformed` answers a JSON body with a 200.
   */
  readonly audio?: {
    readonly path: string
    readonly validate: (body: any) => ErrorAnswer | undefined
    readonly answer: (body: any) => AudioAnswer
  } | undefined
  readonly requestId: (ids: Ids) => string
  readonly responseHeaders: (requestId: string) => Record<string, string>
  /** An error answer for unauthenticated requests, or undefined when the credential is fine. */
  readonly authorize: (req: RecordedRequest, apiKey: string | undefined, requestId: string) => ErrorAnswer | undefined
  /** An error answer when the body is not acceptable, or undefined. */
  readonly validate: (body: any, requestId: string, path: string) => ErrorAnswer | undefined
  readonly notFound: (req: RecordedRequest, requestId: string) => ErrorAnswer
  /** The provider's default error body (and headers) for a status. */
  readonly errorFor: (status: number, requestId: string) => ErrorAnswer
  readonly defaultReply: (body: any) => Reply
  /** The JSON answer of a main route (`path` tells which, when a protocol has several). */
  readonly json: (body: any, reply: Reply, ids: Ids, path: string) => unknown
  readonly events: (body: any, reply: Reply, ids: Ids, path: string) => Array<string>
  readonly malformedEvent: string
  /**
   * The frames a stream of `path` keeps its connection open with while the model works, written in turn by
   * `keepAliveStall`: SSE comments, and the events the protocol has for it.
   */
  readonly keepAlives: (body: any, path: string) => ReadonlyArray<string>
  readonly errorEvent: (status: number, requestId: string) => string
  readonly defaultErrorEventStatus: number
}

/** A binary answer: its content type and its chunks. */
export interface AudioAnswer {
  readonly contentType: string
  readonly chunks: ReadonlyArray<Uint8Array>
}

interface Exchange {
  gone: boolean
  killed: boolean
  readonly waiters: Set<() => void>
}

const readBody = (req: Http.IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
    req.on("aborted", () => reject(new Error("aborted")))
  })

const parseBody = (raw: string): { readonly ok: boolean; readonly value: any } => {
  if (raw.length === 0) return { ok: true, value: undefined }
  try {
    return { ok: true, value: JSON.parse(raw) }
  } catch {
    return { ok: false, value: raw }
  }
}

/** Starts a fake server speaking `protocol`. Provider modules wrap this. */
export const startFake = async (protocol: Protocol, options: FakeUpstreamOptions = {}): Promise<FakeUpstream> => {
  const initialDefault: Behaviour = options.default ?? { kind: "ok" }
  const requests: Array<RecordedRequest> = []
  const queue: Array<Behaviour> = []
  const sockets = new Set<Socket>()
  let fallback = initialDefault
  let replyOverride: ((body: any) => Reply) | undefined = options.reply
  let aborted = 0
  let inFlight = 0
  let closing = false
  let counters = new Map<string, number>()
  const ids: Ids = {
    next: (name) => {
      const n = (counters.get(name) ?? 0) + 1
      counters.set(name, n)
      return n
    }
  }

  const wait = (ex: Exchange, ms: number): Promise<void> =>
    new Promise((resolve) => {
      if (ex.gone) return resolve()
      const done = () => {
        clearTimeout(timer)
        ex.waiters.delete(done)
        resolve()
      }
      const timer = setTimeout(done, ms)
      ex.waiters.add(done)
    })

  const write = (ex: Exchange, res: Http.ServerResponse, chunk: string): Promise<void> =>
    new Promise((resolve) => {
      if (ex.gone) return resolve()
      res.write(chunk, () => resolve())
    })

  const kill = (ex: Exchange, res: Http.ServerResponse) => {
    ex.killed = true
    res.socket?.destroy()
  }

  const sendJson = (res: Http.ServerResponse, answer: ErrorAnswer, base: Record<string, string>) => {
    const text = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body)
    res.writeHead(answer.status, {
      ...base,
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(text)),
      ...answer.headers
    })
    res.end(text)
  }

  /** Writes keep-alives, `everyMs` apart, for `forMs` or until the client leaves; then ends the body. */
  const keepAlive = async (
    ex: Exchange,
    res: Http.ServerResponse,
    frames: ReadonlyArray<string>,
    everyMs: number,
    forMs: number
  ) => {
    const until = Date.now() + forMs
    for (let i = 0; !ex.gone && Date.now() < until; i++) {
      await write(ex, res, frames[i % frames.length])
      await wait(ex, everyMs)
    }
    if (!ex.gone) res.end()
  }

  const stream = async (
    ex: Exchange,
    res: Http.ServerResponse,
    behaviour: Behaviour,
    events: Array<string>,
    base: Record<string, string>,
    requestId: string,
    keepAlives: ReadonlyArray<string>
  ) => {
    res.writeHead(200, {
      ...base,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive"
    })
    res.flushHeaders()
    const chunkDelayMs = "chunkDelayMs" in behaviour ? behaviour.chunkDelayMs ?? 0 : 0
    const faultAt = "afterEvents" in behaviour ? behaviour.afterEvents : -1
    for (let i = 0; i <= events.length; i++) {
      if (ex.gone) return
      if (i === faultAt || (i === events.length && faultAt > events.length)) {
        switch (behaviour.kind) {
          case "cut":
            return kill(ex, res)
          case "stall":
            return
          case "keepAliveStall":
            return keepAlive(ex, res, keepAlives, behaviour.everyMs ?? 50, behaviour.forMs ?? 5_000)
          case "end":
            return void res.end()
          case "errorEvent":
            await write(ex, res, protocol.errorEvent(behaviour.status ?? protocol.defaultErrorEventStatus, requestId))
            if (behaviour.endDelayMs !== undefined) await wait(ex, behaviour.endDelayMs)
            return void (ex.gone || res.end())
          case "malformed":
            await write(ex, res, protocol.malformedEvent)
            break
        }
      }
      if (i === events.length) break
      await write(ex, res, events[i])
      if (chunkDelayMs > 0 && i < events.length - 1) await wait(ex, chunkDelayMs)
    }
    if (behaviour.kind === "ok" && behaviour.endDelayMs !== undefined) await wait(ex, behaviour.endDelayMs)
    if (!ex.gone) res.end()
  }

  const single = async (
    ex: Exchange,
    res: Http.ServerResponse,
    behaviour: Behaviour,
    payload: unknown,
    base: Record<string, string>,
    requestId: string
  ) => {
    const text = JSON.stringify(payload)
    const half = text.slice(0, Math.floor(text.length / 2))
    const headers = { ...base, "content-type": "application/json" }
    switch (behaviour.kind) {
      case "cut":
      case "stall":
      case "keepAliveStall":
        res.writeHead(200, { ...headers, "content-length": String(Buffer.byteLength(text)) })
        await write(ex, res, half)
        if (behaviour.kind === "cut") kill(ex, res)
        return
      case "malformed":
      case "end":
        res.writeHead(200, { ...headers, "content-length": String(Buffer.byteLength(half)) })
        return void res.end(half)
      case "errorEvent":
        return sendJson(res, protocol.errorFor(behaviour.status ?? protocol.defaultErrorEventStatus, requestId), base)
      default:
        res.writeHead(200, { ...headers, "content-length": String(Buffer.byteLength(text)) })
        res.end(text)
    }
  }

  const audioStream = async (
    ex: Exchange,
    res: Http.ServerResponse,
    behaviour: Behaviour,
    answer: AudioAnswer,
    base: Record<string, string>
  ) => {
    if (behaviour.kind === "malformed") {
      return sendJson(res, { status: 200, body: { error: { message: "not audio" } } }, base)
    }
    res.writeHead(200, { ...base, "content-type": answer.contentType, "transfer-encoding": "chunked" })
    res.flushHeaders()
    const chunkDelayMs = "chunkDelayMs" in behaviour ? behaviour.chunkDelayMs ?? 0 : 0
    const faultAt = "afterEvents" in behaviour ? behaviour.afterEvents : -1
    for (let i = 0; i < answer.chunks.length; i++) {
      if (ex.gone) return
      if (i === faultAt) {
        if (behaviour.kind === "stall" || behaviour.kind === "keepAliveStall") return
        return kill(ex, res)
      }
      await new Promise<void>((resolve) => (ex.gone ? resolve() : res.write(answer.chunks[i], () => resolve())))
      if (chunkDelayMs > 0 && i < answer.chunks.length - 1) await wait(ex, chunkDelayMs)
    }
    if (faultAt >= answer.chunks.length) {
      if (behaviour.kind === "stall" || behaviour.kind === "keepAliveStall") return
      return kill(ex, res)
    }
    if (!ex.gone) res.end()
  }

  const handle = async (req: Http.IncomingMessage, res: Http.ServerResponse, ex: Exchange) => {
    const raw = await readBody(req)
    const parsed = parseBody(raw)
    const url = new URL(req.url ?? "/", "http://127.0.0.1")
    const recorded: RecordedRequest = {
      method: req.method ?? "GET",
      path: url.pathname,
      headers: { ...req.headers },
      body: parsed.value,
      text: raw
    }
    requests.push(recorded)
    const requestId = protocol.requestId(ids)
    const base = protocol.responseHeaders(requestId)
    const extra = protocol.extra?.[`${recorded.method} ${recorded.path}`]
    const audio = recorded.method === "POST" && protocol.audio?.path === recorded.path ? protocol.audio : undefined
    if (extra === undefined && audio === undefined && !protocol.route(recorded.method, recorded.path)) {
      return sendJson(res, protocol.notFound(recorded, requestId), base)
    }

    const behaviour = queue.shift() ?? fallback
    switch (behaviour.kind) {
      case "destroy":
        return kill(ex, res)
      case "hang":
        return
      case "status": {
        const answer = protocol.errorFor(behaviour.status, requestId)
        return sendJson(res, {
          status: behaviour.status,
          body: behaviour.body ?? answer.body,
          headers: { ...answer.headers, ...behaviour.headers }
        }, base)
      }
    }
    const denied = protocol.authorize(recorded, options.apiKey, requestId)
    if (denied) return sendJson(res, denied, base)
    if (audio !== undefined) {
      const invalid = parsed.ok ? audio.validate(parsed.value) : protocol.errorFor(400, requestId)
      if (invalid) return sendJson(res, invalid, base)
      if (behaviour.kind === "ok" && behaviour.latencyMs) await wait(ex, behaviour.latencyMs)
      if (ex.gone) return
      return audioStream(ex, res, behaviour, audio.answer(parsed.value), base)
    }
    if (extra !== undefined) {
      if (behaviour.kind === "ok" && behaviour.latencyMs) await wait(ex, behaviour.latencyMs)
      if (ex.gone) return
      return single(ex, res, behaviour, extra(parsed.value, ids), base, requestId)
    }
    const invalid = parsed.ok
      ? protocol.validate(parsed.value, requestId, recorded.path)
      : protocol.errorFor(400, requestId)
    if (invalid) return sendJson(res, invalid, base)

    const body = parsed.value
    const reply = (replyOverride ?? protocol.defaultReply)(body)
    if (behaviour.kind === "ok" && behaviour.latencyMs) await wait(ex, behaviour.latencyMs)
    if (ex.gone) return
    if (body.stream === true) {
      const events = protocol.events(body, reply, ids, recorded.path)
      return stream(ex, res, behaviour, events, base, requestId, protocol.keepAlives(body, recorded.path))
    }
    return single(ex, res, behaviour, protocol.json(body, reply, ids, recorded.path), base, requestId)
  }

  const server = Http.createServer((req, res) => {
    inFlight++
    const ex: Exchange = { gone: false, killed: false, waiters: new Set() }
    res.on("close", () => {
      inFlight--
      ex.gone = true
      if (!res.writableFinished && !ex.killed && !closing) aborted++
      for (const waiter of [...ex.waiters]) waiter()
    })
    handle(req, res, ex).catch(() => {
      if (!res.headersSent && !ex.gone) {
        res.writeHead(500)
        res.end()
      }
    })
  })
  server.on("connection", (socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve())
  })
  const port = (server.address() as AddressInfo).port

  return {
    url: `http://127.0.0.1:${port}${protocol.basePath}`,
    port,
    requests,
    aborted: () => aborted,
    inFlight: () => inFlight,
    connections: () => sockets.size,
    script: (...behaviours) => {
      queue.push(...behaviours)
    },
    setDefault: (b) => {
      fallback = b
    },
    setReply: (fn) => {
      replyOverride = fn
    },
    reset: () => {
      requests.length = 0
      queue.length = 0
      aborted = 0
      counters = new Map()
      replyOverride = undefined
      fallback = { kind: "ok" }
    },
    close: () =>
      new Promise<void>((resolve) => {
        closing = true
        server.close(() => resolve())
        server.closeAllConnections()
        for (const socket of sockets) socket.destroy()
      })
  }
}

/** Whether a connection to 127.0.0.1:`port` is refused. */
const refuses = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = Net.connect(port, "127.0.0.1")
    socket.once("connect", () => {
      socket.destroy()
      resolve(false)
    })
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "ECONNREFUSED"))
  })

/** A privileged port that nothing serves (unassigned) and that fetch does not bar as a "bad port". */
const UNSERVED_PORT = 4

/**
 * A base URL on 127.0.0.1 whose port has nothing listening (connections are refused). `UNSERVED_PORT` when it
 * refuses: a port freed by closing a server of our own may be taken by another test file's server running in
 * parallel, which then answers what was meant to be refused. Such a port only when `UNSERVED_PORT` is served.
 */
export const freePortThatRefuses = async (): Promise<string> => {
  if (await refuses(UNSERVED_PORT)) return `http://127.0.0.1:${UNSERVED_PORT}`
  const server = Http.createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.address() as AddressInfo).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return `http://127.0.0.1:${port}`
}

/** Splits text after each whitespace run so that a stream delivers it in several deltas. */
export const splitWords = (text: string): Array<string> => text.match(/\s*\S+\s*|\s+/g) ?? []

/** Splits a JSON text in (up to) three fragments. */
export const splitFragments = (json: string): Array<string> => {
  const size = Math.max(1, Math.ceil(json.length / 3))
  const parts: Array<string> = []
  for (let i = 0; i < json.length; i += size) parts.push(json.slice(i, i + size))
  return parts
}

export const countWords = (text: string | undefined): number => (text ? text.split(/\s+/).filter(Boolean).length : 0)

/** A deterministic stand-in for a tokenizer: a quarter of the JSON length. */
export const estimateTokens = (value: unknown): number =>
  Math.max(1, Math.ceil((JSON.stringify(value) ?? "").length / 4))

export const outputTokens = (reply: Reply): number => {
  if (reply.usage?.output !== undefined) return reply.usage.output
  const calls = "toolCalls" in reply ? reply.toolCalls : []
  const words = countWords(reply.text) + countWords(reply.thinking)
  return Math.max(1, words + calls.reduce((n, call) => n + estimateTokens(call.input ?? {}), 0))
}

const toAnthropic: Record<string, string> = {
  stop: "end_turn",
  tool_calls: "tool_use",
  length: "max_tokens",
  content_filter: "refusal"
}
const toOpenAi: Record<string, string> = {
  end_turn: "stop",
  stop_sequence: "stop",
  tool_use: "tool_calls",
  max_tokens: "length",
  refusal: "content_filter"
}

export const anthropicStopReason = (reply: Reply): string =>
  reply.stopReason ? toAnthropic[reply.stopReason] ?? reply.stopReason : "toolCalls" in reply ? "tool_use" : "end_turn"

export const openAiFinishReason = (reply: Reply): string =>
  reply.stopReason ? toOpenAi[reply.stopReason] ?? reply.stopReason : "toolCalls" in reply ? "tool_calls" : "stop"

/** Concatenated text of a string or an array of content parts/blocks of type "text". */
export const textOf = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content.filter((part) => part?.type === "text").map((part) => String(part.text ?? "")).join(" ")
}
