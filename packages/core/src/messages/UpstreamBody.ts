/**
 * The body an upstream receives: the client's body less the fields only the gateway understands, with the
 * endpoint's model id, and per endpoint the file-parser and context-compression transforms. Also what the body
 * needs of an endpoint, for route planning.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Endpoint, Model } from "../catalogue/Catalogue.js"
import { tokensOf } from "../execution/UntoldUsage.js"
import * as ContextCompression from "../plugins/ContextCompression.js"
import * as DocumentParser from "../plugins/DocumentParser.js"
import * as GatewayFields from "../routing/GatewayFields.js"
import type { Attempt, PipelineStep, Requirements } from "../routing/RoutePlanner.js"
import type { EventPull, ForwardHeaders, MessagesCall, UpstreamService } from "../upstream/Upstream.js"
import { UpstreamError } from "../upstream/Upstream.js"
import type * as Conversation from "./Conversation.js"
import * as JsonSource from "./JsonSource.js"
import type * as MessagesRequest from "./MessagesRequest.js"
import * as OutputCap from "./OutputCap.js"
import type { JsonObject, Message } from "./Wire.js"
import { withField } from "./Wire.js"

/**
 * The body an Anthropic-protocol upstream receives: the client's, less gateway fields, `user` mapped to metadata. It
 * carries the client's JSON text, if recorded (see `JsonSource`).
 */
export const forwardBody = (body: JsonObject): JsonObject => {
  // Copied key by key rather than spread and `delete`d: a `delete` turns the object into a slow dictionary.
  const out: JsonObject = {}
  for (const key of Object.keys(body)) {
    if (GatewayFields.names.has(key)) continue
    // An own `__proto__` key (JSON.parse makes one) stays a plain field, as a spread would keep it.
    if (key === "__proto__") {
      Object.defineProperty(out, key, { value: body[key], enumerable: true, writable: true, configurable: true })
    } else out[key] = body[key]
  }
  if (typeof body.user === "string" && (body.metadata === undefined || body.metadata === null)) {
    out.metadata = { user_id: body.user }
  }
  return JsonSource.derive(out, body)
}

const hasBlock = (messages: unknown, kind: string): boolean => {
  if (!Array.isArray(messages)) return false
  for (const m of messages) {
    const content = (m as JsonObject | null)?.content
    if (!Array.isArray(content)) continue
    for (const block of content) {
      const type = (block as JsonObject | null)?.type
      if (type === kind) return true
      if (type === "tool_result" && Array.isArray((block as JsonObject).content)) {
        for (const inner of (block as JsonObject).content as Array<JsonObject>) if (inner?.type === kind) return true
      }
    }
  }
  return false
}

/** What the request needs of an endpoint. */
export const requirements = (request: MessagesRequest.MessagesRequest, body: JsonObject): Requirements => ({
  tools: (Array.isArray(body.tools) && body.tools.length > 0) || body.tool_choice !== undefined,
  images: hasBlock(request.messages, "image"),
  documents: hasBlock(request.messages, "document"),
  maxTokens: typeof body.max_tokens === "number" ? body.max_tokens : undefined
})

/** The close count of a body's prompt tokens (system, messages and tools): it reads all their text. */
export const countPromptTokens = (body: JsonObject): number =>
  ContextCompression.estimateTokens({ system: body.system, messages: body.messages, tools: body.tools })

/**
 * Prompt tokens, estimated: exact enough only where it matters (near the smallest context window). `count` gives the
 * close count, for a caller that estimates one body for several models and counts it once.
 */
export const estimatePromptTokens = (
  body: JsonObject,
  bodyBytes: number | undefined,
  model: Model | undefined,
  count: () => number = () => countPromptTokens(body)
): number => {
  const bytes = bodyBytes ?? 0
  let smallest = Infinity
  for (const e of model?.endpoints ?? []) {
    if (e.contextLength !== undefined) smallest = Math.min(smallest, e.contextLength)
  }
  if (bodyBytes !== undefined && bytes / 3 < smallest / 2) return tokensOf(bytes)
  return count()
}

/**
 * The body an attempt's endpoint receives: its model id, and its own `max_tokens` when the plan clamped it (prefer,
 * then clamp: see `RoutePlanner`). Without a cap it is left without one: an adapter whose protocol requires a cap adds
 * the default (`OutputCap.withDefault`), which the limits reserve.
 */
const endpointBody = (body: JsonObject, attempt: Attempt): JsonObject => {
  const out = withField(body, "model", attempt.endpoint.upstreamModel)
  return attempt.maxTokens === undefined ? out : OutputCap.withMaxTokens(out, attempt.maxTokens)
}

/** How the attempts of one request call their upstream. */
export interface AttemptCalls {
  /** The non-streaming answer of an attempt. */
  readonly createMessage: (attempt: Attempt) => Effect.Effect<Message, UpstreamError>
  /** Opens the streamed answer of an attempt in the caller's scope. */
  readonly open: (attempt: Attempt) => Effect.Effect<EventPull, UpstreamError, Scope.Scope>
}

/** The plugins that change the body per endpoint, when the request enabled them. */
export interface BodyTransforms {
  /** file-parser (with its configured parser): PDFs as text for an endpoint that takes no files. */
  readonly parser: DocumentParser.DocumentParserService | undefined
  /** context-compression: a prompt too long for an endpoint's context is cut in its middle. */
  readonly compression: boolean
}

/**
 * The calls of one request's attempts: `forward` with each endpoint's model id, transformed per endpoint by the
 * enabled plugins (which report what they did in `steps`). Without transforms, no Effect is spent on the body, and a
 * `conversation` (of `forward`), when given, is let go once an attempt's text is made (see `Conversation`).
 */
export const attemptCalls = (
  upstream: UpstreamService,
  forward: JsonObject,
  headers: ForwardHeaders,
  needs: Requirements,
  transforms: BodyTransforms,
  steps: Array<PipelineStep>,
  conversation?: Conversation.Conversation
): AttemptCalls => {
  if (transforms.parser === undefined && !transforms.compression) {
    const plainCall = (attempt: Attempt, passThrough: boolean): MessagesCall => ({
      endpoint: attempt.endpoint,
      body: endpointBody(conversation === undefined ? forward : conversation.body(), attempt),
      headers,
      passThrough,
      bodyMade: conversation?.made
    })
    return {
      createMessage: (attempt) => upstream.createMessage(plainCall(attempt, false)),
      open: (attempt) => upstream.streamMessage(plainCall(attempt, true))
    }
  }
  const bodyFor = transformedBody(forward, needs, transforms, steps)
  const call = (attempt: Attempt, passThrough: boolean) =>
    Effect.map(bodyFor(attempt), (body): MessagesCall => ({ endpoint: attempt.endpoint, body, headers, passThrough }))
  return {
    createMessage: (attempt) => Effect.flatMap(call(attempt, false), (c) => upstream.createMessage(c)),
    open: (attempt) => Effect.flatMap(call(attempt, true), (c) => upstream.streamMessage(c))
  }
}

const transformedBody = (
  forward: JsonObject,
  needs: Requirements,
  { compression, parser }: BodyTransforms,
  steps: Array<PipelineStep>
) => {
  let parsed: JsonObject | undefined
  // Parsed once per request, for the first endpoint that needs it.
  const documentsAsText = Effect.suspend(() =>
    parsed !== undefined ?
      Effect.succeed(parsed) :
      DocumentParser.replaceDocuments(forward, (pdf) => parser!.pdfToText(pdf)).pipe(
        Effect.mapError((e) => new UpstreamError({ kind: "unsupported", message: `file-parser: ${e.message}` })),
        Effect.tap((body) => {
          parsed = body
          steps.push({ type: "plugin", name: "file-parser", summary: "PDF documents converted to text" })
        })
      )
  )
  return (attempt: Attempt): Effect.Effect<JsonObject, UpstreamError> => {
    const { endpoint } = attempt
    const parse = parser !== undefined && needs.documents && !(endpoint.inputModalities?.includes("file") ?? true)
    return Effect.flatMap(parse ? documentsAsText : Effect.succeed(forward), (body) => {
      const out = endpointBody(body, attempt)
      return compression
        ? fitToContext(endpoint, out, attempt.maxTokens ?? needs.maxTokens, steps)
        : Effect.succeed(out)
    })
  }
}

/** context-compression: the body cut (middle-out) to the endpoint's context less `max_tokens`, if it must be. */
const fitToContext = (
  endpoint: Endpoint,
  body: JsonObject,
  maxTokens: number | undefined,
  steps: Array<PipelineStep>
): Effect.Effect<JsonObject, UpstreamError> => {
  const context = endpoint.contextLength
  if (context === undefined) return Effect.succeed(body)
  const budget = context - (maxTokens ?? 0)
  if (
    ContextCompression.estimateTokens({ system: body.system, messages: body.messages, tools: body.tools }) <= budget
  ) {
    return Effect.succeed(body)
  }
  const compressed = ContextCompression.middleOut(body, budget)
  if (compressed === undefined) {
    return Effect.fail(
      new UpstreamError({
        kind: "unsupported",
        message: `context-compression: the prompt cannot fit ${endpoint.id}'s context of ${context}`
      })
    )
  }
  steps.push({
    type: "plugin",
    name: "context-compression",
    summary: `middle-out removed ${compressed.removedMessages} message(s) to fit ${endpoint.id}`
  })
  return Effect.succeed(compressed.body)
}
