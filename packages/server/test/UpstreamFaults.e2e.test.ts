/**
 * Upstream faults, every one on both adapters (an Anthropic Messages upstream and an OpenAI chat completions upstream)
 * and in both modes (JSON and event stream), through a real server. Each case starts a fresh gateway, so that the
 * health one fault leaves (a cooldown, a held Retry-After) never decides another case. `docs/reliability.md` lists
 * each fault with the test that covers it.
 */
import { UsageLog } from "@model-gateway/core"
import { Effect } from "effect"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { Behaviour, FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import {
  freePortThatRefuses,
  startFakeAnthropic,
  startFakeOpenAi
} from "../../../packages/provider-adapters/test/fakes/index.js"
import { decode } from "../src/Config.js"
import { type RunningServer, startServer } from "../src/Gateway.js"
import { readEvents } from "./harness.js"
import { OffsetClock } from "./OffsetClock.js"

const KEY = "mg-faults-key"

let anthropic: FakeUpstream
let openai: FakeUpstream
let refused: string

beforeAll(async () => {
  anthropic = await startFakeAnthropic()
  openai = await startFakeOpenAi()
  refused = await freePortThatRefuses()
})
afterAll(() => Promise.all([anthropic.close(), openai.close()]))

/** Both fakes answer 100 input and 10 output tokens, so that who is billed what is known. */
const REPLY = { text: "one two three four five six", usage: { input: 100, output: 10 } }
beforeEach(() => {
  for (const fake of [anthropic, openai]) {
    fake.reset()
    fake.setReply(() => REPLY)
  }
})

const MAIN_PRICE = { prompt: "0.000003", completion: "0.000015" }
const BACKUP_PRICE = { prompt: "0.000001", completion: "0.000002" }
/** What the backup model's answer costs: 100 × 0.000001 + 10 × 0.000002. */
const BACKUP_COST = 0.00012

const configOf = () => {
  const timeouts = { firstByteMs: 400, idleMs: 400, requestMs: 4000 }
  return decode({
    storage: "memory:",
    providers: {
      anthro: { kind: "anthropic", baseUrl: anthropic.url, apiKey: "sk-a", timeouts },
      acme: { kind: "openai", baseUrl: openai.url, apiKey: "sk-o", timeouts },
      anthroDead: { kind: "anthropic", baseUrl: refused, apiKey: "sk-a", timeouts },
      acmeDead: { kind: "openai", baseUrl: `${refused}/v1`, apiKey: "sk-o", timeouts }
    },
    models: {
      "a/main": { endpoints: [{ provider: "anthro", upstreamModel: "claude-main", pricing: MAIN_PRICE }] },
      "a/dead": { endpoints: [{ provider: "anthroDead", upstreamModel: "claude-main", pricing: MAIN_PRICE }] },
      "a/backup": { endpoints: [{ provider: "anthro", upstreamModel: "claude-backup", pricing: BACKUP_PRICE }] },
      "o/main": { endpoints: [{ provider: "acme", upstreamModel: "gpt-main", pricing: MAIN_PRICE }] },
      "o/dead": { endpoints: [{ provider: "acmeDead", upstreamModel: "gpt-main", pricing: MAIN_PRICE }] },
      "o/backup": { endpoints: [{ provider: "acme", upstreamModel: "gpt-backup", pricing: BACKUP_PRICE }] }
    },
    keys: [{ key: KEY, management: true }]
  }).config
}

type Kind = "anthropic" | "openai"
type Mode = "json" | "stream"

/** The adapter under test: its fake, its models, and a backup model on the other adapter. */
const sideOf = (kind: Kind) =>
  kind === "anthropic"
    ? { fake: () => anthropic, main: "a/main", dead: "a/dead", backup: "o/backup", upstreamModel: "claude-main" }
    : { fake: () => openai, main: "o/main", dead: "o/dead", backup: "a/backup", upstreamModel: "gpt-main" }

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly requestId: string
  /** The JSON body (or error body); for a stream, its events. */
  readonly body: any
  readonly events: ReadonlyArray<{ event: string | undefined; data: any }>
  /** The model the answer names. */
  readonly model: string | undefined
}

/** The body `ask` sends. */
const bodyOf = (mode: Mode, model: string, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({
    model,
    max_tokens: 50,
    messages: [{ role: "user", content: "hello" }],
    ...(mode === "stream" ? { stream: true } : {}),
    ...extra
  })

const ask = async (url: string, mode: Mode, model: string, extra: Record<string, unknown> = {}): Promise<Answer> => {
  const response = await fetch(`${url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
    body: bodyOf(mode, model, extra)
  })
  const requestId = response.headers.get("request-id") ?? ""
  if (response.status !== 200 || mode === "json") {
    const body = await response.json() as any
    return { status: response.status, headers: response.headers, requestId, body, events: [], model: body.model }
  }
  const events = await readEvents(response)
  return {
    status: 200,
    headers: response.headers,
    requestId,
    body: undefined,
    events,
    model: events[0]?.data?.message?.model
  }
}

let gateway: RunningServer
const clock = new OffsetClock()

const start = async () => {
  gateway = await startServer(configOf(), { host: "127.0.0.1", port: 0, clock, requestLog: false })
}

const usageOf = async (requestId: string) => {
  const records = await gateway.gateway.runtime.runPromise(
    Effect.flatMap(UsageLog.UsageLog, (log) => Effect.zipRight(log.flush, log.list({ limit: 100 })))
  )
  return records.find((r) => r.requestId === requestId)
}

/** The usage record of a request, once written (a stream's when its scope has closed). */
const recordOf = async (requestId: string) => {
  await expect.poll(() => usageOf(requestId)).toBeDefined()
  return (await usageOf(requestId))!
}

/** The text of the text deltas in some SSE text (or events' JSON), joined. */
const textOf = (texts: ReadonlyArray<string>): string =>
  texts.flatMap((t) => [...t.matchAll(/"type":"text_delta","text":"([^"]*)"/g)].map((m) => m[1])).join("")

/** A complete answer from the backup model, billed for the backup's usage alone. */
const answeredByBackup = async (answer: Answer, backup: string, mode: Mode) => {
  expect(answer.status).toBe(200)
  expect(answer.model, "the answer names the model that answered").toBe(backup)
  if (mode === "stream") expect(answer.events.at(-1)?.event).toBe("message_stop")
  else expect(answer.body.stop_reason).toBe("end_turn")
  const record = await usageOf(answer.requestId)
  expect(record).toMatchObject({ model: backup, status: 200, inputTokens: 100, outputTokens: 10 })
  expect(Number(record!.cost)).toBeCloseTo(BACKUP_COST, 12)
}

/** A stream that broke after content: it ends with an in-band error, never as a complete answer. */
const brokenInBand = (answer: Answer) => {
  expect(answer.status).toBe(200)
  expect(answer.events.some((e) => e.event === "content_block_delta")).toBe(true)
  expect(answer.events.at(-1)?.event).toBe("error")
  expect(answer.events.filter((e) => e.event === "message_stop")).toHaveLength(0)
  const delta = answer.events.find((e) => e.event === "message_delta")
  expect(delta?.data?.delta?.stop_reason ?? null).not.toBe("end_turn")
}

const matrix: ReadonlyArray<[Kind, Mode]> = [
  ["anthropic", "json"],
  ["anthropic", "stream"],
  ["openai", "json"],
  ["openai", "stream"]
]

describe.each(matrix)("%s upstream, %s", (kind, mode) => {
  const side = sideOf(kind)
  const fallback = () => ({ fallbacks: [{ model: side.backup }] })
  beforeEach(start)
  afterEach(() => gateway.close(1000))

  it("429 with Retry-After: held (not asked again while it lasts), the fallback answers", async () => {
    side.fake().script({ kind: "status", status: 429, headers: { "retry-after": "30" } })
    await answeredByBackup(await ask(gateway.url, mode, side.main, fallback()), side.backup, mode)
    await answeredByBackup(await ask(gateway.url, mode, side.main, fallback()), side.backup, mode)
    expect(side.fake().requests).toHaveLength(1)
    clock.offset += 31_000
    const after = await ask(gateway.url, mode, side.main, fallback())
    expect(after.model, "asked again once the Retry-After has passed").toBe(side.main)
  })

  it("429 with Retry-After and nothing else to try: the client gets 429 with retry-after", async () => {
    side.fake().script({ kind: "status", status: 429, headers: { "retry-after": "30" } })
    const answer = await ask(gateway.url, mode, side.main)
    expect(answer.status).toBe(429)
    expect(answer.body.error.type).toBe("rate_limit_error")
    expect(Number(answer.headers.get("retry-after"))).toBeGreaterThanOrEqual(29)
  })

  it("500 once: the fallback answers, and the endpoint is used again by the next request", async () => {
    side.fake().script({ kind: "status", status: 500, body: { error: { message: "boom" } } })
    await answeredByBackup(await ask(gateway.url, mode, side.main, fallback()), side.backup, mode)
    const next = await ask(gateway.url, mode, side.main, fallback())
    expect(next.model).toBe(side.main)
    expect(side.fake().requests).toHaveLength(2)
  })

  it.each([529, 503])(
    "persistent %i: the fallback answers; alone, the client gets 529 overloaded_error",
    async (status) => {
      side.fake().setDefault({ kind: "status", status })
      await answeredByBackup(await ask(gateway.url, mode, side.main, fallback()), side.backup, mode)
      clock.offset += 10 * 60_000
      const alone = await ask(gateway.url, mode, side.main)
      expect(alone.status).toBe(529)
      expect(alone.body.error.type).toBe("overloaded_error")
      // the wait an overloaded provider asks for is passed on, as a rate limit's is
      clock.offset += 10 * 60_000
      side.fake().script({ kind: "status", status, headers: { "retry-after": "9" } })
      const told = await ask(gateway.url, mode, side.main)
      expect(told.status).toBe(529)
      expect(told.headers.get("retry-after")).toBe("9")
    }
  )

  it("TCP reset before headers: the fallback answers; alone, a retryable 503", async () => {
    side.fake().script({ kind: "destroy" })
    await answeredByBackup(await ask(gateway.url, mode, side.main, fallback()), side.backup, mode)
    clock.offset += 10 * 60_000
    side.fake().script({ kind: "destroy" })
    const alone = await ask(gateway.url, mode, side.main)
    expect(alone.status).toBe(503)
    expect(alone.body.error.type).toBe("overloaded_error")
  })

  it("a kept-alive connection the upstream closed while it was idle: the request goes again on a new one", async () => {
    const first = await ask(gateway.url, mode, side.main)
    expect(first.model).toBe(side.main)
    // idle past the pool's staleAfterMs (1 s); the upstream then drops the connection as the next request arrives,
    // as one whose idle time-out ran out a moment before would
    await new Promise((resolve) => setTimeout(resolve, 1_100))
    side.fake().script({ kind: "destroy" })
    const second = await ask(gateway.url, mode, side.main)
    expect(second.status).toBe(200)
    expect(second.model).toBe(side.main)
    expect(side.fake().requests).toHaveLength(3)
  })

  it("connection refused: the fallback answers; alone, a retryable 503", async () => {
    await answeredByBackup(await ask(gateway.url, mode, side.dead, fallback()), side.backup, mode)
    clock.offset += 10 * 60_000
    const alone = await ask(gateway.url, mode, side.dead)
    expect(alone.status).toBe(503)
    expect(alone.body.error.type).toBe("overloaded_error")
  })

  it("no first byte before the deadline: the abandoned request is aborted upstream, the fallback answers", async () => {
    side.fake().script({ kind: "hang" })
    await answeredByBackup(await ask(gateway.url, mode, side.main, fallback()), side.backup, mode)
    await expect.poll(() => side.fake().aborted()).toBe(1)
    expect(side.fake().inFlight()).toBe(0)
  })

  it("recovery after cooldown: an endpoint in an outage is avoided, then used again once it heals", async () => {
    side.fake().setDefault({ kind: "status", status: 500 })
    for (let i = 0; i < 4; i++) {
      await answeredByBackup(await ask(gateway.url, mode, side.main, fallback()), side.backup, mode)
    }
    const tried = side.fake().requests.length
    expect(tried).toBeLessThan(4)
    side.fake().setDefault({ kind: "ok" })
    clock.offset += 10 * 60_000
    expect((await ask(gateway.url, mode, side.main, fallback())).model).toBe(side.main)
  })

  if (mode === "stream") {
    it("stream cut after content: an in-band error, never end_turn; billed what it consumed", async () => {
      side.fake().script({ kind: "cut", afterEvents: 5 })
      const answer = await ask(gateway.url, mode, side.main, fallback())
      brokenInBand(answer)
      // What the upstream did not tell before it was cut is estimated: the prompt from the body (an OpenAI-compatible
      // upstream tells it last), the output from the text the client got (Anthropic's message_start tells 1).
      const carried = textOf(answer.events.map((e) => JSON.stringify(e.data))).length
      expect(carried).toBeGreaterThan(0)
      const record = await recordOf(answer.requestId)
      expect(record).toMatchObject({
        model: side.main,
        inputTokens: kind === "anthropic" ? 100 : Math.ceil(bodyOf(mode, side.main, fallback()).length / 4),
        outputTokens: Math.max(kind === "anthropic" ? 1 : 0, Math.ceil(carried / 4))
      })
      expect(Number(record.cost)).toBeCloseTo(record.inputTokens * 0.000003 + record.outputTokens * 0.000015, 12)
    })

    it("a client that leaves after content: the upstream request aborted, billed what it consumed", async () => {
      const words = Array.from({ length: 60 }, (_, i) => `word${String(i).padStart(3, "0")}`).join(" ")
      side.fake().setReply(() => ({ text: words, usage: { input: 100, output: 500 } }))
      side.fake().script({ kind: "ok", chunkDelayMs: 20 })
      const body = bodyOf(mode, side.main, { max_tokens: 1000 })
      const controller = new AbortController()
      const response = await fetch(`${gateway.url}/v1/messages`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
        body,
        signal: controller.signal
      })
      const reader = response.body!.getReader()
      const decoder = new TextDecoder()
      let seen = ""
      while (textOf([seen]).length < 20) {
        const { done, value } = await reader.read()
        if (done) break
        seen += decoder.decode(value, { stream: true })
      }
      expect(textOf([seen]).length, "the client got some text before it left").toBeGreaterThanOrEqual(20)
      controller.abort()
      await expect.poll(() => side.fake().aborted()).toBe(1)
      const record = await recordOf(response.headers.get("request-id")!)
      // At least the text the client got, less than the whole answer: not the 500 a complete answer tells.
      expect(record.outputTokens).toBeGreaterThanOrEqual(Math.ceil(textOf([seen]).length / 4))
      expect(record.outputTokens).toBeLessThan(Math.ceil(words.length / 4))
      expect(record.inputTokens).toBe(kind === "anthropic" ? 100 : Math.ceil(body.length / 4))
      expect(Number(record.cost)).toBeCloseTo(record.inputTokens * 0.000003 + record.outputTokens * 0.000015, 12)
    })

    it("stream stalled after content: an in-band timeout error", async () => {
      side.fake().script({ kind: "stall", afterEvents: 5 })
      const answer = await ask(gateway.url, mode, side.main, fallback())
      brokenInBand(answer)
      expect(answer.events.at(-1)?.data?.error?.type).toBe("timeout_error")
    })

    it("only keep-alives after content: an in-band timeout error after the idle timeout, the upstream aborted, billed", async () => {
      // pings or comments (and, from OpenAI-compatible servers, chunks that say nothing) every 50 ms for 5 s: each
      // re-armed the idle timeout, and the client was held until the upstream itself gave up
      side.fake().script({ kind: "keepAliveStall", afterEvents: 5 })
      const started = Date.now()
      const answer = await ask(gateway.url, mode, side.main, fallback())
      const elapsed = Date.now() - started
      brokenInBand(answer)
      expect(answer.events.at(-1)?.data?.error?.type).toBe("timeout_error")
      expect(elapsed, "cut after the idle timeout (400 ms), not when the upstream stopped pinging (5 s)").toBeLessThan(
        3_000
      )
      await expect.poll(() => side.fake().aborted()).toBe(1)
      const record = await recordOf(answer.requestId)
      const carried = textOf(answer.events.map((e) => JSON.stringify(e.data))).length
      expect(record).toMatchObject({ model: side.main, errorType: "timeout_error" })
      expect(record.outputTokens).toBe(Math.max(kind === "anthropic" ? 1 : 0, Math.ceil(carried / 4)))
      expect(Number(record.cost)).toBeCloseTo(record.inputTokens * 0.000003 + record.outputTokens * 0.000015, 12)
    })

    it("malformed frame after content: an in-band error", async () => {
      side.fake().script({ kind: "malformed", afterEvents: 5 })
      brokenInBand(await ask(gateway.url, mode, side.main, fallback()))
    })

    it("ended without message_stop / [DONE] after content: an in-band error, never end_turn", async () => {
      side.fake().script({ kind: "end", afterEvents: 5 })
      brokenInBand(await ask(gateway.url, mode, side.main, fallback()))
    })

    it("a fault before any content falls back within the stream", async () => {
      side.fake().script({ kind: "cut", afterEvents: 1 })
      await answeredByBackup(await ask(gateway.url, mode, side.main, fallback()), side.backup, mode)
    })
  } else {
    it.each<[string, Behaviour]>([
      ["cut", { kind: "cut", afterEvents: 0 }],
      ["stalled", { kind: "stall", afterEvents: 0 }],
      ["malformed", { kind: "malformed", afterEvents: 0 }],
      ["ended early", { kind: "end", afterEvents: 0 }]
    ])("a JSON answer %s halfway: the fallback answers", async (_, behaviour) => {
      side.fake().script(behaviour)
      await answeredByBackup(await ask(gateway.url, mode, side.main, fallback()), side.backup, mode)
    })
  }
})

/** A chat completions stream: its chunks (its `data:` frames but `[DONE]`), and whether `[DONE]` ended it. */
const askChat = async (url: string, model: string) => {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ model, max_tokens: 50, stream: true, messages: [{ role: "user", content: "hello" }] })
  })
  expect(response.status).toBe(200)
  const frames = (await response.text()).split("\n\n").filter((frame) => frame.startsWith("data: "))
  const chunks = frames.filter((frame) => frame !== "data: [DONE]").map((frame) => JSON.parse(frame.slice(6)))
  return { requestId: response.headers.get("request-id") ?? "", chunks, done: frames.at(-1) === "data: [DONE]" }
}

const hasText = (chunk: any): boolean =>
  typeof chunk.choices?.[0]?.delta?.content === "string" &&
  chunk.choices[0].delta.content !== ""

describe.each<Kind>(["anthropic", "openai"])("%s upstream, a chat completions stream", (kind) => {
  const side = sideOf(kind)
  beforeEach(start)
  afterEach(() => gateway.close(1000))

  it("only keep-alives after content: an in-band timeout error after the idle timeout, the upstream aborted, billed", async () => {
    side.fake().script({ kind: "keepAliveStall", afterEvents: 5 })
    const started = Date.now()
    const { chunks, done, requestId } = await askChat(gateway.url, side.main)
    const elapsed = Date.now() - started
    expect(chunks.some(hasText)).toBe(true)
    // an error chunk, OpenRouter's way, then `[DONE]`: never a finish_reason of a complete answer
    expect(done).toBe(true)
    const last = chunks.at(-1)
    expect(last?.error?.type).toBe("timeout_error")
    expect(last?.choices?.[0]?.finish_reason).toBe("error")
    expect(chunks.filter((chunk) => ["stop", "length"].includes(chunk.choices?.[0]?.finish_reason))).toHaveLength(0)
    expect(elapsed, "cut after the idle timeout (400 ms), not when the upstream stopped pinging (5 s)").toBeLessThan(
      3_000
    )
    await expect.poll(() => side.fake().aborted()).toBe(1)
    const record = await recordOf(requestId)
    expect(record).toMatchObject({ model: side.main, errorType: "timeout_error" })
    expect(record.outputTokens).toBeGreaterThan(0)
  })
})

describe.each(matrix)("%s upstream that tells no usage, %s", (kind, mode) => {
  const side = sideOf(kind)
  beforeEach(start)
  afterEach(() => gateway.close(1000))

  it("a complete answer is billed an estimate: the prompt from the body, the output from the text", async () => {
    const text = "a complete answer of some sixty characters, told no usage."
    side.fake().setReply(() => ({ text, usage: { input: 0, output: 0 } }))
    const answer = await ask(gateway.url, mode, side.main)
    expect(answer.status).toBe(200)
    const record = await recordOf(answer.requestId)
    expect(record).toMatchObject({
      model: side.main,
      inputTokens: Math.ceil(bodyOf(mode, side.main).length / 4),
      outputTokens: Math.ceil(text.length / 4)
    })
    expect(Number(record.cost)).toBeCloseTo(record.inputTokens * 0.000003 + record.outputTokens * 0.000015, 12)
  })
})
