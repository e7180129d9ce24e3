/**
 * A real gateway for the intern and endpoint-catalogue tests: a fake Anthropic upstream, models with zero-data-retention
 * endpoints, and keys of two workspaces in the interns programme and one outside it. Intern daemons run as real child
 * processes (`dist/interns/InternDaemonMain.js`, built by `npm test`) unless a runtime is given.
 */
import type { InternRuntime } from "@model-gateway/core"
import { type ClientRequest, request as httpRequest } from "node:http"
import { fileURLToPath } from "node:url"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import { startFakeAnthropic, startFakeOpenAi } from "../../../packages/provider-adapters/test/fakes/index.js"
import { decode } from "../src/Config.js"
import type { RunningServer } from "../src/Gateway.js"
import { startServer } from "../src/Gateway.js"

/** The daemon program, as `npm test` builds it. */
export const DAEMON_MAIN = fileURLToPath(new URL("../dist/interns/InternDaemonMain.js", import.meta.url))

/** Workspace `acme`: management, interns programme. */
export const ADMIN_KEY = "mg-acme-admin"
/** Workspace `acme`: interns programme, not management. */
export const MEMBER_KEY = "mg-acme-member"
/** Workspace `globex`: interns programme. */
export const OTHER_KEY = "mg-globex-member"
/** Workspace `acme`: outside the interns programme. */
export const OUTSIDER_KEY = "mg-acme-outsider"

export const REGIONAL_HOST = "eu.gateway.test"

export interface InternsHarness {
  readonly anthropic: FakeUpstream
  readonly openai: FakeUpstream
  readonly gateway: RunningServer
  readonly url: string
  close(): Promise<void>
}

export const startInternsHarness = async (
  options: { readonly runtime?: InternRuntime.InternRuntimeService } = {}
): Promise<InternsHarness> => {
  const anthropic = await startFakeAnthropic()
  const openai = await startFakeOpenAi()
  const timeouts = { firstByteMs: 2000, idleMs: 2000, requestMs: 5000 }
  const { config } = decode({
    storage: "memory:",
    providers: {
      anthro: { kind: "anthropic", baseUrl: anthropic.url, apiKey: "sk-upstream-anthropic", timeouts },
      acme: { kind: "openai", baseUrl: openai.url, apiKey: "sk-upstream-openai", timeouts }
    },
    models: {
      "anthro/claude": {
        name: "Fake Claude",
        endpoints: [
          {
            provider: "anthro",
            upstreamModel: "claude-fake-1",
            pricing: { prompt: "0.000003", completion: "0.000015", inputCacheRead: "0.0000003" },
            contextLength: 200000,
            maxCompletionTokens: 8192,
            quantization: "bf16",
            supportedParameters: ["tools", "tool_choice", "temperature"],
            inputModalities: ["text", "image"],
            zdr: true
          },
          {
            // Listed by the endpoint routes; the chats assert what the anthro upstream was sent, so this endpoint is
            // priced out of routing: the price-weighted choice takes it about once in 28,000 requests (at
            // 0.00001/0.0001 it took some 2.6%, and the intern chat test failed that often).
            provider: "acme",
            upstreamModel: "claude-on-acme",
            pricing: { prompt: "0.001", completion: "0.002" },
            zdr: false
          }
        ]
      },
      "acme/gpt": {
        name: "Fake GPT",
        endpoints: [{
          provider: "acme",
          upstreamModel: "gpt-fake-1",
          pricing: { prompt: "0.000001", completion: "0.000002", image: "0.001", request: "0.0001" },
          quantization: "q4_k_m",
          supportedParameters: ["tools", "temperature"],
          supportsVoiceCloning: true,
          zdr: true
        }]
      }
    },
    keys: [
      { key: ADMIN_KEY, workspace: "acme", management: true, interns: true },
      { key: MEMBER_KEY, workspace: "acme", interns: true },
      { key: OTHER_KEY, workspace: "globex", interns: true },
      { key: OUTSIDER_KEY, workspace: "acme" }
    ],
    interns: { regionalHostnames: [REGIONAL_HOST], defaultModel: "anthro/claude" }
  })
  const gateway = await startServer(config, {
    host: "127.0.0.1",
    port: 0,
    requestLog: false,
    interns: options.runtime === undefined ? { daemonEntry: DAEMON_MAIN } : { runtime: options.runtime }
  })
  return {
    anthropic,
    openai,
    gateway,
    url: gateway.url,
    async close() {
      await gateway.close(1000)
      await Promise.all([anthropic.close(), openai.close()])
    }
  }
}

/** A response read whole: status, headers, parsed JSON body. */
export interface Answer {
  readonly status: number
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: any
}

/**
 * A request with `node:http`, which (unlike fetch) lets a test choose the `Host` header; the body parsed as JSON.
 */
export const call = (
  url: string,
  options: { method?: string; key?: string; body?: unknown; headers?: Record<string, string> } = {}
): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body)
    const req: ClientRequest = httpRequest(url, {
      method: options.method ?? "GET",
      headers: {
        ...(options.key === undefined ? {} : { authorization: `Bearer ${options.key}` }),
        ...(payload === undefined
          ? {}
          : { "content-type": "application/json", "content-length": String(Buffer.byteLength(payload)) }),
        ...options.headers
      }
    }, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (chunk) => (text += chunk))
      res.on("end", () => {
        let body: unknown = text
        try {
          body = JSON.parse(text)
        } catch {
          // not JSON: kept as text
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body })
      })
    })
    req.on("error", reject)
    req.end(payload)
  })

/** Polls until `check` holds (or fails after `timeoutMs`). */
export const eventually = async <A>(
  what: string,
  read: () => Promise<A>,
  check: (a: A) => boolean,
  timeoutMs = 10_000
) => {
  const deadline = Date.now() + timeoutMs
  let last: A = await read()
  while (!check(last)) {
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(last)}`)
    await new Promise((r) => setTimeout(r, 25))
    last = await read()
  }
  return last
}

/** A terminal attached to a daemon (a 101), or the daemon's refusal. */
export interface Attached {
  readonly status: number
  readonly body?: any
  /** Sends a message line. */
  readonly send: (line: unknown) => void
  /** The next line the daemon sent, parsed. */
  readonly next: () => Promise<any>
  readonly close: () => void
}

/** Attaches to a daemon as a terminal client does (`GET /attach` with `Upgrade: model-gateway-terminal`). */
export const attach = (origin: string, token: string | undefined, sessionId?: string): Promise<Attached> =>
  new Promise((resolve, reject) => {
    const query = sessionId === undefined ? "" : `?session_id=${encodeURIComponent(sessionId)}`
    const req = httpRequest(`${origin}/attach${query}`, {
      headers: {
        connection: "Upgrade",
        upgrade: "model-gateway-terminal",
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` })
      }
    })
    req.on("upgrade", (res, socket, head) => {
      const lines: Array<any> = []
      const waiting: Array<(line: any) => void> = []
      let buffered = ""
      const read = (chunk: string) => {
        buffered += chunk
        let newline = buffered.indexOf("\n")
        while (newline !== -1) {
          const line = JSON.parse(buffered.slice(0, newline))
          buffered = buffered.slice(newline + 1)
          const waiter = waiting.shift()
          if (waiter) waiter(line)
          else lines.push(line)
          newline = buffered.indexOf("\n")
        }
      }
      read(head.toString("utf8"))
      socket.setEncoding("utf8")
      socket.on("data", read)
      resolve({
        status: res.statusCode ?? 0,
        send: (line) => socket.write(`${typeof line === "string" ? line : JSON.stringify(line)}\n`),
        next: () =>
          lines.length > 0 ? Promise.resolve(lines.shift()) : new Promise((r, fail) => {
            const timer = setTimeout(() => fail(new Error("no line from the daemon within 10 s")), 10_000)
            waiting.push((line) => {
              clearTimeout(timer)
              r(line)
            })
          }),
        close: () => socket.destroy()
      })
    })
    req.on("response", (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (chunk) => (text += chunk))
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          body: JSON.parse(text),
          send: () => undefined,
          next: () => Promise.reject(new Error("not attached")),
          close: () => undefined
        }))
    })
    req.on("error", reject)
    req.end()
  })

/** Sends one message and reads the turn to its end: the text of its deltas, and its last line. */
export const turn = async (terminal: Attached, content: string) => {
  terminal.send({ type: "message", content })
  let text = ""
  for (;;) {
    const line = await terminal.next()
    if (line.type === "delta") text += line.content
    else return { text, last: line }
  }
}
