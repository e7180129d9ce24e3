/**
 * Pure translation between the Anthropic Messages wire format the gateway serves and the OpenAI chat
 * completions format that OpenAI-compatible upstreams speak (OpenAI, vLLM, Ollama, llama.cpp server,
 * OpenRouter, DeepSeek). No I/O: the OpenAI adapter feeds these functions with parsed bodies and chunks.
 *
 * The request out (`OpenAiChatRequest`), the answer back (`OpenAiChatAnswer`) or its stream (`OpenAiChatStream`), and
 * the classification of upstream errors (`OpenAiErrors`); this module re-exports them. The reverse of `ChatTranslate`.
 */
export { fromChatCompletion, usageFromOpenAi } from "./OpenAiChatAnswer.js"
export type { ChatRequestOptions } from "./OpenAiChatRequest.js"
export { toChatRequest } from "./OpenAiChatRequest.js"
export type { StreamTranslator } from "./OpenAiChatStream.js"
export { makeStreamTranslator } from "./OpenAiChatStream.js"
export { classifyErrorBody, classifyInBandError } from "./OpenAiErrors.js"
