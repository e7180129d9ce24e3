/**
 * The POST /v1/messages use case: validate, plan the route, run the attempts in order through the
 * Upstream port, and answer either one JSON message or a stream of SSE frames. Fallback happens only
 * before the first content reached the client: lifecycle frames are held back until then. After
 * content has started, a failure becomes an in-band `event: error` and the stream still ends cleanly.
 */
import {
  Channel,
  Chunk,
  Clock,
  Context,
  Effect,
  Either,
  ExecutionStrategy,
  Exit,
  Layer,
  Option,
  Random,
  Scope,
  Stream
} from "effect"
import type { Principal } from "../auth/Keys.js"
import type { CatalogueSnapshot, Model } from "../catalogue/Catalogue.js"
import { Catalogue } from "../catalogue/Catalogue.js"
import * as GatewayError from "../errors/GatewayError.js"
import * as EndpointStats from "../health/EndpointStats.js"
import * as AutoRouter from "../plugins/AutoRouter.js"
import * as ContextCompression from "../plugins/ContextCompression.js"
import * as DocumentParser from "../plugins/DocumentParser.js"
import * as Moderation from "../plugins/Moderation.js"
import * as ParetoRouter from "../plugins/ParetoRouter.js"
import * as ResponseHealer from "../plugins/ResponseHealer.js"
import * as SwitchyardRouter from "../plugins/SwitchyardRouter.js"
import * as TaskClassifier from "../plugins/TaskClassifier.js"
import * as WebSearch from "../plugins/WebSearch.js"
import * as Cost from "../pricing/Cost.js"
import type { Attempt, PipelineStep, Requirements } from "../routing/RoutePlanner.js"
import * as RoutePlanner from "../routing/RoutePlanner.js"
import * as SessionAffinity from "../sessions/SessionAffinity.js"
import type { ForwardHeaders, MessagesCall } from "../upstream/Upstream.js"
import { type EventPull, isRetryable, toGatewayError, Upstream, UpstreamError } from "../upstream/Upstream.js"
import { UsageLog } from "../usage/UsageLog.js"
import * as MessagesRequest from "./MessagesRequest.js"
import type { JsonObject, Message, StreamEvent, Usage } from "./Wire.js"
import { sseFrame, withField } from "./Wire.js"

/** Who asked, and what the HTTP layer learnt from headers. */
export interface RequestContext {
  readonly requestId: string
  readonly principal: Principal
  /** From the `x-session-id` header; a `session_id` in the body wins. */
  readonly sessionId?: string | undefined
  /** `X-Service-Metadata: enabled` (or a legacy alias) was sent. */
  readonly metadata: boolean
  readonly headers: ForwardHeaders
  /** Size of the raw body, for a cheap prompt-size bound. */
  readonly bodyBytes?: number | undefined
  readonly app: {
    readonly referer?: string | undefined
    readonly title?: string | undefined
    readonly categories?: string | undefined
  }
}

/**
 * SSE frames being written: each pull gives the next frames (those of one upstream read, say; maybe none), or
 * `undefined` at the end, after which it is not pulled again. It never fails: a failure after content is an in-band
 * `event: error` frame.
 */
export type FramePull = Effect.Effect<Chunk.Chunk<string> | undefined>

export type MessagesOutcome =
  | { readonly _tag: "Json"; readonly body: JsonObject }
  | {
    readonly _tag: "Stream"
    /**
     * Opens the frames in the caller's scope. Closing the scope releases the upstream request (aborting it if it is
     * still running) and records the usage. The fastest way to write them: a loop of pulls.
     */
    readonly open: Effect.Effect<FramePull, never, Scope.Scope>
    /** The same frames as a `Stream`, for bindings that take one. Use `open` or `frames`, once. */
    readonly frames: Stream.Stream<string>
  }

/** The frames of `open` as a `Stream`: a channel that loops over the pulls. */
export const framesOf = (open: Effect.Effect<FramePull, never, Scope.Scope>): Stream.Stream<string> =>
  Stream.unwrapScoped(Effect.map(open, (pull) => {
    const loop: Channel.Channel<Chunk.Chunk<string>> = Channel.flatMap(
      Channel.fromEffect(pull),
      (frames) => frames === undefined ? Channel.void : Channel.zipRight(Channel.write(frames), loop)
    )
    return Stream.fromChannel(loop)
  }))

export interface MessagesServiceShape {
  readonly create: (context: RequestContext, body: unknown) => Effect.Effect<MessagesOutcome, GatewayError.GatewayError>
}

/** The messages use case as a service. */
export class MessagesService extends Context.Tag("@model-gateway/core/MessagesService")<
  MessagesService,
  MessagesServiceShape
>() {}

/** Fields only the gateway understands; never sent to a provider. */
const GATEWAY_FIELDS = new Set(["models", "fallbacks", "provider", "plugins", "session_id", "route", "trace", "user"])

/** The body an Anthropic-protocol upstream receives: the client's, less gateway fields, `user` mapped to metadata. */
export const forwardBody = (body: JsonObject): JsonObject => {
  // Copied key by key rather than spread and `delete`d: a `delete` turns the object into a slow dictionary.
  const out: JsonObject = {}
  for (const key of Object.keys(body)) {
    if (GATEWAY_FIELDS.has(key)) continue
    // An own `__proto__` key (JSON.parse makes one) stays a plain field, as a spread would keep it.
    if (key === "__proto__") {
      Object.defineProperty(out, key, { value: body[key], enumerable: true, writable: true, configurable: true })
    } else out[key] = body[key]
  }
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
const completeUsage = (usage: Usage | JsonObject | undefined, cost: string): JsonObject =>
  // Object.assign rather than a spread: adding keys to a spread copy is slow on V8 (see docs/benchmarks.md)
  Object.assign({}, usage, {
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

/** Options of the messages use case, from configuration. */
export interface MessagesOptions {
  /** The model slug that selects the auto-router (`auto` by default). */
  readonly routerSlug?: string | undefined
  /** The fusion plugin's default panel and presets. */
  readonly fusion?: {
    readonly panel?: ReadonlyArray<string> | undefined
    readonly presets?: Partial<Record<"general-high" | "general-budget" | "general-fast", ReadonlyArray<string>>>
  } | undefined
}

type Plugins = Partial<{ [K in MessagesRequest.Plugin["id"]]: Extract<MessagesRequest.Plugin, { id: K }> }>

/** The enabled plugins of a request by id, with each one's index in `plugins` for error paths. */
const enabledPlugins = (request: MessagesRequest.MessagesRequest) => {
  const plugins: Record<string, unknown> = {}
  const index: Record<string, number> = {}
  request.plugins?.forEach((plugin, i) => {
    if ((plugin as { enabled?: boolean }).enabled === false) return
    plugins[plugin.id] = plugin
    index[plugin.id] = i
  })
  return { plugins: plugins as Plugins, index }
}

const outcomeOf = (error: UpstreamError): EndpointStats.AttemptOutcome | undefined => {
  switch (error.kind) {
    case "rate_limited":
      return "rate_limited"
    case "overloaded":
      return "overloaded"
    case "timeout":
      return "timeout"
    case "invalid_request":
    case "unsupported":
      return undefined
    default:
      return "error"
  }
}

const zeroUsage: Cost.BilledUsage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }

const addUsage = (a: Cost.BilledUsage, b: Cost.BilledUsage): Cost.BilledUsage => ({
  input: a.input + b.input,
  output: a.output + b.output,
  cacheRead: a.cacheRead + b.cacheRead,
  cacheWrite: a.cacheWrite + b.cacheWrite
})

/** Text of a message's text blocks. */
const textOfMessage = (message: Message): string =>
  message.content.filter((b) => b.type === "text").map((b) => String(b.text ?? "")).join("")

const appendSystem = (body: JsonObject, text: string): JsonObject => {
  const system = body.system
  if (system === undefined || system === null || system === "") return { ...body, system: text }
  if (typeof system === "string") return { ...body, system: `${system}\n\n${text}` }
  if (Array.isArray(system)) return { ...body, system: [...system, { type: "text", text }] }
  return { ...body, system: text }
}

/** Builds the service from its ports; plugin ports are optional. */
export const make = (options: MessagesOptions = {}) =>
  Effect.gen(function*() {
    const catalogue = yield* Catalogue
    const upstream = yield* Upstream
    const usageLog = yield* UsageLog
    const stats = yield* EndpointStats.EndpointStats
    const affinity = yield* SessionAffinity.SessionAffinity
    const classifier = Option.getOrElse(yield* Effect.serviceOption(TaskClassifier.TaskClassifier), () =>
      TaskClassifier.keywords)
    const switchyard = Option.getOrElse(
      yield* Effect.serviceOption(SwitchyardRouter.SwitchyardPolicy),
      () =>
        SwitchyardRouter.fromRules([])
    )
    const healer = yield* Effect.serviceOption(ResponseHealer.ResponseHealer)
    const parser = yield* Effect.serviceOption(DocumentParser.DocumentParser)
    const moderation = yield* Effect.serviceOption(Moderation.Moderation)
    const webSearch = yield* Effect.serviceOption(WebSearch.WebSearch)
    const routerSlug = options.routerSlug ?? "auto"

    // Times come from the request's clock, read synchronously: one `Clock` look-up per request rather than an Effect
    // per reading (a test clock is honoured all the same).
    const recordAttempt = (endpointId: string, startedAt: number, now: number, fields: {
      outcome: EndpointStats.AttemptOutcome | undefined
      ttfbMs: number | null
      outputTokens: number
      retryAfterMs?: number | undefined
    }) =>
      fields.outcome === undefined ? Effect.void : stats.record({
        endpointId,
        at: now,
        ttfbMs: fields.ttfbMs,
        latencyMs: now - startedAt,
        outputTokens: fields.outputTokens,
        outcome: fields.outcome,
        retryAfterMs: fields.retryAfterMs
      })

    const recordFailedAttempt = (attempt: Attempt, startedAt: number, now: number, error: UpstreamError) =>
      recordAttempt(attempt.endpoint.id, startedAt, now, {
        outcome: outcomeOf(error),
        ttfbMs: null,
        outputTokens: 0,
        retryAfterMs: error.retryAfterMs
      })

    /** Everything one execution needs; fusion runs several. */
    interface Run {
      readonly context: RequestContext
      readonly request: MessagesRequest.MessagesRequest
      readonly body: JsonObject
      readonly modelId: string
      readonly plugins: Plugins
      readonly steps: Array<PipelineStep>
      readonly stream: boolean
      readonly started: number
      /** The request's clock: every time of the request is read from it. */
      readonly clock: Clock.Clock
      /** Usage and cost of earlier sub-requests (fusion analyses), added to this answer's. */
      readonly extra?: { readonly usage: Cost.BilledUsage; readonly cost: string } | undefined
      /** False for fusion analyses: recorded once, with the final answer. */
      readonly recordUsage: boolean
      /** The catalogue as the request saw it when it started. */
      readonly snapshot: CatalogueSnapshot
    }

    interface ExecutionResult {
      readonly outcome: MessagesOutcome
      readonly message: Message | undefined
      readonly usage: { readonly usage: Cost.BilledUsage; readonly cost: string } | undefined
    }

    /**
     * Plans the route (health, session, a random draw), then runs the attempts. A chain of Effects rather than one
     * `Effect.gen`: this is the hot path of every request, and each generator step costs more than the work it does.
     */
    const execute = (run: Run): Effect.Effect<ExecutionResult, GatewayError.GatewayError> => {
      const { request } = run
      const sessionId = request.session_id ?? run.context.sessionId
      const key = sessionId === undefined
        ? undefined
        : SessionAffinity.affinityKey(run.context.principal.workspace, sessionId, run.modelId)
      return Effect.flatMap(stats.snapshot, (health) =>
        key === undefined
          ? planned(run, health, sessionId, undefined, undefined)
          : Effect.flatMap(
            affinity.get(key),
            (sticky) => planned(run, health, sessionId, key, Option.getOrUndefined(sticky))
          ))
    }

    const planned = (
      run: Run,
      health: EndpointStats.HealthSnapshot,
      sessionId: string | undefined,
      key: string | undefined,
      sticky: string | undefined
    ): Effect.Effect<ExecutionResult, GatewayError.GatewayError> =>
      Effect.flatMap(Random.nextInt, (seed) => {
        const { body, context, plugins, request, snapshot, steps } = run
        const model = snapshot.models.get(run.modelId)
        const fileParser = plugins["file-parser"] !== undefined && Option.isSome(parser)
        const compression = plugins["context-compression"] !== undefined
        const needs = requirements(request, body)
        const estimate = estimatePromptTokens(body, context.bodyBytes, model)
        const plan = RoutePlanner.plan(
          {
            model: run.modelId,
            models: request.models,
            fallbacks: request.fallbacks,
            provider: RoutePlanner.effectivePreferences(request.provider, request.route),
            requirements: {
              tools: needs.tools,
              images: needs.images,
              maxTokens: needs.maxTokens,
              documents: needs.documents && !fileParser,
              parameters: RoutePlanner.usedParameters(body),
              estimatedPromptTokens: compression ? undefined : estimate
            }
          },
          snapshot,
          {
            health,
            session: key === undefined ? undefined : { key, endpointId: sticky },
            random: RoutePlanner.seededRandom(seed),
            now: run.clock.unsafeCurrentTimeMillis()
          }
        )
        if (Either.isLeft(plan)) return Effect.fail(plan.left)
        const { attempts } = plan.right
        steps.push(...plan.right.steps)
        const forward = forwardBody(body)
        const clock = run.clock

        let parsedDocuments: JsonObject | undefined
        const transforms = fileParser || compression
        const bodyFor = (attempt: Attempt): Effect.Effect<JsonObject, UpstreamError> =>
          Effect.gen(function*() {
            let out: JsonObject = withField(forward, "model", attempt.endpoint.upstreamModel)
            if (fileParser && needs.documents && !(attempt.endpoint.inputModalities?.includes("file") ?? true)) {
              if (parsedDocuments === undefined) {
                parsedDocuments = yield* DocumentParser.replaceDocuments(forward, (b64) =>
                  (parser as Option.Some<DocumentParser.DocumentParserService>).value.pdfToText(b64)).pipe(
                    Effect.mapError((e) =>
                      new UpstreamError({ kind: "unsupported", message: `file-parser: ${e.message}` })
                    )
                  )
                steps.push({ type: "plugin", name: "file-parser", summary: "PDF documents converted to text" })
              }
              out = withField(parsedDocuments, "model", attempt.endpoint.upstreamModel)
            }
            const context = attempt.endpoint.contextLength
            if (compression && context !== undefined) {
              const budget = context - (needs.maxTokens ?? 0)
              if (
                ContextCompression.estimateTokens({ system: out.system, messages: out.messages, tools: out.tools }) >
                  budget
              ) {
                const compressed = ContextCompression.middleOut(out, budget)
                if (compressed === undefined) {
                  return yield* Effect.fail(
                    new UpstreamError({
                      kind: "unsupported",
                      message:
                        `context-compression: the prompt cannot fit ${attempt.endpoint.id}'s context of ${context}`
                    })
                  )
                }
                steps.push({
                  type: "plugin",
                  name: "context-compression",
                  summary: `middle-out removed ${compressed.removedMessages} message(s) to fit ${attempt.endpoint.id}`
                })
                out = compressed.body
              }
            }
            return out
          })

        const callOf = (attempt: Attempt, callBody: JsonObject): MessagesCall => ({
          endpoint: attempt.endpoint,
          body: callBody,
          headers: context.headers
        })
        const plainCall = (attempt: Attempt): MessagesCall =>
          callOf(attempt, withField(forward, "model", attempt.endpoint.upstreamModel))
        const call = (attempt: Attempt): Effect.Effect<MessagesCall, UpstreamError> =>
          transforms
            ? Effect.map(bodyFor(attempt), (callBody) => callOf(attempt, callBody))
            : Effect.succeed(plainCall(attempt))
        const createMessage = (attempt: Attempt): Effect.Effect<Message, UpstreamError> =>
          transforms
            ? Effect.flatMap(call(attempt), upstream.createMessage)
            : upstream.createMessage(plainCall(attempt))

        const record = (fields: {
          attempt: Attempt | undefined
          attempts: number
          status: number
          errorType: string | null
          usage: Cost.BilledUsage
          cost: string
          ttfbMs: number | null
        }) =>
          run.recordUsage
            ? usageLog.record({
              requestId: context.requestId,
              createdAt: run.started,
              keyId: context.principal.keyId,
              workspace: context.principal.workspace,
              model: fields.attempt?.model.id ?? run.modelId,
              provider: fields.attempt?.endpoint.provider ?? null,
              endpointId: fields.attempt?.endpoint.id ?? null,
              stream: run.stream,
              status: fields.status,
              errorType: fields.errorType,
              inputTokens: fields.usage.input,
              outputTokens: fields.usage.output,
              cacheReadTokens: fields.usage.cacheRead,
              cacheWriteTokens: fields.usage.cacheWrite,
              cost: fields.cost,
              latencyMs: clock.unsafeCurrentTimeMillis() - run.started,
              ttfbMs: fields.ttfbMs,
              attempts: fields.attempts,
              sessionId: sessionId ?? null,
              user: request.user ?? null,
              appReferer: context.app.referer ?? null,
              appTitle: context.app.title ?? null,
              appCategories: context.app.categories ?? null
            })
            : Effect.void

        const fail = (error: GatewayError.GatewayError, tried: number) =>
          Effect.zipRight(
            record({
              attempt: undefined,
              attempts: tried,
              status: GatewayError.describe(error).status,
              errorType: GatewayError.describe(error).type,
              usage: run.extra?.usage ?? zeroUsage,
              cost: run.extra?.cost ?? "0",
              ttfbMs: null
            }),
            Effect.fail(error)
          )

        const total = (attempt: Attempt, usage: Cost.BilledUsage) => {
          const own = Cost.cost(attempt.endpoint.pricing, usage)
          return run.extra === undefined
            ? { usage, cost: own }
            : { usage: addUsage(usage, run.extra.usage), cost: Cost.sumDecimals([own, run.extra.cost]) }
        }

        /** The usage shown to the client: with fusion, the token counts summed with the analyses'. */
        const shownUsage = (usage: Usage | JsonObject | undefined, sum: Cost.BilledUsage) =>
          run.extra === undefined ? usage : Object.assign({}, usage, {
            input_tokens: sum.input,
            output_tokens: sum.output,
            cache_read_input_tokens: sum.cacheRead,
            cache_creation_input_tokens: sum.cacheWrite
          })

        const metadata = () => ({ pipeline: steps })

        if (!run.stream) {
          /** The answer of attempt `i`, which succeeded: statistics, session, healing, usage, then the JSON body. */
          const answered = (
            attempt: Attempt,
            i: number,
            attemptStart: number,
            upstreamMessage: Message
          ): Effect.Effect<ExecutionResult> => {
            steps.push(successStep(attempt, i))
            const usage = billed(upstreamMessage.usage)
            const end = clock.unsafeCurrentTimeMillis()
            const respond = (message: Message): Effect.Effect<ExecutionResult> => {
              const sum = total(attempt, usage)
              const out: JsonObject = Object.assign({}, message, {
                model: attempt.model.id,
                stop_details: message.stop_details ?? null,
                container: message.container ?? null,
                usage: completeUsage(shownUsage(message.usage, sum.usage), sum.cost),
                context_management: message.context_management ?? null,
                provider: attempt.endpoint.provider,
                safeguard_results: message.safeguard_results ?? null
              })
              if (context.metadata) {
                out.service_metadata = metadata()
              }
              const result: ExecutionResult = { outcome: { _tag: "Json", body: out }, message, usage: sum }
              return Effect.as(
                record({
                  attempt,
                  attempts: i + 1,
                  status: 200,
                  errorType: null,
                  usage: sum.usage,
                  cost: sum.cost,
                  ttfbMs: end - run.started
                }),
                result
              )
            }
            const recorded = recordAttempt(attempt.endpoint.id, attemptStart, end, {
              outcome: "ok",
              ttfbMs: end - attemptStart,
              outputTokens: usage.output
            })
            const remembered = key === undefined
              ? recorded
              : Effect.zipRight(recorded, affinity.set(key, attempt.endpoint.id))
            return Effect.flatMap(
              remembered,
              () =>
                plugins["response-healing"] === undefined
                  ? respond(upstreamMessage)
                  : Effect.flatMap(heal(upstreamMessage, request, plugins, steps), respond)
            )
          }
          /** Attempts in order; the next one only after a retryable failure. */
          const attempt = (i: number): Effect.Effect<ExecutionResult, GatewayError.GatewayError> => {
            const current = attempts[i]
            const attemptStart = clock.unsafeCurrentTimeMillis()
            return Effect.matchEffect(createMessage(current), {
              onFailure: (error) => {
                const retryable = isRetryable(error)
                const next = retryable && i < attempts.length - 1
                steps.push(failureStep(current, error, next))
                return Effect.zipRight(
                  recordFailedAttempt(current, attemptStart, clock.unsafeCurrentTimeMillis(), error),
                  next ? attempt(i + 1) : fail(toGatewayError(error), attempts.length)
                )
              },
              onSuccess: (message) => answered(current, i, attemptStart, message)
            })
          }
          return attempt(0)
        }

        return Effect.gen(function*() {
          // Streaming: the scope lives as long as the returned stream; it owns the committed upstream request.
          const scope = yield* Scope.make()
          const committed = yield* Effect.onExit(
            streamAttempts(
              upstream,
              attempts,
              call,
              steps,
              scope,
              (attempt, startedAt, error) =>
                recordFailedAttempt(attempt, startedAt, clock.unsafeCurrentTimeMillis(), error),
              clock
            ),
            (exit) => (Exit.isSuccess(exit) ? Effect.void : Scope.close(scope, exit))
          )
          if (committed._tag === "Failed") {
            yield* Scope.close(scope, Exit.void)
            return yield* fail(committed.error, attempts.length)
          }
          const { attempt, attemptStart, done, firstContentAt, held, index, pull } = committed
          if (key !== undefined) {
            yield* affinity.set(key, attempt.endpoint.id)
          }
          const modelId = attempt.model.id
          let usage: JsonObject = {}
          let sawStop = false
          let errorType: string | null = null
          let failure: UpstreamError | undefined
          const current = () => total(attempt, billed(usage))
          const decorate = (event: StreamEvent): string => {
            switch (event.type) {
              case "message_start": {
                const message = (event.message ?? {}) as JsonObject
                usage = { ...(message.usage as JsonObject | undefined) }
                const sum = current()
                const out: JsonObject = Object.assign({}, message, {
                  model: modelId,
                  provider: attempt.endpoint.provider,
                  usage: completeUsage(shownUsage(usage, sum.usage), sum.cost)
                })
                if (context.metadata) {
                  out.service_metadata = metadata()
                }
                return sseFrame({ ...event, message: out })
              }
              case "message_delta": {
                const delta = event.usage as JsonObject | undefined
                if (delta !== undefined) {
                  for (const [k, value] of Object.entries(delta)) {
                    if (value !== null) {
                      usage[k] = value
                    }
                  }
                }
                const sum = current()
                const shown: JsonObject = Object.assign({}, delta, {
                  output_tokens: sum.usage.output,
                  cost: Number(sum.cost)
                })
                if (run.extra !== undefined) {
                  if (typeof delta?.input_tokens === "number") {
                    shown.input_tokens = sum.usage.input
                  }
                  if (typeof delta?.cache_read_input_tokens === "number") {
                    shown.cache_read_input_tokens = sum.usage.cacheRead
                  }
                  if (typeof delta?.cache_creation_input_tokens === "number") {
                    shown.cache_creation_input_tokens = sum.usage.cacheWrite
                  }
                }
                return sseFrame({ ...event, usage: shown })
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
            Effect.suspend(() => {
              const sum = current()
              return Effect.zipRight(
                recordAttempt(attempt.endpoint.id, attemptStart, clock.unsafeCurrentTimeMillis(), {
                  outcome: failure === undefined ? (sawStop ? "ok" : undefined) : outcomeOf(failure),
                  ttfbMs: firstContentAt - attemptStart,
                  outputTokens: sum.usage.output
                }),
                record({
                  attempt,
                  attempts: index + 1,
                  status: 200,
                  errorType,
                  usage: sum.usage,
                  cost: sum.cost,
                  ttfbMs: firstContentAt - run.started
                })
              )
            })
          )
          /** The failure of the committed attempt after content: an in-band error frame, then the end. */
          const failed = (error: UpstreamError): Chunk.Chunk<string> => {
            failure = error
            const mapped = toGatewayError(error)
            errorType = GatewayError.describe(mapped).type
            return Chunk.of(inBandError(mapped, context.requestId))
          }
          /** The end of the upstream stream: never a silently truncated answer. */
          const ended = (): Chunk.Chunk<string> => {
            if (sawStop || errorType !== null) return Chunk.empty()
            errorType = "api_error"
            return Chunk.of(inBandError(
              new GatewayError.InternalError({ message: "upstream stream ended before message_stop" }),
              context.requestId
            ))
          }
          // A plain loop of pulls: the held events first, then each upstream chunk decorated as it comes, then the end
          // check. No Stream stages in between: each would cost every chunk a channel's machinery.
          let state: "held" | "upstream" | "end" | "over" = "held"
          const next = Effect.match(pull, {
            onFailure: (error) => {
              state = "over"
              return failed(error)
            },
            onSuccess: (chunk) => {
              if (chunk !== undefined) return Chunk.map(chunk, decorate)
              state = "over"
              return ended()
            }
          })
          const framePull: FramePull = Effect.suspend(() => {
            switch (state) {
              case "held":
                state = done ? "end" : "upstream"
                return Effect.succeed(Chunk.map(Chunk.unsafeFromArray(held), decorate))
              case "upstream":
                return next
              case "end":
                state = "over"
                return Effect.succeed(ended())
              case "over":
                return Effect.succeed(undefined)
            }
          })
          const open = Effect.as(Effect.addFinalizer(() => Scope.close(scope, Exit.void)), framePull)
          const frames = framesOf(open)
          return { outcome: { _tag: "Stream", open, frames } as MessagesOutcome, message: undefined, usage: undefined }
        })
      })

    /** response-healing: repairs and validates a JSON answer when the request asked for a json_schema format. */
    const heal = (
      message: Message,
      request: MessagesRequest.MessagesRequest,
      plugins: Plugins,
      steps: Array<PipelineStep>
    ): Effect.Effect<Message> => {
      const format = request.output_config?.format
      if (plugins["response-healing"] === undefined || format === undefined || format === null) {
        return Effect.succeed(message)
      }
      if (Option.isNone(healer)) {
        steps.push({ type: "plugin", name: "response-healing", summary: "no response healer is configured; skipped" })
        return Effect.succeed(message)
      }
      return healer.value.heal(textOfMessage(message), format.schema).pipe(
        Effect.map((healed) => {
          steps.push({
            type: "plugin",
            name: "response-healing",
            summary: healed.repaired ? "repaired the JSON answer; it matches the schema" : "the JSON answer was valid"
          })
          if (!healed.repaired) {
            return message
          }
          // the healed text replaces the first text block, in its place (thinking blocks stay first)
          const first = message.content.findIndex((b) => b.type === "text")
          return {
            ...message,
            content: message.content.flatMap((b, i) =>
              i === first ?
                [{ type: "text", text: JSON.stringify(healed.value), citations: null }] :
                b.type === "text" ?
                [] :
                [b]
            )
          }
        }),
        Effect.catchAll((e) => {
          steps.push({ type: "plugin", name: "response-healing", summary: `could not repair the answer: ${e.message}` })
          return Effect.succeed(message)
        })
      )
    }

    /** Guardrails and web plugins that act on the input before routing. */
    // Called only when `needsPreflight(plugins)`.
    const preflight = (body: JsonObject, plugins: Plugins, steps: Array<PipelineStep>) =>
      Effect.gen(function*() {
        if (plugins.moderation !== undefined) {
          if (Option.isNone(moderation)) {
            return yield* Effect.fail(
              new GatewayError.InvalidRequest({
                message: "the moderation plugin was requested but no moderation provider is configured",
                param: "plugins"
              })
            )
          }
          const result = yield* moderation.value.check(Moderation.moderationInput(body)).pipe(
            Effect.mapError((e) => new GatewayError.Unavailable({ message: `moderation unavailable: ${e.message}` }))
          )
          steps.push(Moderation.guardrailStep(result))
          if (result.flagged) {
            const denied = Moderation.blocked(result)
            return yield* Effect.fail(new GatewayError.PermissionDenied({ message: denied.message, pipeline: steps }))
          }
        }
        for (const id of ["web", "web-fetch"] as const) {
          if (plugins[id] === undefined) continue
          if (Option.isNone(webSearch)) return yield* Effect.fail(WebSearch.notConfigured(id))
        }
        let out = body
        const compression = plugins["context-compression"]
        if (compression?.engine !== undefined && !ContextCompression.engines.includes(compression.engine as never)) {
          return yield* Effect.fail(
            new GatewayError.InvalidRequest({
              message: `context-compression: unknown engine '${compression.engine}' (known: ${
                ContextCompression.engines.join(", ")
              })`,
              param: "plugins"
            })
          )
        }
        if (Option.isNone(webSearch)) return out
        const search = webSearch.value
        const userText = TaskClassifier.latestUserText(body.messages)
        if (plugins.web !== undefined) {
          const query = userText.slice(0, 400)
          const results = yield* search.search(query, { maxResults: 5 }).pipe(
            Effect.catchAll((e) => {
              steps.push({ type: "plugin", name: "web", summary: `search failed: ${e.message}` })
              return Effect.succeed([] as ReadonlyArray<WebSearch.SearchResult>)
            })
          )
          if (results.length > 0) {
            steps.push({
              type: "plugin",
              name: "web",
              summary: `${results.length} search result(s) added to the prompt`
            })
            out = appendSystem(
              out,
              `Web search results for "${query}":\n${
                results.map((r, i) => `[${i + 1}] ${r.title} (${r.url})\n${r.snippet}`).join("\n\n")
              }`
            )
          }
        }
        if (plugins["web-fetch"] !== undefined) {
          const urls = [...new Set(userText.match(/https?:\/\/[^\s<>"')\]]+/g) ?? [])].slice(0, 3)
          const pages = yield* Effect.forEach(urls, (url) =>
            search.fetch(url).pipe(
              Effect.map((page) => [page]),
              Effect.catchAll((e) => {
                steps.push({ type: "plugin", name: "web-fetch", summary: `fetching ${url} failed: ${e.message}` })
                return Effect.succeed([] as Array<WebSearch.FetchedPage>)
              })
            ), { concurrency: 3 })
          for (const page of pages.flat()) {
            steps.push({ type: "plugin", name: "web-fetch", summary: `fetched ${page.url} into the prompt` })
            out = appendSystem(out, `Content of ${page.url} (${page.title}):\n${page.text.slice(0, 100_000)}`)
          }
        }
        return out
      })

    /** Chooses the model when a router plugin (or the router slug) is in play. */
    const chooseModel = (
      request: MessagesRequest.MessagesRequest,
      body: JsonObject,
      plugins: Plugins,
      index: Record<string, number>,
      steps: Array<PipelineStep>,
      snapshot: CatalogueSnapshot
    ): Either.Either<string, GatewayError.InvalidRequest | GatewayError.Unavailable> => {
      const auto = plugins["auto-router"] ?? plugins["auto-beta-router"]
      let choice: Either.Either<{ modelId: string; steps: ReadonlyArray<PipelineStep> }, any> | undefined
      if (auto !== undefined || request.model === routerSlug) {
        choice = AutoRouter.choose({
          plugin: auto ?? { id: "auto-router" },
          messages: body.messages,
          system: body.system,
          catalogue: snapshot,
          classifier,
          routerSlug,
          param: auto === undefined ? "plugins" : `plugins[${index[auto.id]}]`
        })
      } else if (plugins["pareto-router"] !== undefined) {
        choice = ParetoRouter.choose({
          plugin: plugins["pareto-router"],
          messages: body.messages,
          system: body.system,
          catalogue: snapshot,
          classifier,
          routerSlug
        })
      } else if (plugins["switchyard-router"] !== undefined) {
        choice = SwitchyardRouter.choose({
          plugin: plugins["switchyard-router"],
          messages: body.messages,
          system: body.system,
          tools: body.tools,
          catalogue: snapshot,
          classifier,
          policy: switchyard,
          routerSlug
        })
      }
      if (choice === undefined) return Either.right(request.model)
      if (Either.isLeft(choice)) return Either.left(choice.left)
      steps.push(...choice.right.steps)
      return Either.right(choice.right.modelId)
    }

    /** fusion: the panel answers in parallel, then the synthesis model answers with their analyses. */
    const fusion = (run: Run, plugin: NonNullable<Plugins["fusion"]>) =>
      Effect.gen(function*() {
        const panel = plugin.analysis_models ??
          (plugin.preset === undefined ? undefined : options.fusion?.presets?.[plugin.preset]) ??
          options.fusion?.panel
        if (panel === undefined || panel.length === 0) {
          return yield* Effect.fail(
            new GatewayError.InvalidRequest({
              message: "fusion: no analysis_models given and no default panel is configured",
              param: "plugins"
            })
          )
        }
        const synthesis = plugin.model ?? (run.snapshot.models.has(run.modelId) ? run.modelId : panel[0])
        const analysisBody: JsonObject = { ...run.body, stream: false }
        delete analysisBody.plugins
        const analyses = yield* Effect.forEach(
          panel,
          (m) =>
            Effect.either(execute({
              ...run,
              modelId: m,
              body: { ...analysisBody, model: m },
              stream: false,
              steps: [],
              extra: undefined,
              recordUsage: false
            })),
          { concurrency: "unbounded" }
        )
        let usage = zeroUsage
        const costs: Array<string> = []
        const texts: Array<string> = []
        analyses.forEach((result, i) => {
          if (Either.isLeft(result) || result.right.message === undefined || result.right.usage === undefined) {
            run.steps.push({ type: "plugin", name: "fusion", summary: `analysis by ${panel[i]} failed` })
            return
          }
          usage = addUsage(usage, result.right.usage.usage)
          costs.push(result.right.usage.cost)
          texts.push(`Analysis by ${panel[i]}:\n${textOfMessage(result.right.message)}`)
          run.steps.push({ type: "plugin", name: "fusion", summary: `analysis by ${panel[i]} done` })
        })
        if (texts.length === 0) {
          return yield* Effect.fail(new GatewayError.Unavailable({ message: "fusion: every analysis model failed" }))
        }
        run.steps.push({ type: "plugin", name: "fusion", summary: `${synthesis} synthesizes ${texts.length} analyses` })
        const body = appendSystem(
          run.body,
          `Several analysts answered the conversation below. Synthesize the best final answer from their analyses.\n\n${
            texts.join("\n\n")
          }`
        )
        return yield* execute({
          ...run,
          body: { ...body, model: synthesis },
          modelId: synthesis,
          extra: { usage, cost: Cost.sumDecimals(costs) }
        })
      })

    const needsPreflight = (plugins: Plugins) =>
      plugins.moderation !== undefined || plugins.web !== undefined || plugins["web-fetch"] !== undefined ||
      plugins["context-compression"] !== undefined

    // Validation, plugins, model choice, then the execution: a chain of Effects, not a generator (see `execute`).
    const create = (context: RequestContext, raw: unknown): Effect.Effect<MessagesOutcome, GatewayError.GatewayError> =>
      Effect.clockWith((clock) => {
        const started = clock.unsafeCurrentTimeMillis()
        const decoded = MessagesRequest.validate(raw)
        if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
        const request = decoded.right
        const { index, plugins } = enabledPlugins(request)
        const steps: Array<PipelineStep> = []
        const routed = (body: JsonObject) =>
          Effect.flatMap(catalogue.snapshot, (snapshot) => {
            const chosen = chooseModel(request, body, plugins, index, steps, snapshot)
            if (Either.isLeft(chosen)) return Effect.fail(chosen.left)
            const run: Run = {
              context,
              request,
              body,
              modelId: chosen.right,
              plugins,
              steps,
              stream: request.stream === true,
              started,
              clock,
              snapshot,
              recordUsage: true
            }
            return Effect.map(
              plugins.fusion !== undefined ? fusion(run, plugins.fusion) : execute(run),
              (result) => result.outcome
            )
          })
        return needsPreflight(plugins)
          ? Effect.flatMap(preflight(raw as JsonObject, plugins, steps), routed)
          : routed(raw as JsonObject)
      })

    return MessagesService.of({ create })
  })

/** Prompt tokens, estimated: exact enough only where it matters (near the smallest context window). */
const estimatePromptTokens = (body: JsonObject, bodyBytes: number | undefined, model: Model | undefined): number => {
  const bytes = bodyBytes ?? 0
  let smallest = Infinity
  for (const e of model?.endpoints ?? []) {
    if (e.contextLength !== undefined) smallest = Math.min(smallest, e.contextLength)
  }
  if (bodyBytes !== undefined && bytes / 3 < smallest / 2) return Math.ceil(bytes / 4)
  return ContextCompression.estimateTokens({ system: body.system, messages: body.messages, tools: body.tools })
}

type Committed =
  | {
    readonly _tag: "Committed"
    readonly attempt: Attempt
    readonly index: number
    readonly attemptStart: number
    readonly held: ReadonlyArray<StreamEvent>
    /** The attempt's next events; not to be pulled when `done` (its `message_stop` is held already). */
    readonly pull: EventPull
    readonly done: boolean
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
  call: (attempt: Attempt) => Effect.Effect<MessagesCall, UpstreamError>,
  steps: Array<PipelineStep>,
  scope: Scope.CloseableScope,
  recordFailure: (attempt: Attempt, startedAt: number, error: UpstreamError) => Effect.Effect<void>,
  clock: Clock.Clock
) =>
  Effect.gen(function*() {
    let last: UpstreamError | undefined
    for (let i = 0; i < attempts.length; i++) {
      const attempt = attempts[i]
      const attemptStart = clock.unsafeCurrentTimeMillis()
      const child = yield* Scope.fork(scope, ExecutionStrategy.sequential)
      const opened = yield* Effect.either(
        Scope.extend(Effect.flatMap(call(attempt), upstream.streamMessage), child)
      )
      const held: Array<StreamEvent> = []
      // An attempt that could not be opened failed as one whose first pull failed.
      const pull: EventPull = Either.isRight(opened) ? opened.right : Effect.fail(opened.left)
      let outcome: "content" | "done" | UpstreamError | undefined
      while (outcome === undefined) {
        const chunk = yield* Effect.either(pull)
        if (Either.isLeft(chunk)) {
          outcome = chunk.left
        } else if (chunk.right === undefined) {
          outcome = held.some((e) => e.type === "message_stop")
            ? "done"
            : new UpstreamError({ kind: "transport", message: "upstream stream ended before any content" })
        } else {
          for (const event of chunk.right) {
            held.push(event)
            if (isContent(event)) outcome = "content"
          }
        }
      }
      if (outcome === "content" || outcome === "done") {
        return {
          _tag: "Committed",
          attempt,
          index: i,
          attemptStart,
          held,
          pull,
          done: outcome === "done",
          firstContentAt: clock.unsafeCurrentTimeMillis()
        } as Committed
      }
      last = outcome
      yield* Scope.close(child, Exit.void)
      yield* recordFailure(attempt, attemptStart, last)
      const retry = isRetryable(last) && i < attempts.length - 1
      steps.push(failureStep(attempt, last, retry))
      if (!isRetryable(last)) break
    }
    return { _tag: "Failed", error: toGatewayError(last!) } as Committed
  })

/** The service, given Catalogue, Upstream and UsageLog. */
export const layer = (options: MessagesOptions = {}) => Layer.effect(MessagesService, make(options))
