/**
 * A batch file as `model-gateway batches submit` reads it: JSON Lines, one request a line, as OpenAI's batch files are
 * (`{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body": {...}}`; `method` and `url` may be left out).
 * The endpoint and the model come from the command's options, else from the lines (which must then agree). A problem
 * names the file and line.
 */
import * as Data from "effect/Data"
import * as Predicate from "effect/Predicate"

/** A batch file that cannot be submitted; the message names the file and line. */
export class BatchFileError extends Data.TaggedError("BatchFileError")<{ readonly message: string }> {}

export interface Submission {
  readonly endpoint: string
  readonly model: string
  readonly requests: ReadonlyArray<{ readonly custom_id: unknown; readonly body: unknown }>
}

const ENDPOINTS = ["/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/embeddings"]

/** The endpoint as given (`/v1/chat/completions`, or `chat/completions` without the prefix). */
export const normalizeEndpoint = (endpoint: string): string => {
  const trimmed = endpoint.trim()
  return trimmed.startsWith("/v1/") ? trimmed : `/v1/${trimmed.replace(/^\/+/, "")}`
}

/** Reads the lines of `text` (from `file`) into a submission, with the endpoint and model given or found in them. */
export const parse = (
  file: string,
  text: string,
  given: { readonly endpoint?: string | undefined; readonly model?: string | undefined }
): Submission => {
  const fail = (line: number | undefined, message: string): never => {
    throw new BatchFileError({ message: `${file}${line === undefined ? "" : `:${line}`}: ${message}` })
  }
  let endpoint = given.endpoint === undefined ? undefined : normalizeEndpoint(given.endpoint)
  if (endpoint !== undefined && !ENDPOINTS.includes(endpoint)) {
    fail(undefined, `--endpoint must be one of ${ENDPOINTS.join(", ")} (got ${given.endpoint})`)
  }
  let model = given.model
  const requests: Array<{ custom_id: unknown; body: unknown }> = []
  const lines = text.split("\n")
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim()
    if (line === "") continue
    const at = i + 1
    let parsed: unknown
    try {
      parsed = JSON.parse(line)
    } catch (e) {
      fail(at, `not valid JSON: ${(e as Error).message}`)
    }
    if (!Predicate.isRecord(parsed)) return fail(at, "each line must be a JSON object with custom_id and body")
    if (parsed.method !== undefined && parsed.method !== "POST") {
      fail(at, `method must be POST (got ${String(parsed.method)})`)
    }
    if (parsed.url !== undefined) {
      const url = typeof parsed.url === "string" ? normalizeEndpoint(parsed.url) : ""
      if (endpoint === undefined) endpoint = url
      else if (url !== endpoint) fail(at, `url ${String(parsed.url)} is not the batch's endpoint ${endpoint}`)
    }
    const body = parsed.body
    if (Predicate.isRecord(body) && typeof body.model === "string") {
      if (model === undefined) model = body.model
      else if (body.model !== model) fail(at, `body.model ${body.model} is not the batch's model ${model}`)
    }
    requests.push({ custom_id: parsed.custom_id, body })
  }
  if (requests.length === 0) fail(undefined, "no requests (one JSON object a line)")
  if (endpoint === undefined) fail(undefined, "no endpoint: give --endpoint, or a url on the lines")
  if (model === undefined) fail(undefined, "no model: give --model, or a model in the bodies")
  return { endpoint: endpoint!, model: model!, requests }
}
