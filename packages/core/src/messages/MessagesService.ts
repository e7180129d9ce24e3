/**
 * The POST /v1/messages use case: validate, plan the route, run the attempts in order through the
 * Upstream port, and answer either one JSON message or a stream of SSE frames. Fallback happens only
 * before the first content reached the client: lifecycle frames are held back until then. After
 * content has started, a failure becomes an in-band `event: error` and the stream still ends cleanly.
 */
import { Clock, Context, Effect, Either, ExecutionStrategy, Exit, Layer, Option, Scope, Stream } from "effect"
import type { Principal } from "../auth/Keys.js"
import { Catalogue } from "../catalogue/Catalogue.js"
import * as GatewayError from "../errors/GatewayError.js"
import * as Cost from "../pricing/Cost.js"
import type { Attempt, PipelineStep, Requirements } from "../routing/RoutePlanner.js"
import * as RoutePlanner from "../routing/RoutePlanner.js"
import type { ForwardHeaders, MessagesCall } from "../upstream/Upstream.js"
import { isRetryable, toGatewayError, Upstream, UpstreamError } from "../upstream/Upstream.js"
import { UsageLog } from "../usage/UsageLog.js"
import * as MessagesRequest from "./MessagesRequest.js"
import type { JsonObject, Message, StreamEvent, Usage } from "./Wire.js"
import { sseFrame } from "./Wire.js"

/** Who asked, and what the HTTP layer learnt from headers. */
export interface RequestContext {
  readonly requestId: string
  readonly principal: Principal
  /** From the `x-session-id` header; a `session_id` in the body wins. */
  readonly sessionId?: string | undefined
  /** `X-Service-Metadata: enabled` (or a legacy alias) was sent. */
  readonly metadata: boolean
  readonly headers: ForwardHeaders
  readonly app: {
    readonly referer?: string | undefined
    readonly title?: string | undefined
    readonly categories?: string | undefined
  }
}

export type MessagesOutcome =
  | { readonly _tag: "Json"; readonly body: JsonObject }
  | {
    readonly _tag: "Stream"
    /** SSE frames, each to be written as it comes. Running it to its end (or interrupting it) releases the upstream. */
    readonly frames: Stream.Stream<string>
  }

export interface MessagesServiceShape {
  readonly create: (context: RequestContext, body: unknown) => Effect.Effect<MessagesOutcome, GatewayError.GatewayError>
}

/** The messages use case as a service. */
export class MessagesService extends Context.Tag("@model-gateway/core/MessagesService")<
  MessagesService,
  MessagesServiceShape
>() {}

/** Fields only the gateway understands; never sent to a provider. */
const GATEWAY_FIELDS = ["models", "fallbacks", "provider", "plugins", "session_id", "route", "trace", "user"] as const

/** The body an Anthropic-protocol upstream receives: the client's, less gateway fields, `user` mapped to metadata. */
export const forwardBody = (body: JsonObject): JsonObject => {
  const out: JsonObject = { ...body }
  for (const key of GATEWAY_FIELDS) delete out[key]
  if (typeof body.user === "string" && (body.metadata === undefined || body.metadata === null)) {
    out.metadata = { user_id: body.user }
  }
  return out
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

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0)

/** Usage as billed, from Anthropic-convention usage (input excludes cache reads and writes). */
const billed = (usage: Usage | JsonObject | undefined): Cost.BilledUsage => ({
  input: num(usage?.input_tokens),
  output: num(usage?.output_tokens),
  cacheRead: num(usage?.cache_read_input_tokens),
  cacheWrite: num(usage?.cache_creation_input_tokens)
})

const failureStep = (attempt: Attempt, error: UpstreamError, willRetry: boolean): PipelineStep => ({
  type: "attempt",
  name: attempt.endpoint.provider,
  summary: `${attempt.model.id} via ${attempt.endpoint.provider} failed: ${error.kind}${
    error.status === undefined ? "" : ` (${error.status})`
  }: ${error.message}${willRetry ? "; trying the next candidate" : ""}`
})

const successStep = (attempt: Attempt, index: number): PipelineStep => ({
  type: "attempt",
  name: attempt.endpoint.provider,
  summary: `${attempt.model.id} via ${attempt.endpoint.provider} answered${
    index > 0 ? ` (fallback after ${index} failed attempt${index === 1 ? "" : "s"})` : ""
  }`
})

/** The usage object of a result: every field of spec 2.2 present, cost from the endpoint's pricing. */
const completeUsage = (usage: Usage | JsonObject | undefined, cost: string): JsonObject => ({
  ...usage,
  input_tokens: num(usage?.input_tokens),
  output_tokens: num(usage?.output_tokens),
  cache_creation_input_tokens: num(usage?.cache_creation_input_tokens),
  cache_read_input_tokens: num(usage?.cache_read_input_tokens),
  cache_creation: usage?.cache_creation ?? null,
  inference_geo: usage?.inference_geo ?? null,
  output_tokens_details: usage?.output_tokens_details ?? null,
  server_tool_use: usage?.server_tool_use ?? null,
  service_tier: usage?.service_tier ?? null,
  speed: usage?.speed ?? null,
  cost: Number(cost),
  cost_details: usage?.cost_details ?? null,
  is_byok: false
})

const isContent = (event: StreamEvent): boolean => event.type === "content_block_delta" || event.type === "message_stop"

const inBandError = (error: GatewayError.GatewayError, requestId: string): string =>
  sseFrame({
    type: "error",
    error: { type: GatewayError.describe(error).type, message: error.message },
    request_id: requestId
  })

/** Builds the service from its ports. */
export const make = Effect.gen(function*() {
  const catalogue = yield* Catalogue
  const upstream = yield* Upstream
  const usageLog = yield* UsageLog

  const create = (context: RequestContext, raw: unknown) =>
    Effect.gen(function*() {
      const started = yield* Clock.currentTimeMillis
      const decoded = MessagesRequest.validate(raw)
      if (Either.isLeft(decoded)) return yield* Effect.fail(decoded.left)
      const request = decoded.right
      const body = raw as JsonObject
      const snapshot = yield* catalogue.snapshot
      const planned = RoutePlanner.plan({
        model: request.model,
        models: request.models,
        fallbacks: request.fallbacks,
        requirements: requirements(request, body)
      }, snapshot)
      if (Either.isLeft(planned)) return yield* Effect.fail(planned.left)
      const { attempts } = planned.right
      const steps: Array<PipelineStep> = [...planned.right.steps]
      const forward = forwardBody(body)
      const sessionId = request.session_id ?? context.sessionId ?? null
      const call = (attempt: Attempt): MessagesCall => ({
        endpoint: attempt.endpoint,
        body: { ...forward, model: attempt.endpoint.upstreamModel },
        headers: context.headers
      })

      const record = (fields: {
        attempt: Attempt | undefined
        attempts: number
        status: number
        errorType: string | null
        usage: Cost.BilledUsage
        cost: string
        ttfbMs: number | null
        stream: boolean
      }) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          usageLog.record({
            requestId: context.requestId,
            createdAt: started,
            keyId: context.principal.keyId,
            workspace: context.principal.workspace,
            model: fields.attempt?.model.id ?? request.model,
            provider: fields.attempt?.endpoint.provider ?? null,
            endpointId: fields.attempt?.endpoint.id ?? null,
            stream: fields.stream,
            status: fields.status,
            errorType: fields.errorType,
            inputTokens: fields.usage.input,
            outputTokens: fields.usage.output,
            cacheReadTokens: fields.usage.cacheRead,
            cacheWriteTokens: fields.usage.cacheWrite,
            cost: fields.cost,
            latencyMs: now - started,
            ttfbMs: fields.ttfbMs,
            attempts: fields.attempts,
            sessionId,
            user: request.user ?? null,
            appReferer: context.app.referer ?? null,
            appTitle: context.app.title ?? null,
            appCategories: context.app.categories ?? null
          }))

      const recordFailure = (error: GatewayError.GatewayError, tried: number, stream: boolean) =>
        record({
          attempt: undefined,
          attempts: tried,
          status: GatewayError.describe(error).status,
          errorType: GatewayError.describe(error).type,
          usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
          cost: "0",
          ttfbMs: null,
          stream
        })

      const metadata = () => ({ pipeline: steps })

      if (request.stream !== true) {
        let last: UpstreamError | undefined
        for (let i = 0; i < attempts.length; i++) {
          const attempt = attempts[i]
          const result = yield* Effect.either(upstream.createMessage(call(attempt)))
          if (Either.isLeft(result)) {
            last = result.left
            const retry = isRetryable(last) && i < attempts.length - 1
            steps.push(failureStep(attempt, last, retry))
            if (!isRetryable(last)) break
            continue
          }
          steps.push(successStep(attempt, i))
          const message: Message = result.right
          const usage = billed(message.usage)
          const cost = Cost.cost(attempt.endpoint.pricing, usage)
          const now = yield* Clock.currentTimeMillis
          yield* record({
            attempt,
            attempts: i + 1,
            status: 200,
            errorType: null,
            usage,
            cost,
            ttfbMs: now - started,
            stream: false
          })
          const out: JsonObject = {
            ...message,
            model: attempt.model.id,
            stop_details: message.stop_details ?? null,
            container: message.container ?? null,
            usage: completeUsage(message.usage, cost),
            context_management: message.context_management ?? null,
            provider: attempt.endpoint.provider,
            safeguard_results: message.safeguard_results ?? null
          }
          if (context.metadata) out.service_metadata = metadata()
          return { _tag: "Json", body: out } as MessagesOutcome
        }
        const error = toGatewayError(last!)
        yield* recordFailure(error, attempts.length, false)
        return yield* Effect.fail(error)
      }

      // Streaming: the scope lives as long as the returned stream; it owns the committed upstream request.
      const scope = yield* Scope.make()
      return yield* Effect.onExit(
        streamAttempts(upstream, attempts, call, steps, scope),
        (exit) => (Exit.isSuccess(exit) ? Effect.void : Scope.close(scope, exit))
      ).pipe(
        Effect.flatMap((committed) =>
          Effect.gen(function*() {
            if (committed._tag === "Failed") {
              yield* recordFailure(committed.error, attempts.length, true)
              return yield* Effect.fail(committed.error)
            }
            const { attempt, index, held, rest, firstContentAt } = committed
            const modelId = attempt.model.id
            let usage: JsonObject = {}
            let sawStop = false
            let errorType: string | null = null
            const currentCost = () => Cost.cost(attempt.endpoint.pricing, billed(usage))
            const decorate = (event: StreamEvent): string => {
              switch (event.type) {
                case "message_start": {
                  const message = (event.message ?? {}) as JsonObject
                  usage = { ...(message.usage as JsonObject | undefined) }
                  const out: JsonObject = {
                    ...message,
                    model: modelId,
                    provider: attempt.endpoint.provider,
                    usage: completeUsage(usage, currentCost())
                  }
                  if (context.metadata) out.service_metadata = metadata()
                  return sseFrame({ ...event, message: out })
                }
                case "message_delta": {
                  const delta = event.usage as JsonObject | undefined
                  if (delta !== undefined) {
                    for (const [key, value] of Object.entries(delta)) if (value !== null) usage[key] = value
                  }
                  return sseFrame({
                    ...event,
                    usage: { ...delta, output_tokens: num(usage.output_tokens), cost: Number(currentCost()) }
                  })
                }
                case "message_stop":
                  sawStop = true
                  return sseFrame(event)
                default:
                  return sseFrame(event)
              }
            }
            steps.push(successStep(attempt, index))
            yield* Scope.addFinalizer(
              scope,
              Effect.suspend(() =>
                record({
                  attempt,
                  attempts: index + 1,
                  status: 200,
                  errorType,
                  usage: billed(usage),
                  cost: currentCost(),
                  ttfbMs: firstContentAt - started,
                  stream: true
                })
              )
            )
            const frames = Stream.concat(Stream.fromIterable(held), rest).pipe(
              Stream.map(decorate),
              Stream.catchAll((error) => {
                const mapped = toGatewayError(error)
                errorType = GatewayError.describe(mapped).type
                return Stream.succeed(inBandError(mapped, context.requestId))
              }),
              Stream.concat(Stream.suspend(() => {
                if (sawStop || errorType !== null) return Stream.empty
                errorType = "api_error"
                return Stream.succeed(
                  inBandError(
                    new GatewayError.InternalError({ message: "upstream stream ended before message_stop" }),
                    context.requestId
                  )
                )
              })),
              Stream.ensuring(Scope.close(scope, Exit.void))
            )
            return { _tag: "Stream", frames } as MessagesOutcome
          })
        )
      )
    })

  return MessagesService.of({ create })
})

type Committed =
  | {
    readonly _tag: "Committed"
    readonly attempt: Attempt
    readonly index: number
    readonly held: ReadonlyArray<StreamEvent>
    readonly rest: Stream.Stream<StreamEvent, UpstreamError>
    readonly firstContentAt: number
  }
  | { readonly _tag: "Failed"; readonly error: GatewayError.GatewayError }

/**
 * Opens attempts in order until one produces content. Events before the first content are held;
 * a retryable failure before content moves on to the next attempt, closing the failed one.
 */
const streamAttempts = (
  upstream: Upstream["Type"],
  attempts: ReadonlyArray<Attempt>,
  call: (attempt: Attempt) => MessagesCall,
  steps: Array<PipelineStep>,
  scope: Scope.CloseableScope
) =>
  Effect.gen(function*() {
    let last: UpstreamError | undefined
    for (let i = 0; i < attempts.length; i++) {
      const attempt = attempts[i]
      const child = yield* Scope.fork(scope, ExecutionStrategy.sequential)
      const pull = yield* Scope.extend(Stream.toPull(upstream.streamMessage(call(attempt))), child)
      const held: Array<StreamEvent> = []
      let outcome: "content" | "done" | UpstreamError | undefined
      while (outcome === undefined) {
        const chunk = yield* Effect.either(pull)
        if (Either.isLeft(chunk)) {
          outcome = Option.isNone(chunk.left)
            ? (held.some((e) => e.type === "message_stop")
              ? "done"
              : new UpstreamError({ kind: "transport", message: "upstream stream ended before any content" }))
            : chunk.left.value
          break
        }
        for (const event of chunk.right) {
          held.push(event)
          if (isContent(event)) outcome = "content"
        }
      }
      if (outcome === "content" || outcome === "done") {
        const firstContentAt = yield* Clock.currentTimeMillis
        return {
          _tag: "Committed",
          attempt,
          index: i,
          held,
          rest: outcome === "done" ? Stream.empty : Stream.repeatEffectChunkOption(pull),
          firstContentAt
        } as Committed
      }
      last = outcome
      yield* Scope.close(child, Exit.void)
      const retry = isRetryable(last) && i < attempts.length - 1
      steps.push(failureStep(attempt, last, retry))
      if (!isRetryable(last)) break
    }
    return { _tag: "Failed", error: toGatewayError(last!) } as Committed
  })

/** The service, given Catalogue, Upstream and UsageLog. */
export const layer = Layer.effect(MessagesService, make)
