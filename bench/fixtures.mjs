// What the fake Anthropic upstream answers, and what the benchmark sends. Shared by bench/upstream.mjs
// (which serves it) and bench/run.mjs (which checks that the gateway passes it through correctly).

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

/** The client's request: the gateway's model id (the proxy and the fake upstream ignore it). */
export const requestBody = (stream) =>
  JSON.stringify({
    model: "bench/model",
    max_tokens: 64,
    ...(stream ? { stream: true } : {}),
    messages: [{ role: "user", content: "Hello, world" }]
  })

export const CLIENT_KEY = "mg-bench"
export const UPSTREAM_KEY = "sk-bench"
export const PRICING = { prompt: "0.000003", completion: "0.000015" }
/**
 * The gateway's configuration in every benchmark (before `Config.decode`): memory storage, one Anthropic provider at
 * `upstreamUrl`, one model (`bench/model` -> upstream model `m`), one key.
 */
export const gatewayConfig = (upstreamUrl) => ({
  server: { host: "127.0.0.1", port: 0 },
  storage: "memory:",
  providers: { up: { kind: "anthropic", baseUrl: upstreamUrl, apiKey: UPSTREAM_KEY } },
  models: { "bench/model": { endpoints: [{ provider: "up", upstreamModel: "m", pricing: PRICING }] } },
  keys: [{ key: CLIENT_KEY, management: true }]
})

/** What the gateway must report as usage.cost for one answer: 12 * 0.000003 + 24 * 0.000015. */
export const EXPECTED_COST = Number((INPUT_TOKENS * 3 + OUTPUT_TOKENS * 15) / 1_000_000)

export const requestHeaders = {
  "content-type": "application/json",
  "x-api-key": CLIENT_KEY,
  "anthropic-version": "2023-06-01"
}
