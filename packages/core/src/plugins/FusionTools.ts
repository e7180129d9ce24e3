/**
 * The fusion analysts' tools (spec 2.1.3: `tools` defaults to the web search and web fetch server tools, an empty
 * array disables them; `max_tool_calls` 1 to 16, default 4). The gateway runs them the way the `web` and `web-fetch`
 * plugins do, through the `WebSearch` port: once for the whole panel, before it answers, the results added to the
 * analysts' system prompt; not as a tool loop of each analyst. `max_tool_calls` caps the searches and fetches of that
 * one round: the search counts one, then up to three pages (the web-fetch plugin's limit).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as GatewayError from "../errors/GatewayError.js"
import { appendSystem, type JsonObject } from "../messages/Wire.js"
import type { PipelineStep } from "../routing/RoutePlanner.js"
import * as Preflight from "./Preflight.js"
import type { Plugins } from "./RequestPlugins.js"
import * as TaskClassifier from "./TaskClassifier.js"
import type * as WebSearch from "./WebSearch.js"

type FusionPlugin = NonNullable<Plugins["fusion"]>

/** The tool types that mean web search: OpenRouter's server tool, and Anthropic's dated ones. */
export const WEB_SEARCH_TYPES: ReadonlyArray<string> = [
  "openrouter:web_search",
  "web_search",
  "web_search_20250305",
  "web_search_20260209"
]

/** The tool types that mean web fetch: OpenRouter's server tool, and Anthropic's dated one. */
export const WEB_FETCH_TYPES: ReadonlyArray<string> = ["openrouter:web_fetch", "web_fetch", "web_fetch_20250910"]

/** `max_tool_calls` when the plugin gives none (spec 2.1.3). */
export const DEFAULT_MAX_TOOL_CALLS = 4

/** The web-fetch plugin's page limit, kept for the analysts' fetches. */
const MAX_PAGES = 3

/** What the analysts get: a web search, up to `pages` fetched pages, or (`note`) why they run without tools. */
export interface AnalystTools {
  readonly search: boolean
  readonly pages: number
  /** Said in the pipeline when the default tools cannot run (no search provider configured). */
  readonly note?: string | undefined
}

const NONE: AnalystTools = { search: false, pages: 0 }

/**
 * The analysts' tools of a fusion plugin, or the 400 for tools the gateway cannot honour: a type it does not know
 * (`plugins[i].tools[j].type`), or web tools asked explicitly where no search provider is configured
 * (`plugins[i].tools`). The default tools without a provider are not an error: the analysts run without them and
 * the pipeline says so (`note`).
 */
export const analystTools = (
  plugin: FusionPlugin,
  pluginIndex: number,
  webSearch: WebSearch.WebSearchService | undefined
): Either.Either<AnalystTools, GatewayError.InvalidRequest> => {
  const param = `plugins[${pluginIndex}].tools`
  const tools = plugin.tools
  if (tools !== undefined && tools.length === 0) return Either.right(NONE)
  let search = tools === undefined
  let fetch = tools === undefined
  for (const [j, tool] of (tools ?? []).entries()) {
    if (WEB_SEARCH_TYPES.includes(tool.type)) search = true
    else if (WEB_FETCH_TYPES.includes(tool.type)) fetch = true
    else {
      return Either.left(
        new GatewayError.InvalidRequest({
          message:
            `${param}[${j}].type: fusion: the analysts' tool type '${tool.type}' is not supported; the gateway runs web search (${
              WEB_SEARCH_TYPES.join(", ")
            }) and web fetch (${WEB_FETCH_TYPES.join(", ")})`,
          param: `${param}[${j}].type`
        })
      )
    }
  }
  if (webSearch === undefined) {
    if (tools === undefined) {
      return Either.right({
        ...NONE,
        note: "the analysts ran without web search and web fetch (their default tools): no search provider is " +
          "configured on this gateway"
      })
    }
    return Either.left(
      new GatewayError.InvalidRequest({
        message: `${param}: fusion: the analysts' web search and web fetch tools need a search provider, and none ` +
          "is configured on this gateway; send tools: [] to run the analysts without tools",
        param
      })
    )
  }
  const calls = plugin.max_tool_calls ?? DEFAULT_MAX_TOOL_CALLS
  const pages = fetch ? Math.min(MAX_PAGES, calls - (search ? 1 : 0)) : 0
  return Either.right({ search, pages })
}

/** The analysts' body with their tools' results in its system prompt; a failed search or fetch adds nothing. */
export const withTools = (
  webSearch: WebSearch.WebSearchService | undefined,
  body: JsonObject,
  tools: AnalystTools,
  steps: Array<PipelineStep>
): Effect.Effect<JsonObject> => {
  if (tools.note !== undefined) steps.push({ type: "plugin", name: "fusion", summary: tools.note })
  if (webSearch === undefined || (!tools.search && tools.pages === 0)) return Effect.succeed(body)
  const userText = TaskClassifier.latestUserText(body.messages)
  const searched = tools.search
    ? Preflight.withSearchResults(webSearch, body, userText, steps, appendSystem)
    : Effect.succeed(body)
  return tools.pages === 0 ? searched : Effect.flatMap(
    searched,
    (out) => Preflight.withFetchedPages(webSearch, out, userText, steps, appendSystem, tools.pages)
  )
}
