/**
 * The OpenAI-compatible front door as a use case: `POST /v1/chat/completions`, `/v1/embeddings` and `/v1/responses`
 * through the same core as `/v1/messages`: validation of the gateway's fields and limits, the plugins that apply,
 * route planning (provider preferences, fallbacks, health, stickiness, prefer-then-clamp), attempts with fallback
 * before the first content, usage and cost. An OpenAI-compatible endpoint gets the body as the client sent it;
 * another adapter translates it (an Anthropic endpoint serves chat completions).
 */
import type * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Predicate from "effect/Predicate"
import * as GatewayError from "../errors/GatewayError.js"
import * as Admission from "../execution/Admission.js"
import * as Attempts from "../execution/Attempts.js"
import * as Charging from "../execution/Charging.js"
import type { Execution } from "../execution/Execution.js"
import type { Outcome } from "../execution/Outcome.js"
import * as Routing from "../execution/Routing.js"
import * as StreamCommit from "../execution/StreamCommit.js"
import * as Quotas from "../limits/Quotas.js"
import * as Conversation from "../messages/Conversation.js"
import * as MessagesPorts from "../messages/MessagesPorts.js"
import type { MessagesOptions } from "../messages/MessagesPorts.js"
import type { RequestContext } from "../messages/RequestContext.js"
import { type JsonObject, withField } from "../messages/Wire.js"
import * as ModelChoice from "../plugins/ModelChoice.js"
import * as Preflight from "../plugins/Preflight.js"
import { enabledPlugins, type Plugins } from "../plugins/RequestPlugins.js"
import * as GatewayFields from "../routing/GatewayFields.js"
import type { OpenAiApi } from "../upstream/Upstream.js"
import * as OpenAiBodies from "./OpenAiBodies.js"
import * as OpenAiDialects from "./OpenAiDialects.js"
import * as OpenAiHealing from "./OpenAiHealing.js"
import * as OpenAiRequest from "./OpenAiRequest.js"

export interface OpenAiServiceShape {
  /** One request to `api`: a JSON answer, or an event stream when the body asks for one. */
  readonly create: (
    api: OpenAiApi,
    context: RequestContext,
    body: unknown
  ) => Effect.Effect<Outcome, GatewayError.GatewayError>
}

/** The OpenAI-compatible use case as a service. */
export class OpenAiService extends Context.Tag("@model-gateway/core/OpenAiService")<
  OpenAiService,
  OpenAiServiceShape
>() {}

/** Plugins that rewrite a messages body per endpoint, or run several messages requests: served on /v1/messages. */
const MESSAGES_ONLY = ["context-compression", "file-parser", "fusion"] as const

const refuse = (ports: MessagesPorts.MessagesPorts, requested: Charging.Requested, error: GatewayError.GatewayError) =>
  Charging.failed(ports.usageLog, requested, error, 0)

const requestedOf = (
  context: RequestContext,
  started: number,
  clock: Clock.Clock,
  raw: unknown,
  stream: boolean
): Charging.Requested => {
  const body = Predicate.isRecord(raw) ? raw : undefined
  return {
    context,
    started,
    clock,
    stream,
    modelId: typeof body?.model === "string" ? body.model : null,
    sessionId: context.sessionId,
    user: undefined,
    recordUsage: true
  }
}

/** The refusal of a request to `api` that enables plugins served on `/v1/messages` only; undefined without them. */
export const messagesOnly = (plugins: Plugins, api: OpenAiApi): GatewayError.InvalidRequest | undefined => {
  const used = MESSAGES_ONLY.filter((id) => plugins[id] !== undefined)
  return used.length === 0 ? undefined : new GatewayError.InvalidRequest({
    message: `plugin${used.length === 1 ? "" : "s"} ${used.join(", ")} ${
      used.length === 1 ? "is" : "are"
    } served on /v1/messages only, not on the ${api} API`,
    param: "plugins"
  })
}

/** A Responses request's `previous_response_id`, when it names one. */
const previousResponseOf = (request: OpenAiRequest.OpenAiRequest["request"]): string | undefined => {
  const previous = (request as OpenAiRequest.ResponsesRequest).previous_response_id
  return typeof previous === "string" ? previous : undefined
}

/** The service's `create`. */
const create =
  (ports: MessagesPorts.MessagesPorts) =>
  (api: OpenAiApi, context: RequestContext, raw: unknown): Effect.Effect<Outcome, GatewayError.GatewayError> =>
    Effect.clockWith((clock) => {
      const started = clock.unsafeCurrentTimeMillis()
      const body = raw as JsonObject
      const stream = api !== "embeddings" && Predicate.isRecord(raw) && raw.stream === true
      const requested = requestedOf(context, started, clock, raw, stream)
      const decoded = OpenAiRequest.validate(api, raw)
      if (Either.isLeft(decoded)) return refuse(ports, requested, decoded.left)
      const request = decoded.right.request
      const validated: Charging.Requested = {
        ...requested,
        modelId: request.model,
        sessionId: request.session_id ?? context.sessionId,
        user: request.user,
        metadata: GatewayFields.customTrace(request.trace)
      }
      if (api === "embeddings" && body.stream === true) {
        return refuse(
          ports,
          validated,
          new GatewayError.InvalidRequest({ message: "stream: embeddings are not streamed", param: "stream" })
        )
      }
      const { index, plugins } = enabledPlugins(request)
      const unsupported = messagesOnly(plugins, api)
      if (unsupported !== undefined) return refuse(ports, validated, unsupported)
      const run: Execution = { ...validated, steps: [] }
      const routed = (forwarded: JsonObject) =>
        Effect.flatMap(ports.catalogue.snapshot, (snapshot) => {
          // What the body needs of an endpoint does not depend on the model: read once, for the router's candidates too.
          const asked = OpenAiBodies.routeRequest(api, request, request.model, forwarded, context.bodyBytes)
          const chosen = ModelChoice.chooseModel(
            ports,
            request,
            OpenAiBodies.conversationOf(api, forwarded),
            plugins,
            index,
            run.steps,
            snapshot,
            (model) => ({ ...asked, model: model.id })
          )
          if (Either.isLeft(chosen)) return refuse(ports, validated, chosen.left)
          const modelId = chosen.right
          const planning: Execution = { ...run, modelId }
          const routeRequest = modelId === asked.model ? asked : { ...asked, model: modelId }
          const requirements = routeRequest.requirements
          return Effect.matchEffect(
            Routing.plan(ports, {
              request: routeRequest,
              workspace: context.principal.workspace,
              sessionId: planning.sessionId,
              previousResponseId: api === "responses" ? previousResponseOf(request) : undefined,
              snapshot,
              clock
            }),
            {
              onFailure: (error) => refuse(ports, planning, error),
              onSuccess: (route) => {
                planning.steps.push(...route.steps)
                const demand = () =>
                  Quotas.demandOf(route.attempts, requirements.estimatedPromptTokens ?? 0, requirements.maxTokens, {
                    output: api !== "embeddings",
                    outputField: OpenAiBodies.maxTokensField(api, forwarded)
                  })
                return Admission.admitted(ports.quotas, ports.usageLog, planning, demand, (execution) => {
                  const forwardOf = (from: JsonObject) => OpenAiBodies.forwardBody(api, from, stream)
                  const forward = forwardOf(forwarded)
                  // A large body read as it came lets go of its conversation once sent (see `Conversation`).
                  const conversation = forwarded === body && (context.bodyBytes ?? 0) >= Conversation.RELEASE_FROM
                    ? Conversation.make(body, request, forward, forwardOf, Conversation.OPENAI_FIELDS[api])
                    : undefined
                  const calls: OpenAiDialects.Calls = {
                    upstream: ports.upstream,
                    api,
                    bodyFor: (attempt) => {
                      const from = conversation === undefined ? forward : conversation.body()
                      const out = withField(from, "model", attempt.endpoint.upstreamModel)
                      return attempt.maxTokens === undefined ? out : OpenAiBodies.clamp(api, out, attempt.maxTokens)
                    },
                    headers: context.headers,
                    bodyMade: conversation?.made
                  }
                  const dialect = api === "chat"
                    ? OpenAiDialects.chat(calls, {
                      includeUsage: OpenAiBodies.wantsUsage(forwarded),
                      finish: plugins["response-healing"] === undefined
                        ? undefined
                        : (answer) => OpenAiHealing.heal(ports.healer, answer, forwarded, execution.steps)
                    })
                    : api === "responses"
                    ? OpenAiDialects.responses(calls, forwarded.store !== false)
                    : OpenAiDialects.embeddings(calls)
                  const planned = {
                    run: execution,
                    attempts: route.attempts,
                    affinityKey: route.affinityKey,
                    responseKey: route.responseKey,
                    dialect
                  }
                  return stream ? StreamCommit.stream(ports, planned) : Attempts.json(ports, planned)
                }, Admission.tellResult).pipe(Effect.map((result) => result.outcome))
              }
            }
          )
        })
      return Preflight.needsPreflight(plugins)
        ? Effect.flatMap(
          Effect.catchAll(
            Preflight.preflight(ports, body, plugins, run.steps, OpenAiBodies.appendSystem(api)),
            (error) => refuse(ports, validated, error)
          ),
          routed
        )
        : routed(body)
    })

/** Builds the service from its ports; plugin ports are optional. */
export const make = (options: MessagesOptions = {}) =>
  Effect.map(MessagesPorts.make(options), (ports) => OpenAiService.of({ create: create(ports) }))

/** The service, given the same ports as the messages use case. */
export const layer = (options: MessagesOptions = {}) => Layer.effect(OpenAiService, make(options))
