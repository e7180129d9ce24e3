import {
  anthropicStopReason,
  type ErrorAnswer,
  estimateTokens,
  type FakeUpstream,
  type FakeUpstreamOptions,
  type Ids,
  outputTokens,
  type Protocol,
  type Reply,
  splitFragments,
  splitWords,
  startFake,
  textOf
} from "./FakeUpstream.js"

export interface FakeAnthropicOptions extends FakeUpstreamOptions {
  /** Also accept `Authorization: Bearer <key>` (what @anthropic-ai/sdk 1.x sends). Default false. */
  readonly acceptBearer?: boolean
}

const errorTypes: Record<number, readonly [string, string]> = {
  400: ["invalid_request_error", "Invalid request"],
  401: ["authentication_error", "invalid x-api-key"],
  403: ["permission_error", "Your API key does not have permission to use the specified resource."],
  404: ["not_found_error", "Not found"],
  413: ["request_too_large", "Request exceeds the maximum allowed number of bytes."],
  429: ["rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"],
  500: ["api_error", "Internal server error"],
  504: ["timeout_error", "Request timed out"],
  529: ["overloaded_error", "Overloaded"]
}

const errorDetail = (status: number, message?: string) => {
  const [type, text] = errorTypes[status] ?? (status >= 500 ? errorTypes[500] : errorTypes[400])
  return { type, message: message ?? text }
}

const errorAnswer = (status: number, requestId: string, message?: string): ErrorAnswer => ({
  status,
  body: { type: "error", error: errorDetail(status, message), request_id: requestId },
  headers: status === 429 ? { "retry-after": "1" } : {}
})

const frame = (data: { readonly type: string }): string => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`

interface Block {
  readonly start: Record<string, unknown>
  readonly full: Record<string, unknown>
  readonly deltas: Array<Record<string, unknown>>
}

const blocksOf = (reply: Reply, ids: Ids): Array<Block> => {
  const blocks: Array<Block> = []
  if (reply.thinking !== undefined) {
    const signature = `sig_fake_${Buffer.from(reply.thinking).toString("base64").slice(0, 24)}`
    blocks.push({
      start: { type: "thinking", thinking: "", signature: "" },
      full: { type: "thinking", thinking: reply.thinking, signature },
      deltas: [
        ...splitWords(reply.thinking).map((thinking) => ({ type: "thinking_delta", thinking })),
        { type: "signature_delta", signature }
      ]
    })
  }
  const calls = "toolCalls" in reply ? reply.toolCalls : []
  if (reply.text !== undefined && (calls.length === 0 || reply.text !== "")) {
    blocks.push({
      start: { type: "text", text: "" },
      full: { type: "text", text: reply.text },
      deltas: splitWords(reply.text).map((text) => ({ type: "text_delta", text }))
    })
  }
  for (const call of calls) {
    const id = call.id ?? `toolu_fake_${ids.next("tool")}`
    const input = call.input ?? {}
    blocks.push({
      start: { type: "tool_use", id, name: call.name, input: {} },
      full: { type: "tool_use", id, name: call.name, input },
      deltas: (call.fragments ?? splitFragments(JSON.stringify(input))).map((partial_json) => ({
        type: "input_json_delta",
        partial_json
      }))
    })
  }
  return blocks
}

const usageOf = (body: any, reply: Reply) => ({
  input_tokens: reply.usage?.input ??
    estimateTokens({ system: body.system, messages: body.messages, tools: body.tools }),
  cache_creation_input_tokens: reply.usage?.cacheWrite ?? 0,
  cache_read_input_tokens: reply.usage?.cacheRead ?? 0
})

const defaultReply = (body: any): Reply => {
  const messages: Array<any> = body.messages
  const last = messages.at(-1)
  if (last?.role === "user" && Array.isArray(last.content)) {
    const results = last.content.filter((block: any) => block?.type === "tool_result")
    if (results.length > 0) {
      return { text: `Tool result received: ${results.map((r: any) => textOf(r.content)).join("; ")}` }
    }
  }
  const lastUser = messages.findLast((m) => m?.role === "user")
  const userText = textOf(lastUser?.content)
  const tools: Array<any> = Array.isArray(body.tools) ? body.tools : []
  if (tools.length > 0 && userText.toLowerCase().includes("use a tool")) {
    return { toolCalls: [{ name: tools[0].name, input: {} }] }
  }
  const images = Array.isArray(lastUser?.content)
    ? lastUser.content.filter((block: any) => block?.type === "image").length
    : 0
  if (images > 0) return { text: `I see ${images} image(s).` }
  return { text: `Echo: ${userText}` }
}

const protocol = (acceptBearer: boolean): Protocol => ({
  basePath: "",
  route: (method, path) => method === "POST" && path === "/v1/messages",
  extra: {
    "POST /v1/messages/count_tokens": (body) => ({
      input_tokens: estimateTokens({ system: body?.system, messages: body?.messages, tools: body?.tools })
    })
  },
  requestId: (ids) => `req_fake_${ids.next("request")}`,
  responseHeaders: (requestId) => ({ "request-id": requestId }),
  authorize: (req, apiKey, requestId) => {
    const header = req.headers["x-api-key"]
    const bearer = req.headers["authorization"]
    const key = typeof header === "string" && header !== ""
      ? header
      : acceptBearer && typeof bearer === "string" && bearer.startsWith("Bearer ")
      ? bearer.slice(7)
      : undefined
    if (key === undefined) return errorAnswer(401, requestId, "x-api-key header is required")
    if (apiKey !== undefined && key !== apiKey) return errorAnswer(401, requestId, "invalid x-api-key")
    return undefined
  },
  validate: (body, requestId) => {
    if (typeof body !== "object" || body === null) {
      return errorAnswer(400, requestId, "Request body must be a JSON object")
    }
    if (typeof body.model !== "string") return errorAnswer(400, requestId, "model: Field required")
    if (typeof body.max_tokens !== "number") return errorAnswer(400, requestId, "max_tokens: Field required")
    if (!Array.isArray(body.messages)) return errorAnswer(400, requestId, "messages: Field required")
    return undefined
  },
  notFound: (req, requestId) => errorAnswer(404, requestId, `Not found: ${req.method} ${req.path}`),
  errorFor: (status, requestId) => errorAnswer(status, requestId),
  defaultReply,
  json: (body, reply, ids) => ({
    id: `msg_fake_${ids.next("message")}`,
    type: "message",
    role: "assistant",
    model: body.model,
    content: blocksOf(reply, ids).map((block) => block.full),
    stop_reason: anthropicStopReason(reply),
    stop_sequence: null,
    usage: { ...usageOf(body, reply), output_tokens: outputTokens(reply), service_tier: "standard" }
  }),
  events: (body, reply, ids) => {
    const usage = usageOf(body, reply)
    const blocks = blocksOf(reply, ids)
    const events = [
      frame({
        type: "message_start",
        message: {
          id: `msg_fake_${ids.next("message")}`,
          type: "message",
          role: "assistant",
          model: body.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { ...usage, output_tokens: 1, service_tier: "standard" }
        }
      } as { type: string })
    ]
    blocks.forEach((block, index) => {
      events.push(frame({ type: "content_block_start", index, content_block: block.start } as { type: string }))
      if (index === 0) events.push(frame({ type: "ping" }))
      for (const delta of block.deltas) {
        events.push(frame({ type: "content_block_delta", index, delta } as { type: string }))
      }
      events.push(frame({ type: "content_block_stop", index } as { type: string }))
    })
    if (blocks.length === 0) events.push(frame({ type: "ping" }))
    events.push(
      frame({
        type: "message_delta",
        delta: { stop_reason: anthropicStopReason(reply), stop_sequence: null },
        usage: { ...usage, output_tokens: outputTokens(reply) }
      } as { type: string }),
      frame({ type: "message_stop" })
    )
    return events
  },
  // Anthropic pings while the model works; a comment too, which SSE lets any server send.
  keepAlives: () => [frame({ type: "ping" }), ": keep-alive\n\n"],
  malformedEvent: "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{oops\n\n",
  errorEvent: (status) => frame({ type: "error", error: errorDetail(status) } as { type: string }),
  defaultErrorEventStatus: 529
})

/**
 * Starts a fake Anthropic Messages API (`POST /v1/messages`, JSON and SSE, and `POST /v1/messages/count_tokens`) on
 * 127.0.0.1. Its `url` is the
 * base URL the Anthropic SDK takes (no `/v1`).
 */
export const startFakeAnthropic = (options: FakeAnthropicOptions = {}): Promise<FakeUpstream> =>
  startFake(protocol(options.acceptBearer ?? false), options)
