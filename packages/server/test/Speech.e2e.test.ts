/**
 * POST /v1/audio/speech through the real server, with the official `@openrouter/sdk` (`tts.createSpeech`): the local
 * eSpeak NG engine and a fake OpenAI speech upstream, both formats, the audio decoded and checked; fallback from a
 * failing endpoint, references routed only to a capable endpoint, the 400 when none is, every error status with the
 * generic body, the first bytes reaching the client before the upstream has finished, and the usage record.
 */
import { UsageLog } from "@model-gateway/core"
import { OpenRouter } from "@openrouter/sdk"
import * as errors from "@openrouter/sdk/models/errors"
import { Effect } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { FakeUpstream } from "../../../packages/provider-adapters/test/fakes/index.js"
import {
  FAKE_SECONDS_PER_CHAR,
  freePortThatRefuses,
  mp3Frames,
  mp3Seconds,
  rms,
  samplesOf,
  startFakeOpenAi
} from "../../../packages/provider-adapters/test/fakes/index.js"
import { decode } from "../src/Config.js"
import type { RunningServer } from "../src/Gateway.js"
import { startServer } from "../src/Gateway.js"

const KEY = "mg-speech-key"
const perChar = { prompt: "0.000015", completion: "0", request: "0", image: "0" }
const free = { prompt: "0", completion: "0" }

let openai: FakeUpstream
let flaky: FakeUpstream
let gateway: RunningServer
let url: string
let sdk: OpenRouter

const speechModel = (endpoints: Array<Record<string, unknown>>) => ({
  outputModalities: ["audio"],
  voices: ["alloy", "nova"],
  endpoints
})

beforeAll(async () => {
  openai = await startFakeOpenAi({ apiKey: "sk-upstream" })
  flaky = await startFakeOpenAi({ apiKey: "sk-flaky" })
  const refused = await freePortThatRefuses()
  // Short enough for the hang test, long enough that a loaded machine (the full suite on two cores) answers in time.
  const timeouts = { firstByteMs: 3000, idleMs: 3000, requestMs: 6000 }
  const { config } = decode({
    server: { basePath: "/v1", maxBodyBytes: 256 * 1024 },
    storage: "memory:",
    providers: {
      // Named as OpenRouter's slug, so that the SDK's `provider.options.openai` reaches it.
      openai: { kind: "openai", baseUrl: openai.url, apiKey: "sk-upstream", timeouts },
      cloner: { kind: "openai", baseUrl: openai.url, apiKey: "sk-upstream", timeouts },
      flaky: { kind: "openai", baseUrl: flaky.url, apiKey: "sk-flaky", timeouts },
      dead: { kind: "openai", baseUrl: refused, timeouts },
      anthro: { kind: "anthropic", baseUrl: refused, timeouts },
      local: { kind: "local-speech", workers: 1 }
    },
    models: {
      "local/espeak-ng": {
        name: "eSpeak NG",
        outputModalities: ["audio"],
        voices: ["en-us", "fr-fr"],
        endpoints: [{ provider: "local", upstreamModel: "espeak-ng", pricing: free }]
      },
      "openai/tts": speechModel([{ provider: "openai", upstreamModel: "tts-fake", pricing: perChar }]),
      "mixed/tts": speechModel([
        // Free, so that the planner's weighted choice tries it first (all but certainly).
        { provider: "flaky", upstreamModel: "tts-flaky", pricing: free },
        { provider: "openai", upstreamModel: "tts-steady", pricing: perChar }
      ]),
      "clone/tts": speechModel([
        { provider: "openai", upstreamModel: "tts-plain", pricing: { ...perChar, prompt: "0.000001" } },
        { provider: "cloner", upstreamModel: "tts-clone", pricing: perChar, supportsVoiceCloning: true }
      ]),
      "plain/tts": speechModel([{ provider: "openai", upstreamModel: "tts-plain", pricing: perChar }]),
      "dead/tts": speechModel([{ provider: "dead", upstreamModel: "tts-dead", pricing: perChar }]),
      "anthro/chat": { endpoints: [{ provider: "anthro", upstreamModel: "claude", pricing: perChar }] }
    },
    keys: [{ key: KEY, workspace: "default", management: true }]
  })
  gateway = await startServer(config, { host: "127.0.0.1", port: 0, requestLog: false })
  url = gateway.url
  sdk = new OpenRouter({ serverURL: `${url}/v1`, apiKey: KEY, retryConfig: { strategy: "none" } })
})
afterAll(async () => {
  await gateway.close(1000)
  await Promise.all([openai.close(), flaky.close()])
})
beforeEach(() => {
  openai.reset()
  flaky.reset()
})

const readAll = async (stream: ReadableStream<Uint8Array>) => {
  const reader = stream.getReader()
  const parts: Array<Uint8Array> = []
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    parts.push(value)
  }
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let offset = 0
  for (const p of parts) {
    all.set(p, offset)
    offset += p.length
  }
  return all
}

const post = (body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${url}/v1/audio/speech`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}`, ...headers },
    body: JSON.stringify(body)
  })

const usage = () =>
  gateway.gateway.runtime.runPromise(
    Effect.flatMap(UsageLog.UsageLog, (log) => Effect.zipRight(log.flush, log.list({ limit: 200 })))
  )

/** The error an SDK call rejects with. */
const rejection = async (promise: Promise<unknown>) => {
  try {
    await promise
  } catch (error) {
    return error as errors.OpenRouterError & { error?: { code: number; message: string; metadata?: unknown } }
  }
  throw new Error("expected the call to fail")
}

const SENTENCE = "The quick brown fox jumps over the lazy dog, then it runs into the forest."
const WORDS = SENTENCE.split(/\s+/).length
/** eSpeak speaks 175 words a minute by default: allow for pauses and slow words. */
const plausible = (seconds: number) => {
  const expected = (WORDS / 175) * 60
  expect(seconds).toBeGreaterThan(expected * 0.6)
  expect(seconds).toBeLessThan(expected * 1.8)
}

const clip = { type: "input_audio", input_audio: { data: "data:audio/wav;base64,UklGRiQAAABXQVZF" } }

describe("the local engine through the SDK", () => {
  it("mp3: valid MP3 frames, as long as the sentence takes to say", async () => {
    const stream = await sdk.tts.createSpeech({
      speechRequest: { input: SENTENCE, model: "local/espeak-ng", voice: "en-us", responseFormat: "mp3" }
    })
    const bytes = await readAll(stream)
    const frames = mp3Frames(bytes)
    expect(frames.length).toBeGreaterThan(20)
    expect(frames[0].sampleRate).toBe(22050)
    plausible(mp3Seconds(bytes))
  })

  it("pcm (the SDK's default format): 24 kHz 16-bit samples of speech", async () => {
    const stream = await sdk.tts.createSpeech({ speechRequest: { input: SENTENCE, model: "local/espeak-ng" } })
    const samples = samplesOf(await readAll(stream))
    plausible(samples.length / 24000)
    expect(rms(samples)).toBeGreaterThan(500)
  })

  it("answers with the pcm content type, request-id and x-generation-id; an unknown voice is a 400", async () => {
    const response = await post({ input: "Hello.", model: "local/espeak-ng", voice: "en-us+f3" })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("audio/pcm;rate=24000;channels=1")
    const requestId = response.headers.get("request-id")!
    expect(requestId).toMatch(/^req_[0-9a-f]{32}$/)
    expect(response.headers.get("x-generation-id")).toBe(`gen-${requestId.slice(4)}`)
    await response.arrayBuffer()
    const bad = await rejection(sdk.tts.createSpeech({
      speechRequest: { input: "Hello.", model: "local/espeak-ng", voice: "klingon" }
    }))
    expect(bad).toBeInstanceOf(errors.BadRequestResponseError)
    expect(bad.error?.message).toContain("klingon")
  })
})

describe("an OpenAI-compatible upstream through the SDK", () => {
  it("mp3 and pcm, decoded; gateway-only fields never reach the provider, its options do", async () => {
    const input = "Hello from the gateway."
    const mp3 = await readAll(
      await sdk.tts.createSpeech({
        speechRequest: {
          input,
          model: "openai/tts",
          voice: "nova",
          responseFormat: "mp3",
          speed: 1.25,
          sessionId: "s-1",
          user: "u-1",
          trace: { traceId: "t-1", additionalProperties: { customer: "acme" } },
          provider: { options: { openai: { instructions: "Speak calmly." } } }
        }
      })
    )
    expect(mp3Seconds(mp3)).toBeCloseTo((input.length * FAKE_SECONDS_PER_CHAR) / 1.25, 1)
    expect(openai.requests[0].path).toBe("/v1/audio/speech")
    expect(openai.requests[0].headers.authorization).toBe("Bearer sk-upstream")
    expect(openai.requests[0].body).toEqual({
      instructions: "Speak calmly.",
      model: "tts-fake",
      input,
      voice: "nova",
      response_format: "mp3",
      speed: 1.25
    })
    const pcm = samplesOf(
      await readAll(await sdk.tts.createSpeech({ speechRequest: { input, model: "openai/tts", voice: "alloy" } }))
    )
    expect(pcm.length / 24000).toBeCloseTo(input.length * FAKE_SECONDS_PER_CHAR, 2)
    expect(rms(pcm)).toBeGreaterThan(1000)
    expect(openai.requests[1].body.response_format).toBe("pcm")
  })

  it("streams: the first audio bytes reach the client before the upstream has finished", async () => {
    openai.script({ kind: "ok", chunkDelayMs: 150 })
    const started = Date.now()
    const stream = await sdk.tts.createSpeech({
      speechRequest: { input: "A sentence long enough to stream.", model: "openai/tts", voice: "alloy" }
    })
    const reader = stream.getReader()
    const first = await reader.read()
    const firstAt = Date.now() - started
    expect(first.value!.byteLength).toBeGreaterThan(0)
    // The fake still has its last chunks to write: the gateway did not wait for the whole answer.
    expect(openai.inFlight()).toBe(1)
    for (;;) if ((await reader.read()).done) break
    const total = Date.now() - started
    expect(firstAt).toBeLessThan(total - 700)
  })

  it("a client that goes away aborts the upstream request", async () => {
    openai.script({ kind: "ok", chunkDelayMs: 200 })
    const response = await post({ input: "Going away.", model: "openai/tts", voice: "alloy" })
    const reader = response.body!.getReader()
    await reader.read()
    await reader.cancel()
    const until = Date.now() + 3000
    while (openai.aborted() === 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20))
    expect(openai.aborted()).toBe(1)
  })

  it("takes the body's session id over an x-session-id header too long to be one: the header is not read", async () => {
    const body = { input: "Hi.", model: "openai/tts", voice: "alloy" }
    const bad = { "x-session-id": "h".repeat(257) }
    const withBody = await post({ ...body, session_id: "from-body" }, bad)
    expect(withBody.status).toBe(200)
    await withBody.arrayBuffer()
    const without = await post(body, bad)
    expect(without.status).toBe(400)
    expect((await without.json() as any).error.message).toMatch(/^x-session-id/)
  })

  it("records usage: route, model, provider, cost per input character, the body's session id over the header's", async () => {
    const input = "Twelve chars"
    const response = await post(
      {
        input,
        model: "openai/tts",
        voice: "alloy",
        session_id: "from-body",
        user: "end-user",
        trace: { trace_name: "tts", span_name: "speak", team: "search", run: { id: 7 } }
      },
      { "x-session-id": "from-header", "x-openrouter-title": "Speech App" }
    )
    await response.arrayBuffer()
    const requestId = response.headers.get("request-id")
    let record: UsageLog.UsageRecord | undefined
    for (let i = 0; i < 50 && record === undefined; i++) {
      record = (await usage()).find((r) => r.requestId === requestId)
      if (record === undefined) await new Promise((resolve) => setTimeout(resolve, 20))
    }
    expect(record).toMatchObject({
      route: "POST /v1/audio/speech",
      model: "openai/tts",
      provider: "openai",
      status: 200,
      stream: true,
      inputTokens: 12,
      cost: "0.00018",
      sessionId: "from-body",
      user: "end-user",
      appTitle: "Speech App",
      attempts: 1,
      // The trace keys besides the tracing ids and names are the record's custom metadata.
      metadata: { team: "search", run: { id: 7 } }
    })
  })
})

describe("routing", () => {
  it("falls back from a failing endpoint before the first byte", async () => {
    flaky.setDefault({ kind: "status", status: 500 })
    const bytes = await readAll(
      await sdk.tts.createSpeech({
        speechRequest: { input: "Fallback please.", model: "mixed/tts", voice: "alloy", responseFormat: "mp3" }
      })
    )
    expect(mp3Frames(bytes).length).toBeGreaterThan(0)
    expect(flaky.requests).toHaveLength(1)
    expect(openai.requests.map((r) => r.body.model)).toEqual(["tts-steady"])
    // The same with provider.order, and the usage record counts both attempts.
    const response = await post({
      input: "Fallback please.",
      model: "mixed/tts",
      voice: "alloy",
      provider: { order: ["flaky", "openai"] }
    })
    expect(response.status).toBe(200)
    await response.arrayBuffer()
    expect(flaky.requests).toHaveLength(2)
    const requestId = response.headers.get("request-id")
    let record: UsageLog.UsageRecord | undefined
    for (let i = 0; i < 50 && record === undefined; i++) {
      record = (await usage()).find((r) => r.requestId === requestId)
      if (record === undefined) await new Promise((resolve) => setTimeout(resolve, 20))
    }
    expect(record).toMatchObject({ status: 200, provider: "openai", attempts: 2 })
  })

  it("a cut stream or a refused connection before any audio also falls back", async () => {
    flaky.setDefault({ kind: "cut", afterEvents: 0 })
    const response = await post({
      input: "Cut.",
      model: "mixed/tts",
      voice: "alloy",
      provider: { order: ["flaky", "openai"] }
    })
    expect(response.status).toBe(200)
    expect((await response.arrayBuffer()).byteLength).toBeGreaterThan(0)
  })

  it("a request with references goes only to the endpoint that supports voice cloning", async () => {
    for (let i = 0; i < 6; i++) {
      const stream = await sdk.tts.createSpeech({
        speechRequest: {
          input: "Clone me.",
          model: "clone/tts",
          voice: "alloy",
          inputReferences: [
            { type: "input_audio", inputAudio: { data: "data:audio/wav;base64,UklGRiQAAABXQVZF" } },
            { type: "text", text: "The reference transcript." }
          ]
        }
      })
      await readAll(stream)
    }
    expect(openai.requests.map((r) => r.body.model)).toEqual(Array(6).fill("tts-clone"))
    expect(openai.requests[0].body.input_references).toEqual([
      { type: "input_audio", input_audio: { data: "data:audio/wav;base64,UklGRiQAAABXQVZF" } },
      { type: "text", text: "The reference transcript." }
    ])
  })

  it("no endpoint with the capability the references need: a 400 naming it, never a 503", async () => {
    const error = await rejection(sdk.tts.createSpeech({
      speechRequest: {
        input: "Clone me.",
        model: "plain/tts",
        voice: "alloy",
        inputReferences: [{ type: "input_audio", inputAudio: { data: "data:audio/wav;base64,UklGRiQAAABXQVZF" } }]
      }
    }))
    expect(error).toBeInstanceOf(errors.BadRequestResponseError)
    expect(error.statusCode).toBe(400)
    expect(error.error?.code).toBe(400)
    expect(error.error?.message).toContain("voice cloning")
    const several = await post({ input: "x", model: "clone/tts", voice: "alloy", input_references: [clip, clip] })
    expect(several.status).toBe(400)
    expect(((await several.json()) as any).error.message).toContain("multiple audio references")
    expect(openai.requests).toHaveLength(0)
  })
})

describe("errors: every status with the generic body", () => {
  const expectGeneric = async (response: Response, status: number) => {
    expect(response.status).toBe(status)
    expect(response.headers.get("content-type")).toBe("application/json")
    const body: any = await response.json()
    expect(body.error.code).toBe(status)
    expect(typeof body.error.message).toBe("string")
    return body
  }

  it("400: invalid parameters and broken reference rules, naming the field and the rule", async () => {
    const voice = await expectGeneric(await post({ input: "x", model: "openai/tts", voice: "" }), 400)
    expect(voice.error.message).toMatch(/^voice: /)
    const format = await expectGeneric(await post({ input: "x", model: "openai/tts", response_format: "wav" }), 400)
    expect(format.error.message).toMatch(/^response_format: /)
    const long = await expectGeneric(await post({ input: "x", model: "openai/tts", user: "u".repeat(257) }), 400)
    expect(long.error.message).toMatch(/^user: /)
    const rule = await expectGeneric(
      await post({ input: "x", model: "clone/tts", input_references: [clip, clip, clip, clip] }),
      400
    )
    expect(rule.error.message).toContain("rule 1")
    const mixed = await expectGeneric(
      await post({
        input: "x",
        model: "clone/tts",
        input_references: [clip, { type: "image_url", image_url: { url: "https://x.test/a.png" } }]
      }),
      400
    )
    expect(mixed.error.message).toContain("rule 5")
    const text = await expectGeneric(await post({ input: "x", model: "anthro/chat" }), 400)
    expect(text.error.message).toContain("does not synthesize speech")
    const sdkError = await rejection(sdk.tts.createSpeech({ speechRequest: { input: "", model: "openai/tts" } }))
    expect(sdkError).toBeInstanceOf(errors.BadRequestResponseError)
  })

  it("401, 404 and 413 (through the SDK's typed errors too)", async () => {
    const anonymous = new OpenRouter({ serverURL: `${url}/v1`, apiKey: "wrong", retryConfig: { strategy: "none" } })
    expect(await rejection(anonymous.tts.createSpeech({ speechRequest: { input: "x", model: "openai/tts" } })))
      .toBeInstanceOf(errors.UnauthorizedResponseError)
    await expectGeneric(
      await fetch(`${url}/v1/audio/speech`, {
        method: "POST",
        body: "{}",
        headers: { "content-type": "application/json" }
      }),
      401
    )
    const missing = await rejection(sdk.tts.createSpeech({ speechRequest: { input: "x", model: "nobody/nothing" } }))
    expect(missing).toBeInstanceOf(errors.NotFoundResponseError)
    const notFound = await expectGeneric(await post({ input: "x", model: "nobody/nothing" }), 404)
    expect(notFound.error.metadata).toEqual({ reason: "not_found", retryable: false })
    const big = `data:audio/wav;base64,${"A".repeat(300 * 1024)}`
    const tooLarge = await rejection(sdk.tts.createSpeech({
      speechRequest: {
        input: "x",
        model: "clone/tts",
        inputReferences: [{ type: "input_audio", inputAudio: { data: big } }]
      }
    }))
    expect(tooLarge).toBeInstanceOf(errors.PayloadTooLargeResponseError)
  })

  it("upstream failures: 429 (with Retry-After), 529, 502, 402, 524, 503", async () => {
    const cases: Array<[() => void, string, number, new(...args: Array<any>) => Error]> = [
      [() => openai.script({ kind: "status", status: 429 }), "openai/tts", 429, errors.TooManyRequestsResponseError],
      [() => openai.script({ kind: "status", status: 529 }), "openai/tts", 529, errors.ProviderOverloadedResponseError],
      [() => openai.script({ kind: "status", status: 500 }), "openai/tts", 502, errors.BadGatewayResponseError],
      [() => openai.script({ kind: "status", status: 402 }), "openai/tts", 402, errors.PaymentRequiredResponseError],
      // audio of another format than asked for, which would play as noise labelled as asked
      [
        () => openai.script({ kind: "status", status: 200, body: "RIFF", headers: { "content-type": "audio/wav" } }),
        "openai/tts",
        502,
        errors.BadGatewayResponseError
      ],
      [() => openai.script({ kind: "hang" }), "openai/tts", 524, errors.EdgeNetworkTimeoutResponseError],
      [() => undefined, "dead/tts", 503, errors.ServiceUnavailableResponseError]
    ]
    for (const [arrange, model, status, type] of cases) {
      openai.reset()
      arrange()
      const error = await rejection(sdk.tts.createSpeech({ speechRequest: { input: "x", model, voice: "alloy" } }))
      expect(error, `status ${status}`).toBeInstanceOf(type)
      expect(error.statusCode).toBe(status)
      expect(error.error?.code).toBe(status)
      if (status === 429) expect(error.headers.get("retry-after")).toBe("1")
    }
  })

  it("an upstream 5xx is a 502 the SDKs may retry; audio of another format, one they are told not to", async () => {
    const told = async (arrange: () => void) => {
      openai.reset()
      arrange()
      const response = await fetch(`${url}/v1/audio/speech`, {
        method: "POST",
        headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ input: "x", model: "openai/tts", voice: "alloy" })
      })
      await response.arrayBuffer()
      return [response.status, response.headers.get("x-should-retry")]
    }
    expect(await told(() => openai.script({ kind: "status", status: 500 }))).toEqual([502, null])
    const wav = { kind: "status", status: 200, body: "RIFF", headers: { "content-type": "audio/wav" } } as const
    expect(await told(() => openai.script(wav))).toEqual([502, "false"])
  })

  it("405 on another method, with the generic body", async () => {
    const response = await fetch(`${url}/v1/audio/speech`, { headers: { authorization: `Bearer ${KEY}` } })
    const body = await expectGeneric(response, 405)
    expect(body.error.message).toContain("POST")
  })
})

describe("a speech model on /v1/messages", () => {
  it("is a 400: the local engine only synthesizes speech", async () => {
    const response = await fetch(`${url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: "local/espeak-ng", max_tokens: 10, messages: [{ role: "user", content: "hi" }] })
    })
    expect(response.status).toBe(400)
  })

  it("is a 400 naming the speech route for a remote speech model, on the chat routes too; a fallback skips it", async () => {
    const ask = (path: string, body: object) =>
      fetch(`${url}/v1/${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ max_tokens: 10, messages: [{ role: "user", content: "hi" }], ...body })
      })
    for (const path of ["messages", "chat/completions"]) {
      const before = openai.requests.length
      const response = await ask(path, { model: "openai/tts" })
      expect(response.status).toBe(400)
      expect(JSON.stringify(await response.json())).toContain("does not answer in text")
      expect(openai.requests.length).toBe(before)
    }
    // anthro/chat's endpoint refuses connections: the speech candidate is not tried in its place
    const before = openai.requests.length
    const skipped = await ask("messages", { model: "anthro/chat", models: ["openai/tts"] })
    expect(skipped.status).toBe(503)
    expect(openai.requests.length).toBe(before)
  })
})
