/**
 * What an upstream's failures are, for the executor: an HTTP error answer classified by its status and body (rate
 * limited, overloaded, a prompt too long, a content-policy refusal, ...), a thrown transport error (time limit,
 * socket, abort), the wait a rate-limited answer asks for, and the credentials taken out of an error's message.
 */
import { Upstream } from "@model-gateway/core"
import * as HttpClient from "./HttpClient.js"

/** What reading an error answer needs of the call: the credentials it carried, and how its provider words errors. */
export interface ErrorSource {
  readonly headers: Readonly<Record<string, string>>
  /** Reads a provider error body into (message, error type). */
  readonly describeError: (body: unknown, text: string) => { message: string; type?: string | undefined }
}

export const firstHeader = (value: string | Array<string> | undefined): string | undefined =>
  Array.isArray(value) ? value[0] : value

/** The wait a rate-limited answer asks for, in ms: `retry-after-ms`, or `retry-after` in seconds or as a date. */
export const retryAfterOf = (headers: Record<string, string | Array<string> | undefined>): number | undefined => {
  const ms = firstHeader(headers["retry-after-ms"])
  if (ms !== undefined && Number.isFinite(Number(ms))) return Number(ms)
  const s = firstHeader(headers["retry-after"])
  if (s === undefined) return undefined
  if (Number.isFinite(Number(s))) return Number(s) * 1000
  const date = Date.parse(s)
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now())
}

/** A 400 saying the prompt does not fit the model's context (Anthropic's and OpenAI-compatible providers' texts). */
const CONTEXT_LENGTH =
  /context[ _-]?length|context[ _-]?window|prompt is too long|maximum context|exceeds? (?:the )?(?:model's )?context|too many (?:input )?tokens|input length and `?max_tokens`? exceed|tokens \+ `?max_new_tokens`? must be/i

/** A 400 refusing the input by the provider's content policy (OpenAI, Azure OpenAI, Anthropic, OpenRouter). */
const CONTENT_FILTER =
  /content[ _-]?(?:filter|policy|management)|safety system|responsibleaipolicyviolation|flagged as potentially|violat\w* (?:our|the) usage polic/i

/**
 * What kind of 400-class rejection an answer is: the prompt too long for the model, a content-policy refusal
 * (another model may take either), or a request that is wrong whatever the model.
 */
export const rejectionKind = (message: string, errorType: string | undefined): Upstream.UpstreamFailure => {
  const text = `${errorType ?? ""} ${message}`
  return CONTEXT_LENGTH.test(text) ? "context_length" : CONTENT_FILTER.test(text) ? "content_filter" : "invalid_request"
}

/** Classifies an HTTP error answer from its status and (provider-specific) body. */
export const classifyStatus = (
  status: number,
  message: string,
  errorType: string | undefined,
  retryAfterMs: number | undefined
): Upstream.UpstreamError => {
  const kind: Upstream.UpstreamFailure = status === 429
    ? "rate_limited"
    : status === 529 || status === 503 || errorType === "overloaded_error"
    ? "overloaded"
    : status === 408 || status === 504 || status === 524
    ? "timeout"
    : status >= 500
    ? "server_error"
    : status === 401 || status === 403
    ? "auth"
    : status === 404
    ? "not_found"
    : rejectionKind(message, errorType)
  return new Upstream.UpstreamError({ kind, status, message, errorType, retryAfterMs })
}

/** Maps a thrown transport error (time limit, socket, abort) to a classified upstream failure. */
export const classifyThrown = (cause: unknown): Upstream.UpstreamError => {
  if (cause instanceof Upstream.UpstreamError) return cause
  if (cause instanceof HttpClient.TimeoutError) {
    return new Upstream.UpstreamError({ kind: "timeout", message: `upstream timed out: ${cause.message}` })
  }
  const error = cause as { code?: string; message?: string } | undefined
  return new Upstream.UpstreamError({
    kind: "transport",
    message: `upstream connection failed: ${error?.code ?? ""} ${error?.message ?? String(cause)}`.trim()
  })
}

/** A body's text as `fetch`'s `text()` reads it: UTF-8, without a byte order mark. */
export const textOf = (chunks: ReadonlyArray<Buffer>, length: number): string => {
  if (chunks.length === 0 || length === 0) return ""
  const buffer = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, length)
  const start = buffer.length > 2 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0
  return buffer.toString("utf8", start)
}

/** The most of an upstream body's text an error message quotes when the body has no message of its own. */
export const EXCERPT_CHARS = 300

/**
 * A brief, printable excerpt of a body that is not an error the provider described (an HTML page, a proxy's text,
 * audio bytes where an error was expected): control characters and undecodable bytes as spaces, white space collapsed,
 * at most `EXCERPT_CHARS` characters; `fallback` when nothing printable is left. It goes on to the client and the logs.
 */
export const excerpt = (text: string, fallback: string): string => {
  // eslint-disable-next-line no-control-regex
  const printable = text.slice(0, EXCERPT_CHARS * 4).replace(/[\u0000-\u001f\u007f-\u009f\ufffd\s]+/g, " ").trim()
  if (printable === "") return fallback
  return printable.length > EXCERPT_CHARS ? `${printable.slice(0, EXCERPT_CHARS)}…` : printable
}

/** The request headers that carry the gateway's provider credentials. */
const CREDENTIAL_HEADERS = ["authorization", "x-api-key", "api-key", "x-goog-api-key"]

/**
 * An upstream's error message without the credentials the request carried: some providers quote the key they
 * refused ("Incorrect API key provided: sk-..."), and the message goes on to the client and the logs.
 */
export const withoutCredentials = (message: string, headers: Readonly<Record<string, string>>): string => {
  let out = message
  for (const name of CREDENTIAL_HEADERS) {
    const value = headers[name]
    if (value === undefined) continue
    const secret = name === "authorization" ? value.replace(/^\s*(?:bearer|basic)\s+/i, "") : value
    // Short values are not secrets worth hiding, and would blank out ordinary words.
    if (secret.length >= 8) out = out.split(secret).join("[redacted]")
  }
  return out
}

/** The failure for an HTTP error answer (status 300 and above), from its body text and headers. */
export const errorFromResponse = (
  call: ErrorSource,
  status: number,
  headers: HttpClient.Headers | undefined,
  text: string
): Upstream.UpstreamError => {
  let parsed: unknown = undefined
  try {
    parsed = JSON.parse(text)
  } catch {
    // not JSON: the text itself is the message
  }
  const described = call.describeError(parsed, text)
  return classifyStatus(
    status,
    withoutCredentials(described.message, call.headers),
    described.type,
    retryAfterOf(headers ?? {})
  )
}
