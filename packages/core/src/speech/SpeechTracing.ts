/**
 * Where a speech request's observability data goes: one Effect span per request, from validation until the audio has
 * been sent (or the request failed), for whatever tracer the host installs (`@effect/opentelemetry`, say; Effect's
 * own otherwise). The request's `trace` object shapes it: `span_name` names it, `trace_id` with `parent_span_id`
 * (W3C ids: 32 and 16 hex digits) make it a child of the caller's span, `trace_name` and `generation_name` are
 * attributes, and every other key of `trace` is an attribute `trace.metadata.<key>` (custom metadata). The session,
 * the end user, the model, the provider that answered and the generation id are attributes too.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Tracer from "effect/Tracer"
import type { SpeechTrace } from "./SpeechRequest.js"

/** A span's name when `trace.span_name` gives none. */
export const DEFAULT_SPAN_NAME = "speech"

const TRACE_ID = /^[0-9a-f]{32}$/i
const SPAN_ID = /^[0-9a-f]{16}$/i

/** The caller's span as a parent, when `trace` names one with W3C trace-context ids. */
export const parentOf = (trace: SpeechTrace | undefined): Tracer.ExternalSpan | undefined =>
  trace?.traceId !== undefined && trace.parentSpanId !== undefined && TRACE_ID.test(trace.traceId) &&
    SPAN_ID.test(trace.parentSpanId)
    ? Tracer.externalSpan({ traceId: trace.traceId.toLowerCase(), spanId: trace.parentSpanId.toLowerCase() })
    : undefined

const attributeValue = (value: unknown): unknown =>
  value === null || typeof value === "string" || typeof value === "number" || typeof value === "boolean"
    ? value
    : JSON.stringify(value)

/** The span's attributes at its start. */
export const attributesOf = (fields: {
  readonly requestId: string
  readonly model: string
  readonly trace: SpeechTrace | undefined
  readonly sessionId: string | undefined
  readonly user: string | undefined
}): Record<string, unknown> => {
  const attributes: Record<string, unknown> = {
    "gen_ai.operation.name": "speech",
    "gen_ai.request.model": fields.model,
    "gateway.request_id": fields.requestId
  }
  if (fields.sessionId !== undefined) attributes["session.id"] = fields.sessionId
  if (fields.user !== undefined) attributes["user.id"] = fields.user
  const trace = fields.trace
  if (trace !== undefined) {
    if (trace.traceId !== undefined) attributes["trace.trace_id"] = trace.traceId
    if (trace.traceName !== undefined) attributes["trace.trace_name"] = trace.traceName
    if (trace.spanName !== undefined) attributes["trace.span_name"] = trace.spanName
    if (trace.generationName !== undefined) attributes["trace.generation_name"] = trace.generationName
    if (trace.parentSpanId !== undefined) attributes["trace.parent_span_id"] = trace.parentSpanId
    for (const [key, value] of Object.entries(trace.custom)) attributes[`trace.metadata.${key}`] = attributeValue(value)
  }
  return attributes
}

/** Starts the span of a request (not on the fiber's span stack: it outlives the handler, until the audio is sent). */
export const start = (
  trace: SpeechTrace | undefined,
  attributes: Record<string, unknown>
): Effect.Effect<Tracer.Span> =>
  Effect.makeSpan(trace?.spanName ?? DEFAULT_SPAN_NAME, { attributes, parent: parentOf(trace), kind: "server" })

/** Ends a span at the clock's time. */
export const end = (span: Tracer.Span, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeNanos, (now) => Effect.sync(() => span.end(now, exit)))
