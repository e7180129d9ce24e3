/**
 * The options and ports the use cases (messages, the OpenAI-compatible APIs) run on, resolved once when a service is
 * built.
 */
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Catalogue } from "../catalogue/Catalogue.js"
import type { CatalogueService } from "../catalogue/Catalogue.js"
import * as EndpointStats from "../health/EndpointStats.js"
import type { EndpointStatsService } from "../health/EndpointStats.js"
import * as Quotas from "../limits/Quotas.js"
import type { QuotasService } from "../limits/Quotas.js"
import * as DocumentParser from "../plugins/DocumentParser.js"
import type { DocumentParserService } from "../plugins/DocumentParser.js"
import * as Moderation from "../plugins/Moderation.js"
import type { ModerationService } from "../plugins/Moderation.js"
import * as ResponseHealer from "../plugins/ResponseHealer.js"
import type { ResponseHealerService } from "../plugins/ResponseHealer.js"
import * as SwitchyardRouter from "../plugins/SwitchyardRouter.js"
import type { SwitchyardPolicyService } from "../plugins/SwitchyardRouter.js"
import * as TaskClassifier from "../plugins/TaskClassifier.js"
import type { TaskClassifierService } from "../plugins/TaskClassifier.js"
import * as WebSearch from "../plugins/WebSearch.js"
import type { WebSearchService } from "../plugins/WebSearch.js"
import * as SessionAffinity from "../sessions/SessionAffinity.js"
import type { SessionAffinityService } from "../sessions/SessionAffinity.js"
import { Upstream } from "../upstream/Upstream.js"
import type { UpstreamService } from "../upstream/Upstream.js"
import { UsageLog } from "../usage/UsageLog.js"
import type { UsageLogService } from "../usage/UsageLog.js"
import * as TokenCounter from "./TokenCounter.js"
import type { TokenCounterService } from "./TokenCounter.js"

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

/** The services the use case calls; a plugin port that is not configured is `undefined`. */
export interface MessagesPorts {
  readonly catalogue: CatalogueService
  readonly upstream: UpstreamService
  readonly usageLog: UsageLogService
  readonly stats: EndpointStatsService
  readonly affinity: SessionAffinityService
  readonly classifier: TaskClassifierService
  readonly switchyard: SwitchyardPolicyService
  readonly healer: ResponseHealerService | undefined
  readonly parser: DocumentParserService | undefined
  readonly moderation: ModerationService | undefined
  readonly webSearch: WebSearchService | undefined
  readonly tokenCounter: TokenCounterService | undefined
  /** The admission step of the limits; none when the gateway enforces none. */
  readonly quotas: QuotasService | undefined
  readonly options: MessagesOptions
  /** `options.routerSlug` or `auto`. */
  readonly routerSlug: string
}

const optional = <I, S>(tag: Context.Tag<I, S>): Effect.Effect<S | undefined> =>
  Effect.map(Effect.serviceOption(tag), Option.getOrUndefined)

/** Reads the ports from the context once; plugin ports are optional. */
export const make = (options: MessagesOptions = {}) =>
  Effect.gen(function*() {
    const ports: MessagesPorts = {
      catalogue: yield* Catalogue,
      upstream: yield* Upstream,
      usageLog: yield* UsageLog,
      stats: yield* EndpointStats.EndpointStats,
      affinity: yield* SessionAffinity.SessionAffinity,
      classifier: (yield* optional(TaskClassifier.TaskClassifier)) ?? TaskClassifier.keywords,
      switchyard: (yield* optional(SwitchyardRouter.SwitchyardPolicy)) ?? SwitchyardRouter.fromRules([]),
      healer: yield* optional(ResponseHealer.ResponseHealer),
      parser: yield* optional(DocumentParser.DocumentParser),
      moderation: yield* optional(Moderation.Moderation),
      webSearch: yield* optional(WebSearch.WebSearch),
      tokenCounter: yield* optional(TokenCounter.TokenCounter),
      quotas: yield* optional(Quotas.Quotas),
      options,
      routerSlug: options.routerSlug ?? "auto"
    }
    return ports
  })
