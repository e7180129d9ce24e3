// What the fake upstream answers (Anthropic Messages and OpenAI chat completions), and what the benchmark sends.
// Shared by bench/upstream.mjs (which serves it) and bench/checks.mjs (which checks every target's answer).

export const UPSTREAM_MODEL = "claude-sonnet-4-5-20250929"
export const INPUT_TOKENS = 12

/** The 20 text deltas of the streamed answer; their concatenation is also the non-streamed answer's text. */
export const DELTAS = [
  "Hello",
  "! It",
  "'s nice",
  " to meet",
  " you.",
  " I'm",
  " Claude",
  ", an",
  " AI assistant",
  " made by",
  " Anthropic.",
  " How",
  " can I",
  " help you",
  " today?",
  " Feel free",
  " to ask",
  " me anything",
  " at",
  " all."
]
export const TEXT = DELTAS.join("")
export const OUTPUT_TOKENS = DELTAS.length + 4

/** The non-streaming answer (a realistic small Anthropic message). */
export const MESSAGE = {
  id: "msg_01XFDUDYJgAACzvnptvVoYEL",
  type: "message",
  role: "assistant",
  model: UPSTREAM_MODEL,
  content: [{ type: "text", text: TEXT, citations: null }],
  stop_reason: "end_turn",
  stop_sequence: null,
  usage: {
    input_tokens: INPUT_TOKENS,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    output_tokens: OUTPUT_TOKENS
  }
}

const frame = (event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`

/** The streamed answer, one string per SSE event, in Anthropic's order (message_start ... message_stop). */
export const SSE_EVENTS = [
  frame({
    type: "message_start",
    message: {
      id: "msg_01XFDUDYJgAACzvnptvVoYEL",
      type: "message",
      role: "assistant",
      model: UPSTREAM_MODEL,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: INPUT_TOKENS,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
        output_tokens: 1
      }
    }
  }),
  frame({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }),
  frame({ type: "ping" }),
  ...DELTAS.map((text) => frame({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } })),
  frame({ type: "content_block_stop", index: 0 }),
  frame({
    type: "message_delta",
    delta: { stop_reason: "end_turn", stop_sequence: null },
    usage: { output_tokens: OUTPUT_TOKENS }
  }),
  frame({ type: "message_stop" })
]

/** The client's request in Anthropic's format: the gateway's model id (the proxy and the fake upstream ignore it). */
export const requestBody = (stream, model = GATEWAY_MODEL) =>
  JSON.stringify({
    model,
    max_tokens: 64,
    ...(stream ? { stream: true } : {}),
    messages: [{ role: "user", content: "Hello, world" }]
  })

/** The same request in OpenAI's chat-completions format (what direct, the proxies and Portkey get upstream OpenAI). */
export const openAiRequestBody = (stream, model = "m") =>
  JSON.stringify({
    model,
    max_tokens: 64,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    messages: [{ role: "user", content: "Hello, world" }]
  })

export const CLIENT_KEY = "mg-bench"
export const UPSTREAM_KEY = "sk-bench"
export const PRICING = { prompt: "0.000003", completion: "0.000015" }
/** The gateway's model routed to the Anthropic provider, and the one routed to the OpenAI-compatible provider. */
export const GATEWAY_MODEL = "bench/model"
export const GATEWAY_OPENAI_MODEL = "bench/openai"
/**
 * The gateway's configuration in every benchmark (before `Config.decode`): `storage` (memory by default), an Anthropic
 * provider at `upstreamUrl` and an OpenAI-compatible one at `upstreamUrl/v1` (the same fake upstream speaks both),
 * one model on each (`bench/model` and `bench/openai` -> upstream model `m`), one key.
 */
export const gatewayConfig = (upstreamUrl, storage = "memory:") => ({
  server: { host: "127.0.0.1", port: 0 },
  storage,
  providers: {
    up: { kind: "anthropic", baseUrl: upstreamUrl, apiKey: UPSTREAM_KEY },
    oa: { kind: "openai", baseUrl: `${upstreamUrl}/v1`, apiKey: UPSTREAM_KEY }
  },
  models: {
    [GATEWAY_MODEL]: { endpoints: [{ provider: "up", upstreamModel: "m", pricing: PRICING }] },
    [GATEWAY_OPENAI_MODEL]: { endpoints: [{ provider: "oa", upstreamModel: "m", pricing: PRICING }] }
  },
  keys: [{ key: CLIENT_KEY, management: true }]
})

/** What the gateway must report as usage.cost for one answer: 12 * 0.000003 + 24 * 0.000015. */
export const EXPECTED_COST = Number((INPUT_TOKENS * 3 + OUTPUT_TOKENS * 15) / 1_000_000)

export const requestHeaders = {
  "content-type": "application/json",
  "x-api-key": CLIENT_KEY,
  "anthropic-version": "2023-06-01"
}

export const openAiRequestHeaders = {
  "content-type": "application/json",
  authorization: `Bearer ${CLIENT_KEY}`
}

// ---------------------------------------------------------------------------------------------------
// OpenAI chat completions: what the fake upstream answers on POST /v1/chat/completions
// ---------------------------------------------------------------------------------------------------

export const OPENAI_ID = "chatcmpl-BenchFixed0000000000000001"
const CREATED = 1_763_900_000
const OPENAI_USAGE = { prompt_tokens: INPUT_TOKENS, completion_tokens: OUTPUT_TOKENS, total_tokens: INPUT_TOKENS + OUTPUT_TOKENS }

/** The non-streaming chat completion (a realistic small one). */
export const OPENAI_COMPLETION = {
  id: OPENAI_ID,
  object: "chat.completion",
  created: CREATED,
  model: UPSTREAM_MODEL,
  choices: [{
    index: 0,
    message: { role: "assistant", content: TEXT, refusal: null, annotations: [] },
    logprobs: null,
    finish_reason: "stop"
  }],
  usage: OPENAI_USAGE,
  service_tier: "default",
  system_fingerprint: "fp_bench"
}

/** One `chat.completion.chunk` SSE event. */
export const openAiChunk = (delta, finishReason = null, usage) =>
  `data: ${
    JSON.stringify({
      id: OPENAI_ID,
      object: "chat.completion.chunk",
      created: CREATED,
      model: UPSTREAM_MODEL,
      system_fingerprint: "fp_bench",
      choices: delta === undefined ? [] : [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      ...(usage === undefined ? {} : { usage })
    })
  }\n\n`

/** The streamed chat completion, one string per SSE event; with `include_usage`, a last chunk carrying usage. */
export const openAiSseEvents = (includeUsage) => [
  openAiChunk({ role: "assistant", content: "", refusal: null }),
  ...DELTAS.map((content) => openAiChunk({ content })),
  openAiChunk({}, "stop"),
  ...(includeUsage ? [openAiChunk(undefined, null, OPENAI_USAGE)] : []),
  "data: [DONE]\n\n"
]
