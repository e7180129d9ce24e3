// What each target is sent, per upstream protocol. The client always asks for the same answer:
//
//   gateway, baseline   POST /v1/messages (Anthropic format) with the gateway's key and model: `bench/model` routes
//                       to the Anthropic provider, `bench/openai` to the OpenAI-compatible one (the gateway translates)
//   direct, proxy,      the upstream's own protocol: POST /v1/messages for Anthropic, POST /v1/chat/completions with
//   proxy-undici        the equivalent OpenAI body for OpenAI (the proxies swap the client's key for the upstream's)
//   portkey             the same as direct, plus `x-portkey-provider` and `x-portkey-custom-host` naming the fake
//                       upstream, and the upstream key itself (Portkey forwards the client's key). Portkey 1.15.2 answers
//                       /v1/messages for an OpenAI provider with 500 "messages is not supported by openai", so in the
//                       OpenAI scenarios it gets the OpenAI body on /v1/chat/completions, its native route
import {
  CLIENT_KEY,
  GATEWAY_MODEL,
  GATEWAY_OPENAI_MODEL,
  openAiRequestBody,
  openAiRequestHeaders,
  requestBody,
  requestHeaders,
  UPSTREAM_KEY
} from "./fixtures.mjs"

export const PROVIDERS = ["anthropic", "openai"]

/** The gateway under test, or another build of it (`BENCH_BASELINE`): both answer in Anthropic's format. */
export const isGateway = (target) => target.name === "gateway" || target.name === "baseline"

/** The protocol of the answer a target gives in a scenario: the gateway always answers in Anthropic's. */
export const answerFormat = (target, provider) => (isGateway(target) ? "anthropic" : provider)

/**
 * { path, headers, body } of the request `target` gets for `provider` (anthropic | openai), streamed or not.
 * `upstreamUrl` is where Portkey is told to go.
 */
export const requestFor = (target, provider, stream, upstreamUrl) => {
  if (isGateway(target)) {
    return {
      path: "/v1/messages",
      headers: requestHeaders,
      body: requestBody(stream, provider === "openai" ? GATEWAY_OPENAI_MODEL : GATEWAY_MODEL)
    }
  }
  const portkey = target.name === "portkey"
  const key = portkey ? UPSTREAM_KEY : CLIENT_KEY
  const route = portkey ? { "x-portkey-provider": provider, "x-portkey-custom-host": `${upstreamUrl}/v1` } : {}
  if (provider === "openai") {
    return {
      path: "/v1/chat/completions",
      headers: { ...openAiRequestHeaders, authorization: `Bearer ${key}`, ...route },
      body: openAiRequestBody(stream)
    }
  }
  return {
    path: "/v1/messages",
    headers: { ...requestHeaders, "x-api-key": key, ...route },
    body: requestBody(stream, "m")
  }
}

/**
 * `req` with its messages replaced by a conversation of about `kb` KB (alternating user and assistant turns of plain
 * text, then the fixture's question), as a coding agent sends with every turn. String contents: the same body is valid
 * in the Anthropic and the OpenAI formats.
 */
export const withConversation = (req, kb) => {
  const body = JSON.parse(req.body)
  const turns = Math.max(2, Math.round(kb / 5))
  const turn = (i) => Array.from({ length: 5 * 1024 / 8 }, (_, n) => `t${i}w${n} `.padEnd(8, "x")).join("")
  const messages = Array.from({ length: turns }, (_, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content: turn(i) }))
  return { ...req, body: JSON.stringify({ ...body, messages: [...messages, ...body.messages] }) }
}
