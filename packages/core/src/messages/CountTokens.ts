/**
 * `count_tokens`: the prompt's size in tokens, as Anthropic's `POST /v1/messages/count_tokens` answers it. The
 * endpoints of the model are asked in the order a request would try them, the first that can count answers; when
 * none can (no Anthropic endpoint, or all failed), the prompt is counted locally (`TokenCounter`). One usage record,
 * at no cost.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as GatewayError from "../errors/GatewayError.js"
import * as ContextCompression from "../plugins/ContextCompression.js"
import type { Attempt, PipelineStep } from "../routing/RoutePlanner.js"
import * as RoutePlanner from "../routing/RoutePlanner.js"
import type { UpstreamError } from "../upstream/Upstream.js"
import type { MessagesPorts } from "./MessagesPorts.js"
import * as MessagesRequest from "./MessagesRequest.js"
import type { RequestContext } from "./RequestContext.js"
import * as UpstreamBody from "./UpstreamBody.js"
import * as UsageAccounting from "./UsageAccounting.js"
import type { JsonObject } from "./Wire.js"
import { withField } from "./Wire.js"

/** The answer: `{input_tokens}`, and with metadata asked for, how it was counted. */
export interface TokenCount {
  readonly input_tokens: number
  readonly service_metadata?: { readonly pipeline: ReadonlyArray<PipelineStep> } | undefined
}

/** Fields a messages body has that the counting APIs do not take. */
const NOT_COUNTED = new Set(["max_tokens", "stream", "temperature", "top_p", "top_k", "stop_sequences", "metadata"])

/** The body a provider's counting API takes: the prompt, the tools and the thinking settings, nothing else. */
export const countBody = (body: JsonObject): JsonObject => {
  const out: JsonObject = {}
  for (const [key, value] of Object.entries(UpstreamBody.forwardBody(body))) {
    if (!NOT_COUNTED.has(key)) out[key] = value
  }
  return out
}

const local = (ports: MessagesPorts, body: JsonObject): Effect.Effect<{ tokens: number; by: string }> =>
  ports.tokenCounter === undefined
    ? Effect.succeed({
      tokens: ContextCompression.estimateTokens({ system: body.system, messages: body.messages, tools: body.tools }),
      by: "an estimate of four characters per token"
    })
    : Effect.map(ports.tokenCounter.count(body), (tokens) => ({ tokens, by: `${ports.tokenCounter!.name}` }))

/** Asks the attempts' endpoints in order; the first that counts answers. */
const remote = (
  ports: MessagesPorts,
  attempts: ReadonlyArray<Attempt>,
  body: JsonObject,
  context: RequestContext,
  steps: Array<PipelineStep>
): Effect.Effect<{ tokens: number; attempt: Attempt } | undefined> => {
  const count = ports.upstream.countTokens
  if (count === undefined) return Effect.succeed(undefined)
  const next = (i: number): Effect.Effect<{ tokens: number; attempt: Attempt } | undefined> => {
    if (i >= attempts.length) return Effect.succeed(undefined)
    const attempt = attempts[i]
    return Effect.matchEffect(
      count({
        endpoint: attempt.endpoint,
        body: withField(body, "model", attempt.endpoint.upstreamModel),
        headers: context.headers
      }),
      {
        onSuccess: (tokens) => Effect.succeed({ tokens, attempt }),
        onFailure: (error: UpstreamError) => {
          if (error.kind !== "unsupported") {
            steps.push({
              type: "count",
              name: attempt.endpoint.provider,
              summary: `${attempt.model.id} via ${attempt.endpoint.provider} could not count: ${error.message}`
            })
          }
          return next(i + 1)
        }
      }
    )
  }
  return next(0)
}

/** The use case's `countTokens`. */
export const countTokens =
  (ports: MessagesPorts) =>
  (context: RequestContext, raw: unknown): Effect.Effect<TokenCount, GatewayError.GatewayError> =>
    Effect.clockWith((clock) => {
      const started = clock.unsafeCurrentTimeMillis()
      const decoded = MessagesRequest.validate(raw)
      const requested: UsageAccounting.Requested = {
        context,
        started,
        clock,
        stream: false,
        modelId: Either.isRight(decoded) ? decoded.right.model : null,
        sessionId: context.sessionId,
        user: undefined,
        recordUsage: true
      }
      if (Either.isLeft(decoded)) return UsageAccounting.failed(ports.usageLog, requested, decoded.left, 0)
      const request = decoded.right
      const body = countBody(raw as JsonObject)
      return Effect.flatMap(ports.catalogue.snapshot, (snapshot) => {
        const plan = RoutePlanner.plan({
          model: request.model,
          models: request.models,
          fallbacks: request.fallbacks,
          provider: RoutePlanner.effectivePreferences(request.provider, request.route),
          requirements: { tools: false, images: false, documents: false }
        }, snapshot)
        if (Either.isLeft(plan)) return UsageAccounting.failed(ports.usageLog, requested, plan.left, 0)
        const steps: Array<PipelineStep> = []
        return Effect.flatMap(remote(ports, plan.right.attempts, body, context, steps), (counted) => {
          const answer = counted !== undefined
            ? Effect.succeed({
              tokens: counted.tokens,
              attempt: counted.attempt as Attempt | undefined,
              step: `counted by ${counted.attempt.model.id} via ${counted.attempt.endpoint.provider}`
            })
            : Effect.map(local(ports, body), ({ by, tokens }) => ({
              tokens,
              attempt: undefined as Attempt | undefined,
              step: `counted locally (${by}): no endpoint of the model counts tokens`
            }))
          return Effect.flatMap(answer, ({ attempt, step, tokens }) => {
            steps.push({ type: "count", name: "count_tokens", summary: step })
            const result: TokenCount = context.metadata
              ? { input_tokens: tokens, service_metadata: { pipeline: steps } }
              : { input_tokens: tokens }
            return Effect.as(
              UsageAccounting.record(ports.usageLog, requested, {
                attempt,
                attempts: attempt === undefined ? 0 : 1,
                status: 200,
                errorType: null,
                charge: UsageAccounting.noCharge,
                ttfbMs: null
              }),
              result
            )
          })
        })
      })
    })
