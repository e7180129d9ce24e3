/**
 * What an answer is billed when its upstream did not tell its usage. An OpenAI-compatible upstream tells a stream's
 * usage only in its last chunk, and an Anthropic one its output tokens only in `message_delta`, near the end: a stream
 * cut before (its client left and the upstream request was aborted, or the upstream broke off after content) would be
 * billed nothing, or its input alone, though the provider bills what it generated. Some OpenAI-compatible servers tell
 * no usage at all, streamed or not. Such an answer is billed an estimate, as the gateway estimates a prompt elsewhere
 * (about four characters a token): the prompt from the request body's size, unless the upstream told its input, and
 * the output from the content the answer carried (`StreamState.generated`, `Dialect.generated`), unless the upstream
 * told more. Limits settle with the same figures.
 */
import type * as Cost from "../pricing/Cost.js"

/** Characters of text a token stands for, in the gateway's estimates (the body's bytes, the content's characters). */
export const CHARS_PER_TOKEN = 4

/** Tokens, estimated, of so many characters (or bytes) of text. */
export const tokensOf = (chars: number): number => Math.ceil(Math.max(0, chars) / CHARS_PER_TOKEN)

/** The upstream told some usage. */
export const isTold = (usage: Cost.BilledUsage): boolean =>
  usage.input + usage.output + usage.cacheRead + usage.cacheWrite > 0

/**
 * The usage an answer is billed. `reported` is what its upstream told (as billed), `complete` whether it was whole (a
 * JSON answer, a stream whose end event was seen), `generated` the characters of content it carried, `bodyBytes` the
 * request body's size. A complete answer with a reported usage is billed exactly that.
 */
export const billedUsage = (
  reported: Cost.BilledUsage,
  complete: boolean,
  generated: number,
  bodyBytes: number | undefined
): Cost.BilledUsage => {
  if (complete && isTold(reported)) return reported
  const prompt = reported.input + reported.cacheRead + reported.cacheWrite
  return {
    input: prompt > 0 ? reported.input : tokensOf(bodyBytes ?? 0),
    output: Math.max(reported.output, tokensOf(generated)),
    cacheRead: reported.cacheRead,
    cacheWrite: reported.cacheWrite
  }
}
