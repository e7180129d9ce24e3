/**
 * Pure translation between the OpenAI chat completions format the gateway serves at `/v1/chat/completions` and the
 * Anthropic Messages protocol of an upstream: the request out (`ChatRequest`), the message or its stream of events back
 * as a `chat.completion` or `chat.completion.chunk`s (`ChatAnswer`). The reverse of `OpenAiTranslate`.
 */
export * from "./ChatAnswer.js"
export * from "./ChatRequest.js"
