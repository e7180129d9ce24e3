/** Upstream 400s told apart by their bodies, with the providers' real error texts. */
import { describe, expect, it } from "vitest"
import { rejectionKind } from "../src/internal/Failures.js"
import * as OpenAiTranslate from "../src/openai/OpenAiTranslate.js"

describe("rejectionKind", () => {
  it.each([
    ["invalid_request_error", "prompt is too long: 215329 tokens > 200000 maximum"],
    [
      "invalid_request_error",
      "input length and `max_tokens` exceed context limit: 197354 + 21333 > 200000, decrease input length or " +
      "`max_tokens` and try again"
    ],
    [
      "context_length_exceeded",
      "This model's maximum context length is 128000 tokens. However, your messages resulted in 130351 tokens. " +
      "Please reduce the length of the messages."
    ],
    ["invalid_request_error", "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8192"]
  ])("a prompt too long for the model: %s %s", (type, message) => {
    expect(rejectionKind(message, type)).toBe("context_length")
  })

  it.each([
    [
      "content_policy_violation",
      "Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed " +
      "by our safety system."
    ],
    [
      "content_filter",
      "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify " +
      "your prompt and retry."
    ],
    ["invalid_request_error", "Output blocked by content filtering policy"]
  ])("a content-policy refusal: %s", (type, message) => {
    expect(rejectionKind(message, type)).toBe("content_filter")
  })

  it.each([
    ["invalid_request_error", "max_tokens: Field required"],
    ["invalid_request_error", "messages: roles must alternate between \"user\" and \"assistant\""],
    ["invalid_request_error", "Invalid value for 'temperature': must be at most 2"]
  ])("a request wrong whatever the model: %s", (type, message) => {
    expect(rejectionKind(message, type)).toBe("invalid_request")
  })

  it("classifies an OpenAI-compatible error body by its code too", () => {
    const body = { error: { message: "Too long.", type: "invalid_request_error", code: "context_length_exceeded" } }
    expect(OpenAiTranslate.classifyErrorBody(400, body).kind).toBe("context_length")
    expect(OpenAiTranslate.classifyErrorBody(400, { error: { message: "bad", type: "x" } }).kind).toBe(
      "invalid_request"
    )
  })
})
