// The fake upstream: plain node:http on 127.0.0.1, speaking both protocols the gateway talks to.
//
//   POST /v1/messages          Anthropic Messages: the fixed JSON message, or (body has `"stream":true`) its SSE stream
//   POST /v1/chat/completions  OpenAI chat completions: the fixed chat.completion, or a stream of chat.completion.chunk
//                              events ending with `data: [DONE]`, with usage in a last chunk when the body asks for
//                              `stream_options.include_usage`
//
// Each SSE event is a separate write, the event loop yielded between events, so that the server under test sees the
// stream arrive in pieces. How it answers is set by the parent over IPC (`configure`, see below), never by the request:
// neither the gateway nor Portkey forwards a client's made-up headers.
//
//   latencyMs   wait this long before answering (the status line and headers): an upstream's time to first byte
//   deltas      when set, streams carry this many generated text deltas instead of the fixture's 20, each text
//               `@@<ns>@@` where <ns> is process.hrtime.bigint() (CLOCK_MONOTONIC, shared by every process on the
//               machine) taken just before the write: a client compares it with its own clock on arrival
//   intervalMs  with `deltas`, the time between two deltas (setTimeout); 0: the next turn of the event loop
//
// BENCH_UPSTREAM_END_MS (environment, default 0): a stream's body ends this many ms after its last event rather than
// with it, as from a server that ends it once its last write is flushed (uvicorn): a measurement of what a client does
// with a body whose last event came before its end (not judged; the targets are judged on 0).
//
// It counts requests, and open streams (now and the most at once) for the 1,000-stream probe. Runs in its own process.
import { createServer } from "node:http"
import { serveChild } from "./child.mjs"
import { INPUT_TOKENS, MESSAGE, OPENAI_COMPLETION, openAiChunk, openAiSseEvents, SSE_EVENTS } from "./fixtures.mjs"

const HEADERS = { "request-id": "req_011CUpstreamBenchFixed00000" }
const jsonAnswer = (value) => {
  const body = Buffer.from(JSON.stringify(value))
  return { body, headers: { ...HEADERS, "content-type": "application/json", "content-length": String(body.length) } }
}
const ANTHROPIC_JSON = jsonAnswer(MESSAGE)
const OPENAI_JSON = jsonAnswer(OPENAI_COMPLETION)
const SSE_HEADERS = { ...HEADERS, "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" }
const ANTHROPIC_CHUNKS = SSE_EVENTS.map((event) => Buffer.from(event))
const OPENAI_CHUNKS = openAiSseEvents(false).map((event) => Buffer.from(event))
const OPENAI_CHUNKS_USAGE = openAiSseEvents(true).map((event) => Buffer.from(event))

const END_MS = Number(process.env.BENCH_UPSTREAM_END_MS ?? 0)
let mode = { latencyMs: 0, deltas: 0, intervalMs: 0 }
let requests = 0
let last
let openStreams = 0
let maxOpenStreams = 0

const frame = (event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
const stamp = () => `@@${process.hrtime.bigint()}@@`

/** The events of a generated stream: [head..., (one per delta) () => event, tail...]; a function is stamped when sent. */
const generated = (openAi, includeUsage, n) => {
  const deltas = Array.from({ length: n }, () =>
    openAi
      ? () => openAiChunk({ content: stamp() })
      : () => frame({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: stamp() } }))
  const usage = { prompt_tokens: INPUT_TOKENS, completion_tokens: n, total_tokens: INPUT_TOKENS + n }
  if (openAi) {
    return [
      openAiChunk({ role: "assistant", content: "" }),
      ...deltas,
      openAiChunk({}, "stop"),
      ...(includeUsage ? [openAiChunk(undefined, null, usage)] : []),
      "data: [DONE]\n\n"
    ]
  }
  return [
    SSE_EVENTS[0],
    SSE_EVENTS[1],
    ...deltas,
    frame({ type: "content_block_stop", index: 0 }),
    frame({ type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: n } }),
    frame({ type: "message_stop" })
  ]
}

const streamTo = (res, events, intervalMs) => {
  res.writeHead(200, SSE_HEADERS)
  openStreams++
  if (openStreams > maxOpenStreams) maxOpenStreams = openStreams
  let open = true
  const done = () => {
    if (open) openStreams--
    open = false
  }
  res.on("close", done)
  let i = 0
  const next = () => {
    if (res.destroyed) return done()
    const event = events[i++]
    const isDelta = typeof event === "function"
    res.write(isDelta ? event() : event)
    if (i >= events.length) {
      if (END_MS > 0) {
        setTimeout(() => {
          res.end()
          done()
        }, END_MS)
        return
      }
      res.end()
      return done()
    }
    // Only the deltas are spaced: the head and the tail follow at once, as a model's do.
    if (intervalMs > 0 && typeof events[i] === "function") setTimeout(next, intervalMs)
    else setImmediate(next)
  }
  next()
}

const answer = (req, res, body) => {
  const anthropic = req.url === "/v1/messages"
  const openAi = req.url === "/v1/chat/completions"
  if (req.method !== "POST" || (!anthropic && !openAi)) {
    res.writeHead(404, { "content-type": "application/json" })
    res.end(JSON.stringify({ type: "error", error: { type: "not_found_error", message: "not found" } }))
    return
  }
  const stream = body.includes("\"stream\":true")
  if (!stream) {
    const { body: json, headers } = anthropic ? ANTHROPIC_JSON : OPENAI_JSON
    res.writeHead(200, headers)
    res.end(json)
    return
  }
  const includeUsage = openAi && body.includes("\"include_usage\":true")
  if (mode.deltas > 0) streamTo(res, generated(openAi, includeUsage, mode.deltas), mode.intervalMs)
  else streamTo(res, anthropic ? ANTHROPIC_CHUNKS : includeUsage ? OPENAI_CHUNKS_USAGE : OPENAI_CHUNKS, 0)
}

await serveChild("upstream", async () => {
  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    const chunks = []
    req.on("data", (chunk) => chunks.push(chunk))
    req.on("end", () => {
      requests++
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)
      last = { method: req.method, url: req.url, headers: req.headers, body }
      if (mode.latencyMs > 0) setTimeout(() => answer(req, res, body), mode.latencyMs)
      else answer(req, res, body)
    })
  })
  // The 1,000-stream probe holds that many connections from each server under test.
  server.maxConnections = 100_000
  await new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", 4096, resolve)
  })
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
    calls: {
      requests: () => requests,
      last: () => last === undefined ? undefined : { ...last, body: last.body.toString("utf8") },
      configure: (args) => {
        mode = { latencyMs: 0, deltas: 0, intervalMs: 0, ...args }
        return mode
      },
      streams: () => ({ open: openStreams, max: maxOpenStreams }),
      resetStreams: () => {
        maxOpenStreams = openStreams
        return maxOpenStreams
      }
    }
  }
})
