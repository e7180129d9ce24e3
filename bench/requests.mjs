// What each target is sent, per upstream protocol. The client always asks for the same answer:
//
//   gateway, baseline   POST /v1/messages (Anthropic format) with the gateway's key and model: `bench/model` routes
//                       to the Anthropic provider, `bench/openai` to the OpenAI-compatible one (the gateway translates);
//                       with BENCH_GATEWAY_API=chat, POST /v1/chat/completions with the OpenAI body instead (passed
//                       through to the OpenAI-compatible provider, translated for the Anthropic one)
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
import { GATEWAY_API } from "./settings.mjs"

export const PROVIDERS = ["anthropic", "openai"]

/** The gateway under test, or another build of it (`BENCH_BASELINE`): both answer in Anthropic's format. */
export const isGateway = (target) => target.name === "gateway" || target.name === "baseline"

/** The protocol of the answer a target gives in a scenario: the gateway answers in its front door's. */
export const answerFormat = (target, provider) =>
  isGateway(target) ? (GATEWAY_API === "chat" ? "openai" : "anthropic") : provider

/**
 * { path, headers, body } of the request `target` gets for `provider` (anthropic | openai), streamed or not.
 * `upstreamUrl` is where Portkey is told to go.
 */
export const requestFor = (target, provider, stream, upstreamUrl) => {
  if (isGateway(target) && GATEWAY_API === "chat") {
    return {
      path: "/v1/chat/completions",
      headers: openAiRequestHeaders,
      body: openAiRequestBody(stream, provider === "openai" ? GATEWAY_OPENAI_MODEL : GATEWAY_MODEL)
    }
  }
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

/**
 * `req` with the context of a coding agent's session of about `kb` KB before the fixture's question, as Claude Code
 * sends with every turn: a system prompt and 16 tool definitions with JSON schemas, then turns of tool calls (the
 * assistant's thinking, text and `tool_use`; the user's `tool_result` with the tool's output), in the format of the
 * protocol the target speaks: Anthropic's content blocks, or OpenAI's `tool_calls` and `tool` messages.
 */
export const withCodingSession = (req, kb, format) => {
  const body = JSON.parse(req.body)
  const question = body.messages.at(-1).content
  const output = (i) =>
    Array.from({ length: 60 }, (_, n) => `src/module${i}/file${n}.ts:${n + 1}: export const value${n} = ${n}`).join("\n")
  const tools = Array.from({ length: 16 }, (_, i) => ({
    name: `tool_${i}`,
    description: `Runs tool ${i} on the workspace. `.repeat(6),
    schema: {
      type: "object",
      properties: { path: { type: "string", description: "A path in the workspace" }, limit: { type: "integer" } },
      required: ["path"]
    }
  }))
  const system = "You are a coding agent working in a repository. Follow the user's instructions. ".repeat(20)
  const id = (i) => `toolu_${String(i).padStart(20, "0")}`
  const args = (i) => ({ path: `src/module${i}`, limit: 60 })
  const start = "Look at the modules one by one."
  const openAi = format === "openai"
  const messages = openAi ? [{ role: "system", content: system }, { role: "user", content: start }] : [
    { role: "user", content: [{ type: "text", text: start }] }
  ]
  const shaped = () =>
    openAi
      ? {
        ...body,
        tools: tools.map((t) => ({
          type: "function",
          function: { name: t.name, description: t.description, parameters: t.schema }
        })),
        messages: [...messages, { role: "user", content: question }]
      }
      : {
        ...body,
        system: [{ type: "text", text: system, cache_control: { type: "ephemeral" } }],
        tools: tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.schema })),
        messages: messages.map((m, i) =>
          i < messages.length - 1 ? m : {
            ...m,
            content: [...m.content, { type: "text", text: question, cache_control: { type: "ephemeral" } }]
          }
        )
      }
  for (let i = 0; JSON.stringify(shaped()).length < kb * 1024; i++) {
    if (openAi) {
      messages.push({
        role: "assistant",
        content: `I will read src/module${i}.`,
        tool_calls: [{ id: id(i), type: "function", function: { name: "tool_1", arguments: JSON.stringify(args(i)) } }]
      }, { role: "tool", tool_call_id: id(i), content: output(i) })
    } else {
      messages.push({
        role: "assistant",
        content: [
          { type: "thinking", thinking: `Module ${i} next; reading it first.`, signature: "c2lnbmF0dXJl".repeat(8) },
          { type: "text", text: `I will read src/module${i}.` },
          { type: "tool_use", id: id(i), name: "tool_1", input: args(i) }
        ]
      }, { role: "user", content: [{ type: "tool_result", tool_use_id: id(i), content: [{ type: "text", text: output(i) }] }] })
    }
  }
  return { ...req, body: JSON.stringify(shaped()) }
}
