import {
  type ErrorAnswer,
  estimateTokens,
  type FakeUpstream,
  type FakeUpstreamOptions,
  openAiFinishReason,
  outputTokens,
  type Protocol,
  type Reply,
  splitFragments,
  splitWords,
  startFake,
  textOf
} from "./FakeUpstream.js"

export interface FakeOpenAiOptions extends FakeUpstreamOptions {}

const errorTypes: Record<number, readonly [string, string | null, string]> = {
  400: ["invalid_request_error", null, "Invalid request."],
  401: [
    "invalid_request_error",
    "invalid_api_key",
    "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
  ],
  403: ["invalid_request_error", "unsupported_country_region_territory", "Country, region, or territory not supported"],
  404: ["invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."],
  429: ["requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again in 1s."],
  500: ["server_error", null, "The server had an error while processing your request. Sorry about that!"],
  503: ["server_error", null, "The engine is currently overloaded, please try again later."]
}

const errorDetail = (status: number, message?: string, code?: string | null) => {
  const [type, defaultCode, text] = errorTypes[status] ?? (status >= 500 ? errorTypes[500] : errorTypes[400])
  return { message: message ?? text, type, param: null, code: code === undefined ? defaultCode : code }
}

const errorAnswer = (status: number, message?: string, code?: string | null): ErrorAnswer => ({
  status,
  body: { error: errorDetail(status, message, code) },
  headers: status === 429 ? { "retry-after": "1" } : {}
})

const usageOf = (body: any, reply: Reply) => {
  const cached = reply.usage?.cacheRead ?? 0
  const prompt = (reply.usage?.input ?? estimateTokens({ messages: body.messages, tools: body.tools })) + cached
  const completion = outputTokens(reply)
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: 0,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0
    }
  }
}

const defaultReply = (body: any): Reply => {
  const messages: Array<any> = body.messages
  if (messages.at(-1)?.role === "tool") {
    const results: Array<string> = []
    for (let i = messages.length - 1; i >= 0 && messages[i]?.role === "tool"; i--) {
      results.unshift(textOf(messages[i].content))
    }
    return { text: `Tool result received: ${results.join("; ")}` }
  }
  const lastUser = messages.findLast((m) => m?.role === "user")
  const userText = textOf(lastUser?.content)
  const tools: Array<any> = Array.isArray(body.tools) ? body.tools : []
  if (tools.length > 0 && userText.toLowerCase().includes("use a tool")) {
    return { toolCalls: [{ name: tools[0].function?.name ?? tools[0].name, input: {} }] }
  }
  const images = Array.isArray(lastUser?.content)
    ? lastUser.content.filter((part: any) => part?.type === "image_url").length
    : 0
  if (images > 0) return { text: `I see ${images} image(s).` }
  return { text: `Echo: ${userText}` }
}

const callsOf = (reply: Reply, ids: { readonly next: (name: string) => number }) =>
  ("toolCalls" in reply ? reply.toolCalls : []).map((call) => ({
    id: call.id ?? `call_fake_${ids.next("tool")}`,
    name: call.name,
    arguments: JSON.stringify(call.input ?? {})
  }))

const protocol: Protocol = {
  basePath: "/v1",
  route: (method, path) => method === "POST" && path === "/v1/chat/completions",
  requestId: (ids) => `req_fake_${ids.next("request")}`,
  responseHeaders: (requestId) => ({ "x-request-id": requestId, "openai-processing-ms": "1" }),
  authorize: (req, apiKey) => {
    const header = req.headers["authorization"]
    if (typeof header !== "string" || !header.startsWith("Bearer ") || header.length === 7) {
      return errorAnswer(
        401,
        "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth " +
          "(i.e. Authorization: Bearer YOUR_KEY).",
        null
      )
    }
    if (apiKey !== undefined && header.slice(7) !== apiKey) return errorAnswer(401)
    return undefined
  },
  validate: (body) => {
    if (typeof body !== "object" || body === null) return errorAnswer(400, "We could not parse the JSON body.")
    if (typeof body.model !== "string") return errorAnswer(400, "you must provide a model parameter")
    if (!Array.isArray(body.messages)) return errorAnswer(400, "Missing required parameter: 'messages'.")
    return undefined
  },
  notFound: (req) => errorAnswer(404, `Invalid URL (${req.method} ${req.path})`, null),
  errorFor: (status) => errorAnswer(status),
  defaultReply,
  json: (body, reply, ids) => {
    const calls = callsOf(reply, ids)
    return {
      id: `chatcmpl-fake${ids.next("completion")}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      choices: [{
        index: 0,
        message: {
          role: "assistant",
          content: reply.text === undefined || (calls.length > 0 && reply.text === "") ? null : reply.text,
          refusal: null,
          annotations: [],
          ...(calls.length > 0
            ? {
              tool_calls: calls.map((call) => ({
                id: call.id,
                type: "function",
                function: { name: call.name, arguments: call.arguments }
              }))
            }
            : {})
        },
        logprobs: null,
        finish_reason: openAiFinishReason(reply)
      }],
      usage: usageOf(body, reply),
      service_tier: "default",
      system_fingerprint: "fp_fake"
    }
  },
  events: (body, reply, ids) => {
    const includeUsage = body.stream_options?.include_usage === true
    const base = {
      id: `chatcmpl-fake${ids.next("completion")}`,
      object: "chat.completion.chunk",
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      service_tier: "default",
      system_fingerprint: "fp_fake"
    }
    const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) =>
      `data: ${
        JSON.stringify({
          ...base,
          choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
          ...(includeUsage ? { usage: null } : {})
        })
      }\n\n`
    const events = [chunk({ role: "assistant", content: "", refusal: null })]
    for (const content of splitWords(reply.text ?? "")) events.push(chunk({ content }))
    callsOf(reply, ids).forEach((call, index) => {
      events.push(
        chunk({ tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }] })
      )
      for (const fragment of splitFragments(call.arguments)) {
        events.push(chunk({ tool_calls: [{ index, function: { arguments: fragment } }] }))
      }
    })
    events.push(chunk({}, openAiFinishReason(reply)))
    if (includeUsage) events.push(`data: ${JSON.stringify({ ...base, choices: [], usage: usageOf(body, reply) })}\n\n`)
    events.push("data: [DONE]\n\n")
    return events
  },
  malformedEvent: "data: {\"id\":\"chatcmpl-fake\",\"choices\":[{oops\n\n",
  errorEvent: (status) => `data: ${JSON.stringify({ error: errorDetail(status) })}\n\n`,
  defaultErrorEventStatus: 500
}

/**
 * Starts a fake OpenAI chat completions API (`POST /v1/chat/completions`, JSON and SSE) on 127.0.0.1. Its `url`
 * ends in `/v1`, as the OpenAI SDK's `baseURL` does.
 */
export const startFakeOpenAi = (options: FakeOpenAiOptions = {}): Promise<FakeUpstream> => startFake(protocol, options)
