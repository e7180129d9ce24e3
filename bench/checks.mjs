// Correctness first: before anything is measured, every target is asked once per scenario (upstream protocol x
// streamed or not), its answer checked, and the upstream asked what it received. A fast wrong answer is not a result:
// any difference throws, and the benchmark stops with exit code 1.
import { isDeepStrictEqual } from "node:util"
import { Agent, request } from "undici"
import {
  DELTAS,
  EXPECTED_COST,
  GATEWAY_MODEL,
  GATEWAY_OPENAI_MODEL,
  INPUT_TOKENS,
  MESSAGE,
  OPENAI_COMPLETION,
  OPENAI_ID,
  openAiSseEvents,
  OUTPUT_TOKENS,
  SSE_EVENTS,
  TEXT,
  UPSTREAM_KEY
} from "./fixtures.mjs"
import { callChild } from "./children.mjs"
import { answerFormat, isGateway, requestFor } from "./requests.mjs"

const checkAgent = new Agent({ connections: 1 })
export const closeChecks = () => checkAgent.close()

const post = async (target, provider, stream, upstreamUrl) => {
  const { path, headers, body } = requestFor(target, provider, stream, upstreamUrl)
  const response = await request(`${target.url}${path}`, { method: "POST", headers, body, dispatcher: checkAgent })
  return { status: response.statusCode, headers: response.headers, text: await response.body.text() }
}

/** Parses an SSE body into [{ event, data }] (data parsed as JSON unless it is `[DONE]`). */
export const parseSse = (text) =>
  text.split("\n\n").filter((block) => block.trim() !== "").map((block) => {
    let event
    const data = []
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) event = line.slice(6).trim()
      else if (line.startsWith("data:")) data.push(line.slice(5).trimStart())
    }
    const raw = data.join("\n")
    return { event, data: raw === "[DONE]" ? raw : JSON.parse(raw) }
  })

const show = (value) => (value === undefined ? "undefined" : JSON.stringify(value)?.slice(0, 300))

/** Throws "<what>: <field>: expected …, got …" unless actual deep-equals expected. */
const expect = (what) => (field, actual, expected) => {
  if (!isDeepStrictEqual(actual, expected)) {
    throw new Error(`${what}: ${field}: expected ${show(expected)}, got ${show(actual)}`)
  }
}

const expectOk = (what, got, contentType) => {
  if (got.status !== 200) throw new Error(`${what}: expected status 200, got ${got.status}: ${got.text.slice(0, 500)}`)
  const type = String(got.headers["content-type"] ?? "")
  if (!type.startsWith(contentType)) throw new Error(`${what}: expected content-type ${contentType}, got ${type}`)
}

/** A pipe-only target (direct, the proxies) must return the upstream's bytes exactly. */
const isPipe = (target) => !isGateway(target) && target.name !== "portkey"

// ---------------------------------------------------------------------------------------------------
// answers in Anthropic's format (every target on an Anthropic upstream; the gateway on both)
// ---------------------------------------------------------------------------------------------------

/**
 * A result's content with each text block's `citations` an array: the gateway gives `[]` where the upstream sent none
 * (spec 2.2; a build before that gave the upstream's `null`, and a baseline may be one).
 */
const withCitations = (content) =>
  Array.isArray(content)
    ? content.map((block) => (block?.type === "text" && block.citations == null ? { ...block, citations: [] } : block))
    : content

const checkMessage = (what, target, provider, body) => {
  const eq = expect(what)
  if (!isGateway(target)) return eq("body", body, MESSAGE)
  const viaOpenAi = provider === "openai"
  eq("id", body.id, viaOpenAi ? `msg_${OPENAI_ID}` : MESSAGE.id)
  for (const field of ["type", "role", "stop_reason", "stop_sequence"]) eq(field, body[field], MESSAGE[field])
  eq("content", withCitations(body.content), withCitations(MESSAGE.content))
  eq("model", body.model, viaOpenAi ? GATEWAY_OPENAI_MODEL : GATEWAY_MODEL)
  eq("usage.input_tokens", body.usage?.input_tokens, INPUT_TOKENS)
  eq("usage.output_tokens", body.usage?.output_tokens, OUTPUT_TOKENS)
  eq("usage.cache_creation_input_tokens", body.usage?.cache_creation_input_tokens, 0)
  eq("usage.cache_read_input_tokens", body.usage?.cache_read_input_tokens, 0)
  eq("usage.cost", body.usage?.cost, EXPECTED_COST)
}

const checkMessageStream = (what, target, provider, text) => {
  const eq = expect(what)
  if (isPipe(target)) return eq("body", text, SSE_EVENTS.join(""))
  const events = parseSse(text)
  const types = events.map((e) => e.data.type)
  eq("event names (must equal data.type)", events.map((e) => e.event), types)
  if (types.includes("error")) throw new Error(`${what}: in-band error event: ${text.slice(0, 500)}`)
  if (!isGateway(target)) return eq("events", events.map((e) => e.data), parseSse(SSE_EVENTS.join("")).map((e) => e.data))
  eq("first event", types[0], "message_start")
  eq("last event", types.at(-1), "message_stop")
  eq("message_start model", events[0].data.message?.model, provider === "openai" ? GATEWAY_OPENAI_MODEL : GATEWAY_MODEL)
  const deltas = events.filter((e) => e.data.type === "content_block_delta")
  eq("content_block_delta count (one per upstream delta)", deltas.length, DELTAS.length)
  eq("text", deltas.map((e) => e.data.delta?.text).join(""), TEXT)
  const messageDelta = events.find((e) => e.data.type === "message_delta")
  eq("message_delta stop_reason", messageDelta?.data.delta?.stop_reason, "end_turn")
  eq("message_delta usage.output_tokens", messageDelta?.data.usage?.output_tokens, OUTPUT_TOKENS)
  eq("message_delta usage.cost", messageDelta?.data.usage?.cost, EXPECTED_COST)
}

// ---------------------------------------------------------------------------------------------------
// answers in OpenAI's format (direct, the proxies and Portkey on an OpenAI upstream)
// ---------------------------------------------------------------------------------------------------

/** The token counts of a usage (the gateway adds its cost and the cache details). */
const tokensOf = (usage) =>
  usage == null
    ? usage
    : { prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens, total_tokens: usage.total_tokens }

const checkCompletion = (what, target, body) => {
  const eq = expect(what)
  if (isPipe(target)) return eq("body", body, OPENAI_COMPLETION)
  eq("choices[0].message.content", body.choices?.[0]?.message?.content, TEXT)
  eq("choices[0].finish_reason", body.choices?.[0]?.finish_reason, "stop")
  eq("usage", tokensOf(body.usage), OPENAI_COMPLETION.usage)
}

const checkCompletionStream = (what, target, text) => {
  const eq = expect(what)
  if (isPipe(target)) return eq("body", text, openAiSseEvents(true).join(""))
  const events = parseSse(text).map((e) => e.data)
  eq("last data", events.at(-1), "[DONE]")
  const chunks = events.slice(0, -1)
  eq("text", chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join(""), TEXT)
  eq("finish_reason", chunks.map((c) => c.choices?.[0]?.finish_reason).find((f) => f != null), "stop")
  eq("usage (final chunk)", tokensOf(chunks.findLast((c) => c.usage != null)?.usage), OPENAI_COMPLETION.usage)
}

// ---------------------------------------------------------------------------------------------------
// what the upstream received
// ---------------------------------------------------------------------------------------------------

const checkForwarded = async (upstream, what, target, provider, stream) => {
  const last = await callChild(upstream.child, "last")
  const eq = expect(`${what}, request as the upstream received it`)
  const body = JSON.parse(last.body)
  if (provider === "openai") {
    eq("path", last.url, "/v1/chat/completions")
    eq("authorization", last.headers.authorization, `Bearer ${UPSTREAM_KEY}`)
    eq("stream", body.stream === true, stream)
    if (stream) eq("stream_options.include_usage", body.stream_options?.include_usage, true)
    const content = body.messages?.[0]?.content
    eq("messages[0].role", body.messages?.[0]?.role, "user")
    eq("messages[0] text", typeof content === "string" ? content : content?.map?.((p) => p.text).join(""), "Hello, world")
  } else {
    eq("path", last.url, "/v1/messages")
    eq("x-api-key", last.headers["x-api-key"], UPSTREAM_KEY)
    eq("anthropic-version", last.headers["anthropic-version"], "2023-06-01")
    eq("stream", body.stream === true, stream)
    eq("messages", body.messages, [{ role: "user", content: "Hello, world" }])
  }
  eq("max_tokens", body.max_tokens ?? body.max_completion_tokens, 64)
  if (isGateway(target)) eq("model (the endpoint's upstream model id)", body.model, "m")
}

/** Checks one target's answer to one scenario (provider x stream), and what the upstream got from it. */
export const checkTarget = async (target, upstream, provider, stream) => {
  const what = `${target.name} (${provider}, ${stream ? "streaming" : "non-streaming"})`
  const got = await post(target, provider, stream, upstream.url)
  const format = answerFormat(target, provider)
  expectOk(what, got, stream ? "text/event-stream" : "application/json")
  if (format === "anthropic") {
    if (stream) checkMessageStream(what, target, provider, got.text)
    else checkMessage(what, target, provider, JSON.parse(got.text))
  } else if (stream) checkCompletionStream(what, target, got.text)
  else checkCompletion(what, target, JSON.parse(got.text))
  if (target.name !== "direct") await checkForwarded(upstream, what, target, provider, stream)
}
