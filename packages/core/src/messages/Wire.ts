/**
 * Loose types of the Anthropic Messages wire format that the gateway serves. Only the fields the
 * gateway reads or writes are named; everything else passes through untouched.
 */

/** A JSON object as parsed from the wire. */
export type JsonObject = { [key: string]: unknown }

/** Token usage as Anthropic reports it: `input_tokens` excludes cache reads and cache writes. */
export interface Usage {
  input_tokens: number
  output_tokens: number
  cache_creation_input_tokens?: number | null
  cache_read_input_tokens?: number | null
  [key: string]: unknown
}

/** A message result (spec 2.2). */
export interface Message {
  id: string
  type: "message"
  role: "assistant"
  model: string
  content: Array<JsonObject>
  stop_reason: string | null
  stop_sequence: string | null
  usage: Usage
  [key: string]: unknown
}

/** One server-sent event of a messages stream: the SSE event name equals `type`. */
export interface StreamEvent {
  type: string
  [key: string]: unknown
}

/** Serialises one stream event as a named SSE frame, the only form the Anthropic SDK reads. */
export const sseFrame = (event: StreamEvent): string => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
