import { chunked, mp3Of, pcmBytes, tone } from "./FakeAudio.js"
import {
  type ErrorAnswer,
  estimateTokens,
  type FakeUpstream,
  type FakeUpstreamOptions,
  type Ids,
  openAiFinishReason,
  outputTokens,
  type Protocol,
  type Reply,
  splitFragments,
  splitWords,
  startFake,
  textOf
} from "./FakeUpstream.js"

export interface FakeOpenAiOptions extends FakeUpstreamOptions {
  /**
   * Keeps Responses answers as OpenAI does: each is `resp_<storesResponses>_<n>` with its `store` flag, and a request
   * whose `previous_response_id` the fake did not answer (or answered with `store: false`) gets OpenAI's 400
   * `previous_response_not_found`. Without it ids are `resp_fake<n>` and `previous_response_id` is not checked.
   */
  readonly storesResponses?: string | undefined
}

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

/** A Responses API body's input as chat messages: what the replies are made from. */
const messagesOf = (body: any): Array<any> => {
  if (Array.isArray(body.messages)) return body.messages
  const input = typeof body.input === "string" ? [{ role: "user", content: body.input }] : body.input ?? []
  return input.map((item: any) => ({
    role: item.role ?? "user",
    content: Array.isArray(item.content)
      ? item.content.map((part: any) => part.type === "input_text" ? { type: "text", text: part.text } : part)
      : item.content
  }))
}

const defaultReply = (body: any): Reply => {
  const messages: Array<any> = messagesOf(body)
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

const responseUsage = (body: any, reply: Reply) => {
  const cached = reply.usage?.cacheRead ?? 0
  const input = (reply.usage?.input ?? estimateTokens({ messages: messagesOf(body) })) + cached
  const output = outputTokens(reply)
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output
  }
}

/** A Responses API object: one assistant message with the reply's text. */
const responseOf = (
  body: any,
  reply: Reply,
  ids: { readonly next: (name: string) => number },
  status: string,
  prefix?: string
) => {
  const n = ids.next("response")
  return {
    id: prefix === undefined ? `resp_fake${n}` : `resp_${prefix}_${n}`,
    ...(prefix === undefined ? {} : { store: body.store !== false }),
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status,
    model: body.model,
    output: status === "completed"
      ? [{
        type: "message",
        id: `msg_fake${n}`,
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text: reply.text ?? "", annotations: [] }]
      }]
      : [],
    usage: status === "completed" ? responseUsage(body, reply) : null
  }
}

/** The named events of a streamed Responses API answer. */
const responseEvents = (
  body: any,
  reply: Reply,
  ids: { readonly next: (name: string) => number },
  prefix?: string,
  onStarted?: (id: string) => void
) => {
  const started = responseOf(body, reply, ids, "in_progress", prefix)
  onStarted?.(started.id)
  const done = {
    ...started,
    status: "completed",
    output: responseOf(body, reply, ids, "completed").output,
    usage: responseUsage(body, reply)
  }
  let sequence = 0
  const event = (type: string, data: Record<string, unknown>) =>
    `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...data })}\n\n`
  const item = { type: "message", id: "msg_fake", status: "in_progress", role: "assistant", content: [] }
  const part = (text: string) => ({ type: "output_text", text, annotations: [] })
  const at = { item_id: "msg_fake", output_index: 0, content_index: 0 }
  const text = reply.text ?? ""
  // OpenAI's order: the item and its content part are added (empty) before the first delta, done after the last.
  return [
    event("response.created", { response: started }),
    event("response.in_progress", { response: started }),
    event("response.output_item.added", { output_index: 0, item }),
    event("response.content_part.added", { ...at, part: part("") }),
    ...splitWords(text).map((delta) => event("response.output_text.delta", { ...at, delta, logprobs: [] })),
    event("response.output_text.done", { ...at, text, logprobs: [] }),
    event("response.content_part.done", { ...at, part: part(text) }),
    event("response.output_item.done", {
      output_index: 0,
      item: { ...item, status: "completed", content: [part(text)] }
    }),
    event("response.completed", { response: done })
  ]
}

/** Seconds of fake speech per input character (at speed 1). */
export const FAKE_SECONDS_PER_CHAR = 0.06

/** The fake's speech: a tone as long as the input would take to say, in 8 chunks; pcm at 24 kHz, as OpenAI's. */
const speechAnswer = (body: any) => {
  const seconds = Math.max(0.2, (body.input.length * FAKE_SECONDS_PER_CHAR) / (body.speed ?? 1))
  const samples = tone(seconds, 24000)
  return body.response_format === "pcm"
    ? { contentType: "audio/pcm", chunks: chunked(pcmBytes(samples), 8) }
    : { contentType: "audio/mpeg", chunks: chunked(mp3Of(samples, 24000), 8) }
}

const protocol: Protocol = {
  basePath: "/v1",
  route: (method, path) => method === "POST" && (path === "/v1/chat/completions" || path === "/v1/responses"),
  extra: {
    "POST /v1/embeddings": (body) => {
      const inputs: Array<unknown> = Array.isArray(body?.input) ? body.input : [body?.input]
      const tokens = inputs.reduce<number>((n, input) => n + estimateTokens({ messages: [{ content: input }] }), 0)
      return {
        object: "list",
        data: inputs.map((input, index) => ({
          object: "embedding",
          index,
          embedding: [String(input).length / 100, 0.5, -0.25]
        })),
        model: body?.model,
        usage: { prompt_tokens: tokens, total_tokens: tokens }
      }
    }
  },
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
  validate: (body, _requestId, path) => {
    if (typeof body !== "object" || body === null) return errorAnswer(400, "We could not parse the JSON body.")
    if (typeof body.model !== "string") return errorAnswer(400, "you must provide a model parameter")
    if (path === "/v1/responses") {
      return body.input === undefined ? errorAnswer(400, "Missing required parameter: 'input'.") : undefined
    }
    if (!Array.isArray(body.messages)) return errorAnswer(400, "Missing required parameter: 'messages'.")
    return undefined
  },
  notFound: (req) => errorAnswer(404, `Invalid URL (${req.method} ${req.path})`, null),
  errorFor: (status) => errorAnswer(status),
  defaultReply,
  json: (body, reply, ids, path) => {
    if (path === "/v1/responses") return responseOf(body, reply, ids, "completed")
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
          // DeepSeek's and Kimi's field for a thinking model's reasoning
          ...(reply.thinking === undefined ? {} : { reasoning_content: reply.thinking }),
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
  events: (body, reply, ids, path) => {
    if (path === "/v1/responses") return responseEvents(body, reply, ids)
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
    for (const reasoning_content of splitWords(reply.thinking ?? "")) events.push(chunk({ reasoning_content }))
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
  audio: {
    path: "/v1/audio/speech",
    validate: (body) => {
      if (typeof body !== "object" || body === null) return errorAnswer(400, "We could not parse the JSON body.")
      for (const key of ["model", "input", "voice"]) {
        if (typeof body[key] !== "string") return errorAnswer(400, `Missing required parameter: '${key}'.`)
      }
      if (
        body.response_format !== undefined &&
        !["mp3", "pcm", "wav", "opus", "aac", "flac"].includes(body.response_format)
      ) {
        return errorAnswer(400, `Invalid value: '${body.response_format}'.`)
      }
      return undefined
    },
    answer: (body) => speechAnswer(body)
  },
  // OpenAI-compatible servers keep a stream open with comments (OpenRouter's `: OPENROUTER PROCESSING`), some with
  // chunks that say nothing.
  keepAlives: (body, path) => {
    const comments = [": keep-alive\n\n", ": OPENROUTER PROCESSING\n\n"]
    if (path === "/v1/responses") return comments
    const empty = {
      id: "chatcmpl-fake-keep-alive",
      object: "chat.completion.chunk",
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: null }]
    }
    const nothing = { ...empty, choices: [{ index: 0, delta: { content: "" }, logprobs: null, finish_reason: null }] }
    return [...comments, `data: ${JSON.stringify(empty)}\n\n`, `data: ${JSON.stringify(nothing)}\n\n`]
  },
  malformedEvent: "data: {\"id\":\"chatcmpl-fake\",\"choices\":[{oops\n\n",
  errorEvent: (status) => `data: ${JSON.stringify({ error: errorDetail(status) })}\n\n`,
  defaultErrorEventStatus: 500
}

/**
 * Starts a fake OpenAI API on 127.0.0.1: chat completions and the Responses API (`POST /v1/chat/completions`,
 * `/v1/responses`, JSON and SSE) and embeddings (`POST /v1/embeddings`). Its `url` ends in `/v1`, as the OpenAI SDK's
 * `baseURL` does.
 */
export const startFakeOpenAi = (options: FakeOpenAiOptions = {}): Promise<FakeUpstream> =>
  startFake(options.storesResponses === undefined ? protocol : storing(options.storesResponses), options)

/** The protocol of a fake that keeps its Responses answers (`FakeOpenAiOptions.storesResponses`). */
const storing = (prefix: string): Protocol => {
  const kept = new Set<string>()
  const keep = (body: any, id: string) => {
    if (body.store !== false) kept.add(id)
  }
  // Not reset with the fake, as the ids it keeps are not: an id is never given twice.
  let responses = 0
  const idsOf = (ids: Ids): Ids => ({ next: (name) => (name === "response" ? ++responses : ids.next(name)) })
  return {
    ...protocol,
    validate: (body, requestId, path) => {
      const invalid = protocol.validate(body, requestId, path)
      const previous = body?.previous_response_id
      if (invalid !== undefined || path !== "/v1/responses" || typeof previous !== "string" || kept.has(previous)) {
        return invalid
      }
      return {
        status: 400,
        body: {
          error: {
            message: `Previous response with id '${previous}' not found.`,
            type: "invalid_request_error",
            param: "previous_response_id",
            code: "previous_response_not_found"
          }
        }
      }
    },
    json: (body, reply, ids, path) => {
      if (path !== "/v1/responses") return protocol.json(body, reply, ids, path)
      const response = responseOf(body, reply, idsOf(ids), "completed", prefix)
      keep(body, response.id)
      return response
    },
    events: (body, reply, ids, path) => {
      if (path !== "/v1/responses") return protocol.events(body, reply, ids, path)
      return responseEvents(body, reply, idsOf(ids), prefix, (id) => keep(body, id))
    }
  }
}
