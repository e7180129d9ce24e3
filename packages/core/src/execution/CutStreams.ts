/**
 * What a stream is billed when its upstream never told its usage: cut short by its client (the upstream request is
 * then aborted), failed after content, or from a server that sends no usage at all. An OpenAI-compatible upstream
 * tells a stream's usage only in its last chunk, and an Anthropic one its output tokens only in `message_delta`, near
 * the end: a stream cut before would be billed nothing, or its input alone, though the provider bills what it
 * generated. Such a stream is billed an estimate instead, as the gateway estimates a prompt elsewhere (about four
 * characters a token): the prompt from the request body's size, unless the upstream told its input already, and the
 * output from the content its frames carried (`StreamState.generated`), unless the upstream told more.
 */
import type * as Cost from "../pricing/Cost.js"

/** Characters of text a token stands for, in the gateway's estimates (the body's bytes, the content's characters). */
export const CHARS_PER_TOKEN = 4

/** Tokens, estimated, of so many characters (or bytes) of text. */
export const tokensOf = (chars: number): number => Math.ceil(Math.max(0, chars) / CHARS_PER_TOKEN)

/** The stream's end was seen and the upstream told some usage: what it told stands. */
const told = (usage: Cost.BilledUsage): boolean => usage.input + usage.output + usage.cacheRead + usage.cacheWrite > 0

/**
 * The usage a committed stream is billed. `reported` is what its upstream told (as billed), `complete` whether the
 * stream's end event was seen, `generated` the characters of content it carried, `bodyBytes` the request body's
 * size. A complete stream with a reported usage is billed exactly that.
 */
export const billedUsage = (
  reported: Cost.BilledUsage,
  complete: boolean,
  generated: number,
  bodyBytes: number | undefined
): Cost.BilledUsage => {
  if (complete && told(reported)) return reported
  const prompt = reported.input + reported.cacheRead + reported.cacheWrite
  return {
    input: prompt > 0 ? reported.input : tokensOf(bodyBytes ?? 0),
    output: Math.max(reported.output, tokensOf(generated)),
    cacheRead: reported.cacheRead,
    cacheWrite: reported.cacheWrite
  }
}
