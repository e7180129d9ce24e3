/**
 * One execution of a messages request: the route planned (health, session, a random draw), then the attempts run
 * for a JSON answer or a stream.
 */
import * as Effect from "effect/Effect"
import type { Model } from "../catalogue/Catalogue.js"
import type * as GatewayError from "../errors/GatewayError.js"
import * as Admission from "../execution/Admission.js"
import * as Attempts from "../execution/Attempts.js"
import * as Routing from "../execution/Routing.js"
import * as StreamCommit from "../execution/StreamCommit.js"
import * as Quotas from "../limits/Quotas.js"
import type { DocumentParserService } from "../plugins/DocumentParser.js"
import * as RoutePlanner from "../routing/RoutePlanner.js"
import * as Conversation from "./Conversation.js"
import * as MessagesDialect from "./MessagesDialect.js"
import type { MessagesPorts } from "./MessagesPorts.js"
import type { RequestContext } from "./RequestContext.js"
import type { ExecutionResult, Run } from "./Run.js"
import * as UpstreamBody from "./UpstreamBody.js"
import * as UsageAccounting from "./UsageAccounting.js"

/** How an execution may treat its run's body. */
export interface ExecuteOptions {
  /**
   * The body is the client's, as parsed, and nothing else reads it: a large one's conversation may be let go once an
   * attempt's text is made (see `Conversation`). Not for runs that share a body (fusion's).
   */
  readonly ownsBody?: boolean | undefined
}

/** What a run asks of the route planner, and what its body needs and gets on the way (the per-attempt transforms). */
export interface RouteOf {
  readonly request: RoutePlanner.RouteRequest
  readonly needs: RoutePlanner.Requirements
  readonly parser: DocumentParserService | undefined
  readonly compression: boolean
  readonly estimatedPromptTokens: number | undefined
}

/** What `routeOf` reads of a run. */
export type RoutedRun = Pick<Run, "body" | "modelId" | "plugins" | "request" | "snapshot"> & {
  readonly context: Pick<RequestContext, "bodyBytes">
}

/**
 * The route request of a run: its model, the request's routing fields and what the body needs of an endpoint. Pure;
 * fusion plans its panel with it before running anything, and a batch's submission its requests.
 */
export const routeOf = (ports: Pick<MessagesPorts, "parser">, run: RoutedRun): RouteOf => {
  const { body, context, plugins, request, snapshot } = run
  const parser = parserOf(ports, plugins)
  const compression = plugins["context-compression"] !== undefined
  const needs = UpstreamBody.requirements(request, body)
  const estimatedPromptTokens = compression
    ? undefined
    : UpstreamBody.estimatePromptTokens(body, context.bodyBytes, snapshot.models.get(run.modelId))
  return {
    request: routeRequest(run, run.modelId, needs, parser, estimatedPromptTokens),
    needs,
    parser,
    compression,
    estimatedPromptTokens
  }
}

/**
 * The route request of a run on each model a router may choose, as `routeOf` makes it for the one chosen. What does
 * not depend on the model is read from the body once, on the first call (none when no router runs), and the close
 * count of its tokens at most once, whichever models are near their context window.
 */
export const routesOf = (
  ports: Pick<MessagesPorts, "parser">,
  run: Omit<RoutedRun, "modelId" | "snapshot">
): (model: Model) => RoutePlanner.RouteRequest => {
  const { body, context, plugins, request } = run
  let read: { readonly needs: RoutePlanner.Requirements; readonly parser: DocumentParserService | undefined }
  let count: number | undefined
  const counted = () => count ??= UpstreamBody.countPromptTokens(body)
  return (model) => {
    read ??= { needs: UpstreamBody.requirements(request, body), parser: parserOf(ports, plugins) }
    const estimated = plugins["context-compression"] !== undefined
      ? undefined
      : UpstreamBody.estimatePromptTokens(body, context.bodyBytes, model, counted)
    return routeRequest(run, model.id, read.needs, read.parser, estimated)
  }
}

/** The parser of a run's documents: none unless the file-parser plugin asks for text (any engine but `native`). */
const parserOf = (ports: Pick<MessagesPorts, "parser">, plugins: RoutedRun["plugins"]) =>
  plugins["file-parser"] === undefined || plugins["file-parser"].pdf?.engine === "native" ? undefined : ports.parser

const routeRequest = (
  { body, request }: Pick<RoutedRun, "body" | "request">,
  model: string,
  needs: RoutePlanner.Requirements,
  parser: DocumentParserService | undefined,
  estimatedPromptTokens: number | undefined
): RoutePlanner.RouteRequest => ({
  model,
  models: request.models,
  fallbacks: request.fallbacks,
  provider: RoutePlanner.effectivePreferences(request.provider, request.route),
  requirements: {
    api: "messages",
    tools: needs.tools,
    images: needs.images,
    maxTokens: needs.maxTokens,
    documents: needs.documents && parser === undefined,
    parameters: RoutePlanner.usedParameters(body),
    estimatedPromptTokens
  }
})

/**
 * Plans the route of a run, then runs its attempts. A chain of Effects rather than one `Effect.gen`: this is the hot
 * path of every request, and each generator step costs more than the work it does.
 */
export const execute = (
  ports: MessagesPorts,
  run: Run,
  options?: ExecuteOptions
): Effect.Effect<ExecutionResult, GatewayError.GatewayError> => {
  const { body, context } = run
  const { compression, estimatedPromptTokens, needs, parser, request: routeRequest } = routeOf(ports, run)
  const routed = Routing.plan(ports, {
    request: routeRequest,
    workspace: context.principal.workspace,
    sessionId: run.sessionId,
    snapshot: run.snapshot,
    clock: run.clock
  })
  return Effect.matchEffect(routed, {
    onFailure: (error) => UsageAccounting.failed(ports.usageLog, run, error, 0),
    onSuccess: (route) => {
      run.steps.push(...route.steps)
      const forward = UpstreamBody.forwardBody(body)
      const letGo = options?.ownsBody === true && parser === undefined && !compression &&
        (context.bodyBytes ?? 0) >= Conversation.RELEASE_FROM
      const calls = UpstreamBody.attemptCalls(
        ports.upstream,
        forward,
        context.headers,
        needs,
        { parser, compression },
        run.steps,
        letGo ? Conversation.make(body, run.request, forward, UpstreamBody.forwardBody) : undefined
      )
      return Admission.admitted(
        ports.quotas,
        ports.usageLog,
        run,
        () =>
          Quotas.demandOf(
            route.attempts,
            estimatedPromptTokens ?? UpstreamBody.estimatePromptTokens(body, context.bodyBytes, undefined),
            needs.maxTokens
          ),
        (admitted) => {
          const planned = {
            run: admitted,
            attempts: route.attempts,
            affinityKey: route.affinityKey,
            dialect: MessagesDialect.make(ports, admitted, calls)
          }
          return admitted.stream ? StreamCommit.stream(ports, planned) : Attempts.json(ports, planned)
        },
        Admission.tellResult
      )
    }
  })
}
